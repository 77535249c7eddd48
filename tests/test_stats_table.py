"""The statistics table, from hand-written stats.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mscl.__main__ import main as mscl_main
from mscl.data.stats_table import CAPTION, TITLE, format_count, latex_escape, parse_dataset_arguments, statistics_frame, write_statistics_table
from mscl.errors import InputError

# name -> (modality, train, val, test, num_labels, avg_labels)
STATS = {
    "mimic3_full": ("text", 47_723, 1_631, 3_372, 8_692, 15.66),
    "aapd": ("text", 37_827, 6_705, 11_308, 54, 2.41),
    "coco": ("image", 82_081, 20_068, 20_069, 80, 2.9),
    "my_set": ("image", 999, 1_050, 1_949, 7, 1.04),
    "voc": ("image", 5_011, 2_476, 2_476, 20, 1.46),
    "mimic3_50": ("text", 8_066, 1_573, 1_729, 50, 5.69),
}

TABULAR = r"""\begin{tabular}{@{}lcccccc@{}}
\toprule
\multicolumn{1}{c}{Dataset} & Train & Val & Test & Total \# labels & Avg \# labels & Paper train / val / test \\
\midrule
MS-COCO & 82.1k & 20.1k & 20.1k & 80 & 2.9 & 82.0k / 20.2k / 20.2k \\
my\_set & 999 & 1.1k & 1.9k & 7 & 1.0 & - \\
PASCAL & 5.0k & 2.5k & 2.5k & 20 & 1.5 & 5.0k / 2.5k / 2.5k \\
\midrule
AAPD & 37.8k & 6.7k & 11.3k & 54 & 2.4 & 37.8k / 6.7k / 11.3k \\
\midrule
MIMIC-III-Full & 47,723 & 1,631 & 3,372 & 8,692 & 15.7 & 47,723 / 1,631 / 3,372 \\
MIMIC-III-50 & 8,066 & 1,573 & 1,729 & 50 & 5.7 & 8,066 / 1,573 / 1,729 \\
\bottomrule
\end{tabular}
"""

TABLE_MD = """| Dataset | Train | Val | Test | Total # labels | Avg # labels | Paper train / val / test |
|:---|---:|---:|---:|---:|---:|---:|
| MS-COCO | 82.1k | 20.1k | 20.1k | 80 | 2.9 | 82.0k / 20.2k / 20.2k |
| my_set | 999 | 1.1k | 1.9k | 7 | 1.0 | - |
| PASCAL | 5.0k | 2.5k | 2.5k | 20 | 1.5 | 5.0k / 2.5k / 2.5k |
| AAPD | 37.8k | 6.7k | 11.3k | 54 | 2.4 | 37.8k / 6.7k / 11.3k |
| MIMIC-III-Full | 47,723 | 1,631 | 3,372 | 8,692 | 15.7 | 47,723 / 1,631 / 3,372 |
| MIMIC-III-50 | 8,066 | 1,573 | 1,729 | 50 | 5.7 | 8,066 / 1,573 / 1,729 |
"""

# The tabular under its title (a comment line) with the caption below it; the Markdown under title and caption.
EXPECTED_TEX = f"% {TITLE}\n" + TABULAR + "\\par\\smallskip\n{\\footnotesize " + latex_escape(CAPTION) + "\\par}\n"
EXPECTED_MD = f"**{TITLE}.** {CAPTION}\n\n" + TABLE_MD

EXPECTED_CSV = """key,Dataset,Train,Val,Test,Total # labels,Avg # labels,Paper train,Paper val,Paper test,Paper note
coco,MS-COCO,82081,20068,20069,80,2.9,82.0k,20.2k,20.2k,
my_set,my_set,999,1050,1949,7,1.04,,,,
voc,PASCAL,5011,2476,2476,20,1.46,5.0k,2.5k,2.5k,
aapd,AAPD,37827,6705,11308,54,2.41,37.8k,6.7k,11.3k,
mimic3_full,MIMIC-III-Full,47723,1631,3372,8692,15.66,"47,723","1,631","3,372",
mimic3_50,MIMIC-III-50,8066,1573,1729,50,5.69,"8,066","1,573","1,729",
"""


def write_stats(folder: Path, modality: str, train: int, val: int, test: int, num_labels: int, avg_labels: float) -> Path:
    """A prepared-dataset folder holding only a hand-written stats.json."""
    folder.mkdir(parents=True)
    stats = {"modality": modality, "counts": {"train": train, "val": val, "test": test}, "num_labels": num_labels, "avg_labels": avg_labels}
    (folder / "stats.json").write_text(json.dumps(stats))
    return folder


@pytest.fixture
def datasets(tmp_path) -> list[tuple[str, Path]]:
    """The STATS datasets in their (interleaved) dict order."""
    return [(name, write_stats(tmp_path / "data" / name, *values)) for name, values in STATS.items()]


@pytest.mark.parametrize(
    "count, group, text",
    [
        (999, "image", "999"),
        (1_000, "image", "1.0k"),
        (1_050, "text", "1.1k"),  # half rounds up
        (1_949, "image", "1.9k"),
        (1_950, "image", "2.0k"),
        (125_400, "image", "125.4k"),
        (1_234_567, "image", "1,234.6k"),
        (47_723, "mimic", "47,723"),
        (188_533, "mimic", "188,533"),
        (50, "mimic", "50"),
    ],
)
def test_count_formatting_follows_the_paper(count, group, text):
    assert format_count(count, group) == text


def test_frame_orders_rows_by_group_then_given_order(datasets):
    frame = statistics_frame(datasets)
    assert list(frame["key"]) == ["coco", "my_set", "voc", "aapd", "mimic3_full", "mimic3_50"]
    assert list(frame["group"]) == ["image", "image", "image", "text", "mimic", "mimic"]
    assert frame.loc[0, "Train"] == 82_081 and frame.loc[4, "Total # labels"] == 8_692


def test_written_files_match_the_hand_written_tables(datasets, tmp_path):
    prefix = tmp_path / "tables" / "statistics"
    write_statistics_table(datasets, prefix)
    assert (tmp_path / "tables" / "statistics.tex").read_text() == EXPECTED_TEX
    assert (tmp_path / "tables" / "statistics.md").read_text() == EXPECTED_MD
    assert (tmp_path / "tables" / "statistics.csv").read_text() == EXPECTED_CSV
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == ["statistics.csv", "statistics.html", "statistics.md", "statistics.tex"]
    page = (tmp_path / "tables" / "statistics.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<td>82.1k</td>" in page and '<tr class="rule"><td class="l">AAPD</td>' in page


def test_names_say_what_ran(datasets, tmp_path):
    argv = ["stats-table", "--out-prefix", str(tmp_path / "t" / "stats"), "--name", "coco=COCO-demo (30 glyph classes)", "--name", "voc=VOC-demo"]
    for name, folder in datasets:
        argv += ["--dataset", f"{name}={folder}"]
    assert mscl_main(argv) == 0
    markdown = (tmp_path / "t" / "stats.md").read_text()
    assert "| COCO-demo (30 glyph classes) | 82.1k |" in markdown and "| VOC-demo | 5.0k |" in markdown and "| AAPD | 37.8k |" in markdown
    assert "COCO-demo (30 glyph classes)" in (tmp_path / "t" / "stats.html").read_text()
    assert mscl_main([*argv, "--name", "broken"]) == 1  # not NAME=DISPLAY: an input error


def test_cli_writes_the_three_files(datasets, tmp_path):
    argv = ["stats-table", "--out-prefix", str(tmp_path / "t" / "stats")]
    for name, folder in datasets:
        argv += ["--dataset", f"{name}={folder}"]
    assert mscl_main(argv) == 0
    assert (tmp_path / "t" / "stats.tex").read_text() == EXPECTED_TEX


def test_missing_stats_and_missing_keys_name_the_file(tmp_path):
    with pytest.raises(InputError, match="not found") as error:
        statistics_frame([("coco", tmp_path / "absent")])
    assert error.value.path == str(tmp_path / "absent" / "stats.json")

    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "stats.json").write_text(json.dumps({"modality": "image", "counts": {"train": 1, "val": 1, "test": 1}, "avg_labels": 1.0}))
    with pytest.raises(InputError) as error:
        statistics_frame([("coco", folder)])
    assert error.value.path == str(folder / "stats.json") and error.value.field == "num_labels"

    (folder / "stats.json").write_text(json.dumps({"counts": {"train": 1, "val": 1}, "num_labels": 2, "avg_labels": 1.0}))
    with pytest.raises(InputError, match="'test'"):
        statistics_frame([("coco", folder)])


def test_failed_run_writes_nothing(datasets, tmp_path):
    out = tmp_path / "tables"
    with pytest.raises(InputError):
        write_statistics_table([*datasets, ("extra", tmp_path / "absent")], out / "statistics")
    assert not out.exists()


@pytest.mark.parametrize("argument", ["coco", "=dir", "coco="])
def test_malformed_dataset_argument_is_an_input_error(argument):
    with pytest.raises(InputError) as error:
        parse_dataset_arguments([argument])
    assert error.value.field == "--dataset"


def test_repeated_dataset_name_is_an_input_error():
    with pytest.raises(InputError, match="twice"):
        parse_dataset_arguments(["coco=a", "coco=b"])


def test_no_dataset_is_an_input_error():
    with pytest.raises(InputError, match="no dataset"):
        statistics_frame([])
