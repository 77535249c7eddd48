"""Datasets with no code: `prepare-csv` (one CSV/TSV file) and `prepare-manifest` (a folder already
in the manifest format), and the run spec's `dataset_family` that lets the probe, the label prior
and collect score a dataset whose name mscl.metrics.DATASET_FAMILIES does not know.

Every fixture is a real file written here (CSV/TSV through the csv module, PNG/JPEG images through
Pillow, parquet through pandas); the manifests are checked by hand, sample by sample. Bad inputs
go through `python -m mscl ...` in this process and must fail with the file, the line or row, the
field and the fix, never quote a text cell (it may be a clinical note), and leave nothing behind.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from mscl.__main__ import main as mscl_main
from mscl.data.csv_source import joined_by
from mscl.data.manifest import read_labels, read_stats, write_dataset
from mscl.layout import DATASET_FAMILY_NAMES
from mscl.metrics import DATASET_FAMILIES, FAMILY_MACRO_F1, MACRO_F1_CAML, MACRO_F1_PER_CLASS, dataset_family, evaluate
from mscl.errors import InputError
from mscl.train.spec import RunSpec

SECRET = "PHI-SENTINEL"  # in every text cell: no error may print it
HEADER = ["id", "text", "labels", "split"]


def write_csv(path: Path, rows: list[list[str]], header: list[str] = HEADER, delimiter: str = ",") -> Path:
    """A real CSV/TSV file: fields quoted only where they must be (csv.QUOTE_MINIMAL), as exporters do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def split_frames(out: Path) -> dict[str, pd.DataFrame]:
    frames = {name: pd.read_parquet(out / f"{name}.parquet") for name in ("train", "val", "test")}
    for frame in frames.values():
        frame["labels"] = frame["labels"].map(list)
    return frames


def prepare_csv(path: Path, out: Path, *options: str, input_column: str = "text") -> int:
    return mscl_main(["prepare-csv", "--path", str(path), "--out", str(out), "--input-column", input_column, "--labels-column", "labels", *options])


def leaves_nothing(out: Path) -> bool:
    """No output folder and no hidden staging folder beside it."""
    return not out.exists() and not any(entry.name.startswith(f".{out.name}") for entry in out.parent.iterdir())


# Eight documents, some with a comma, a quote or a line break inside the text (quoted by the writer),
# labels with spaces, empty parts and a repeat, split values in any case and dev/valid for val.
ROWS = [
    ["d1", f"first, {SECRET}", " b ; a;; a ", "Train"],
    ["d2", f'a "quoted" {SECRET}', "c", "train"],
    ["d3", f"two\nlines {SECRET}", "", "TRAIN"],
    ["d4", f"fourth {SECRET}", "a", " val "],
    ["d5", f"fifth {SECRET}", "b;c", "dev"],
    ["d6", f"sixth {SECRET}", "a;b;c", "test"],
    ["d7", f"seventh {SECRET}", "c;a", "Test"],
    ["d8", f"eighth {SECRET}", "b", "valid"],
]


def test_text_csv_with_split_column_checked_by_hand(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "raw" / "docs.csv", ROWS)
    out = tmp_path / "processed" / "mydocs"
    assert prepare_csv(source, out, "--split-column", "split", "--id-column", "id") == 0
    frames = split_frames(out)
    assert {name: frame["id"].tolist() for name, frame in frames.items()} == {"train": ["d1", "d2", "d3"], "val": ["d4", "d5", "d8"], "test": ["d6", "d7"]}
    assert frames["train"]["labels"].tolist() == [["a", "b"], ["c"], []]  # stripped, empty parts dropped, repeat counted once, sorted
    assert frames["val"]["labels"].tolist() == [["a"], ["b", "c"], ["b"]]
    assert frames["test"]["labels"].tolist() == [["a", "b", "c"], ["a", "c"]]
    assert frames["train"]["text"].tolist() == [f"first, {SECRET}", f'a "quoted" {SECRET}', f"two\nlines {SECRET}"]
    assert list(frames["train"].columns) == ["id", "labels", "text"]
    assert read_labels(out) == ["a", "b", "c"]
    stats = read_stats(out)
    assert stats["counts"] == {"train": 3, "val": 3, "test": 2} and stats["rows"] == 8
    assert stats["splits"]["train"]["samples_without_labels"] == 1  # d3 is kept, without labels
    assert (stats["family"], stats["modality"], stats["dataset"]) == ("text", "text", "mydocs")
    assert stats["columns"] == {"input": "text", "labels": "labels", "split": "split", "id": "id"}
    assert (stats["separator"], stats["delimiter"], stats["fractions"]) == (";", "comma", None)
    assert stats["sources"] == {"docs.csv": hashlib.sha256(source.read_bytes()).hexdigest()}
    assert stats["root"] == str(source.parent.resolve()) and "'split'" in stats["split_policy"]


def test_tsv_sniffed_and_given_delimiters_give_the_same_manifest(tmp_path: Path) -> None:
    reference = tmp_path / "csv"
    assert prepare_csv(write_csv(tmp_path / "docs.csv", ROWS), reference, "--split-column", "split", "--id-column", "id") == 0
    expected = split_frames(reference)
    variants = {
        "tsv": (write_csv(tmp_path / "docs.tsv", ROWS, delimiter="\t"), []),  # by extension
        "tab": (write_csv(tmp_path / "docs.tab", ROWS, delimiter="\t"), []),
        "sniffed_pipe": (write_csv(tmp_path / "docs.txt", ROWS, delimiter="|"), []),  # no known extension: sniffed
        "given": (write_csv(tmp_path / "semi.csv", ROWS, delimiter="\t"), ["--delimiter", "tab"]),
    }
    for name, (path, options) in variants.items():
        assert prepare_csv(path, tmp_path / name, "--split-column", "split", "--id-column", "id", *options) == 0, name
        for split, frame in split_frames(tmp_path / name).items():
            pd.testing.assert_frame_equal(frame, expected[split])
    assert read_stats(tmp_path / "sniffed_pipe")["delimiter"] == "pipe"


def test_seeded_split_by_fractions_is_reproducible_and_of_the_right_sizes(tmp_path: Path) -> None:
    rows = [[f"document {i} {SECRET}", "a" if i % 2 else "a;b"] for i in range(40)]
    source = write_csv(tmp_path / "docs.csv", rows, header=["text", "labels"])
    assert prepare_csv(source, tmp_path / "s0") == 0
    frames = split_frames(tmp_path / "s0")
    # By the definition: ids row-000001.. by data row; sorted ids permuted by default_rng(seed); 0.7/0.15/0.15 of 40 = 28/6/6.
    ids = [f"row-{i:06d}" for i in range(1, 41)]
    order = [ids[i] for i in np.random.default_rng(0).permutation(40)]
    expected = {"train": sorted(order[:28]), "val": sorted(order[28:34]), "test": sorted(order[34:])}
    assert {name: frame["id"].tolist() for name, frame in frames.items()} == expected  # rows keep the file's order
    assert frames["train"]["text"].tolist() == [f"document {int(i[4:]) - 1} {SECRET}" for i in expected["train"]]
    assert read_stats(tmp_path / "s0")["fractions"] == [0.7, 0.15, 0.15]

    assert prepare_csv(source, tmp_path / "again") == 0
    assert {n: f["id"].tolist() for n, f in split_frames(tmp_path / "again").items()} == expected
    assert prepare_csv(source, tmp_path / "s1", "--seed", "1") == 0
    assert split_frames(tmp_path / "s1")["train"]["id"].tolist() != expected["train"]
    assert prepare_csv(source, tmp_path / "half", "--fractions", "0.5", "0.25", "0.25") == 0
    assert read_stats(tmp_path / "half")["counts"] == {"train": 20, "val": 10, "test": 10}


def write_image(path: Path, color: tuple[int, int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (12, 10), color).save(path)


def test_image_csv_paths_relative_to_the_files_folder(tmp_path: Path) -> None:
    from mscl.train.data import load_split

    folder = tmp_path / "shots"
    rows = []
    for i in range(9):
        name = f"imgs/{i}.png" if i % 2 else f"imgs/sub/{i}.jpg"
        write_image(folder / name, (20 * i, 0, 0))
        rows.append([name, "cat;dog" if i % 3 == 0 else "cat", ["train", "val", "test"][i % 3]])
    write_image(tmp_path / "elsewhere.png", (0, 0, 0))
    rows.append([str(tmp_path / "elsewhere.png"), "dog", "train"])  # an absolute path is taken as it is
    source = write_csv(folder / "labels.csv", rows, header=["image", "labels", "fold"])
    out = tmp_path / "out"
    assert prepare_csv(source, out, "--modality", "image", "--split-column", "fold", "--family", "mimic", input_column="image") == 0
    frames = split_frames(out)
    assert list(frames["train"].columns) == ["id", "labels", "path"]
    assert frames["train"]["path"].tolist() == ["imgs/sub/0.jpg", "imgs/3.png", "imgs/sub/6.jpg", str(tmp_path / "elsewhere.png")]
    assert frames["train"]["id"].tolist() == ["row-000001", "row-000004", "row-000007", "row-000010"]
    stats = read_stats(out)
    assert (stats["modality"], stats["family"], stats["root"]) == ("image", "mimic", str(folder.resolve()))
    # The training reader resolves them against stats.json's root, as for COCO or VOC.
    split = load_split(out, "val", read_labels(out), "image")
    assert split.items == [str(folder.resolve() / name) for name in ("imgs/1.png", "imgs/sub/4.jpg", "imgs/7.png")]
    assert all(Path(item).is_file() for item in split.items)
    assert prepare_csv(source, tmp_path / "default_family", "--modality", "image", "--split-column", "fold", input_column="image") == 0
    assert read_stats(tmp_path / "default_family")["family"] == "image"


# ------------------------------------------------------------------------------ bad CSV input


def text_rows(n: int = 6) -> list[list[str]]:
    return [[f"d{i}", f"note {i}: {SECRET} seen today", "a;b" if i % 2 else "a", ["train", "val", "test"][i % 3]] for i in range(n)]


def with_cell(row: int, column: int, value: str) -> list[list[str]]:
    rows = text_rows()
    rows[row][column] = value
    return rows


def raw_file(tmp: Path, text: bytes, name: str = "docs.csv") -> Path:
    (tmp / name).write_bytes(text)
    return tmp / name


SPLIT = ["--split-column", "split"]
# case -> (write the input file, extra options, what the message must name: [field or line, words of the problem])
CSV_CASES: dict[str, tuple[Callable[[Path], Path], list[str], list[str]]] = {
    "missing_column": (lambda t: write_csv(t / "docs.csv", text_rows()), ["--input-column", "body"], ["'body'", "columns are ['id', 'text', 'labels', 'split']"]),
    "semicolon_file_read_as_csv": (lambda t: write_csv(t / "docs.csv", text_rows(), delimiter=";"), [], ["'text'", "--delimiter"]),
    "labels_empty_everywhere": (lambda t: write_csv(t / "docs.csv", [[r[0], r[1], " ; ", r[3]] for r in text_rows()]), SPLIT, ["'labels'", "no row has a label"]),
    "unknown_split_value": (lambda t: write_csv(t / "docs.csv", with_cell(4, 3, "holdout")), SPLIT, ["line 6", "'holdout'", "'split'"]),
    "empty_split_value": (lambda t: write_csv(t / "docs.csv", with_cell(1, 3, "")), SPLIT, ["line 3", "'split'"]),
    "empty_text_cell": (lambda t: write_csv(t / "docs.csv", with_cell(2, 1, "  ")), SPLIT, ["line 4", "'text'", "empty"]),
    "split_left_empty": (lambda t: write_csv(t / "docs.csv", [r[:3] + ["train" if r[3] == "test" else r[3]] for r in text_rows()]), SPLIT, ["split 'test' has no row", "'split'"]),
    "split_without_labels": (lambda t: write_csv(t / "docs.csv", [r[:2] + ["" if r[3] == "val" else r[2], r[3]] for r in text_rows()]), SPLIT, ["split 'val'", "'labels'"]),
    "duplicate_id": (lambda t: write_csv(t / "docs.csv", with_cell(5, 0, "d1")), [*SPLIT, "--id-column", "id"], ["line 7 repeats id 'd1' of line 3", "'id'"]),
    "empty_id": (lambda t: write_csv(t / "docs.csv", with_cell(0, 0, "")), [*SPLIT, "--id-column", "id"], ["line 2", "'id'"]),
    "unquoted_delimiter": (lambda t: raw_file(t, f"id,text,labels,split\nd0,ok {SECRET},a,train\nd1,a, b {SECRET},a,val\n".encode()), SPLIT, ["line 3 has 5 fields where the header has 4", "quote"]),
    "not_utf8": (lambda t: raw_file(t, f"id,text,labels,split\nd0,ok {SECRET},a,train\nd1,caf\xe9 {SECRET},a,val\n".encode("latin-1")), SPLIT, ["line 3 is not UTF-8", "UTF-8"]),
    "empty_file": (lambda t: raw_file(t, b""), [], ["empty"]),
    "header_only": (lambda t: raw_file(t, b"id,text,labels,split\n"), SPLIT, ["no data row"]),
    "repeated_header": (lambda t: raw_file(t, b"text,labels,text\nx,a,y\n"), [], ["'text' twice", "'header'"]),
    # A text column named where a short value is expected: the message gives its length, never the text.
    "text_column_as_split_column": (lambda t: write_csv(t / "docs.csv", text_rows()), ["--split-column", "text"], ["line 2: split value <31 characters, not shown> is not a split", "'text'"]),
    "text_column_as_id_column": (lambda t: write_csv(t / "docs.csv", text_rows() + text_rows()[:1]), [*SPLIT, "--id-column", "text"], ["line 8 repeats id <31 characters, not shown> of line 2"]),
    "text_as_image_paths": (lambda t: write_csv(t / "docs.csv", text_rows()), [*SPLIT, "--modality", "image"], ["line 2: image <31 characters, not shown> is missing", "6 images that cannot be used (paths relative to"]),
    "file_not_found": (lambda t: t / "absent.csv", [], ["CSV file not found"]),
    "fractions_not_one": (lambda t: write_csv(t / "docs.csv", text_rows()), ["--fractions", "0.6", "0.3", "0.3"], ["'--fractions'", "sum to 1.2"]),
    "too_few_rows_for_fractions": (lambda t: write_csv(t / "docs.csv", text_rows(2)), [], ["has no row", "change --fractions"]),
}


@pytest.mark.parametrize("name", CSV_CASES)
def test_bad_csv_input_names_file_line_field_and_fix_and_writes_nothing(name: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write, options, named = CSV_CASES[name]
    source = write(tmp_path)
    out = tmp_path / "processed" / "docs"
    out.parent.mkdir()
    assert prepare_csv(source, out, *options) == 1
    message = capsys.readouterr().err
    assert message.startswith("mscl prepare-csv: error: ") and "Traceback" not in message
    assert (str(source) in message or "--fractions" in message) and "Fix: " in message
    for words in named:
        assert words in message, (words, message)
    assert SECRET not in message  # text cells are never quoted
    assert leaves_nothing(out)


def test_bad_image_csv_input_names_the_line_and_the_image(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for i in range(3):
        write_image(tmp_path / f"{i}.png", (0, 0, 0))
    (tmp_path / "broken.png").write_bytes(b"not a png at all")
    # A JPEG cut short: its header opens, only decoding every pixel finds it (as the loader would).
    buffer = io.BytesIO()
    Image.effect_noise((64, 64), 40).convert("RGB").save(buffer, format="JPEG")
    (tmp_path / "cut.jpg").write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    rows = [["0.png", "a", "train"], ["1.png", "a", "val"], ["2.png", "a", "test"]]
    cases = {"missing.png": "missing", "broken.png": "unreadable", "cut.jpg": "unreadable (OSError: image file is truncated"}
    for image, problem in cases.items():
        source = write_csv(tmp_path / "images.csv", [*rows, [image, "a", "train"]], header=["image", "labels", "split"])
        out = tmp_path / "out"
        assert prepare_csv(source, out, "--modality", "image", *SPLIT, input_column="image") == 1
        message = capsys.readouterr().err
        assert all(part in message for part in (str(source), "line 5", f"image {image!r} is {problem}", "(field 'image')", "Fix: correct the paths")), message
        assert leaves_nothing(out)
    # Not opening the images lets the unreadable one through (it exists); a missing one never passes.
    assert prepare_csv(source, tmp_path / "unverified", "--modality", "image", *SPLIT, "--no-verify-images", input_column="image") == 0


# ------------------------------------------------------------------------ separators

SEVEN = ["cat", "dog", "bird", "fish", "horse", "cow", "sheep"]


def label_sets(n: int, seed: int = 0, smallest: int = 1) -> list[list[str]]:
    """n label sets of 7 labels, `smallest` to 4 labels each."""
    rng = np.random.default_rng(seed)
    return [sorted(rng.choice(SEVEN, size=rng.integers(smallest, 5), replace=False).tolist()) for _ in range(n)]


@pytest.mark.parametrize(
    ("cells", "separator", "found"),
    [
        (["|".join(labels) for labels in label_sets(200)], ";", "|"),  # the case: 7 labels read as dozens
        ([",".join(labels) for labels in label_sets(200, smallest=2)], ";", ","),  # no row with one label: combinations
        ([" ".join(labels) for labels in label_sets(200)], ";", " "),  # whitespace-joined
        (["/".join(labels) for labels in label_sets(200)], ";", "/"),
        (["; ".join(labels) for labels in label_sets(200)], "|", ";"),  # a `separator: '|'` over a ';' file
    ],
)
def test_labels_joined_by_another_separator_are_found(cells, separator, found):
    joined = joined_by(cells, separator)
    assert joined is not None and joined.separator == found
    assert joined.labels_split == 7 and joined.labels_as_read > 7 and joined.cells == sum(len(c.split(found)) > 1 if found != " " else " " in c for c in cells)


@pytest.mark.parametrize(
    "cells",
    [
        ["New York", "Los Angeles", "Paris", "New Orleans", "Las Vegas", "San Francisco", "Rome"] * 20,  # labels with spaces
        ["heart failure", "renal failure", "heart disease", "renal disease", "liver disease", "liver failure", "sepsis"] * 20,  # a grid of phrases
        ["250.00", "401.9", "428.0", "V45.81", "E11.9", "I10"] * 20,  # ICD codes
        ["AC/DC", "N/A", "TCP/IP", "rock", "jazz", "pop"] * 20,  # labels with a slash
        ["Washington, D.C.", "Washington", "Oregon"] * 20,  # one comma label beside its first part
        ["cat", "dog", "bird"] * 20,  # plain single labels
        ["cat", "dog", "black cat", "black dog", "bird"] * 20,  # a label and its kinds
    ],
)
def test_single_labels_that_hold_a_separator_character_are_not_refused(cells):
    assert joined_by(cells, ";") is None


def test_a_file_that_uses_its_separator_is_never_refused_whatever_its_labels_hold():
    cells = ["New York;a|b", "Los Angeles", "a|b;c/d", "c/d"] * 10
    assert joined_by(cells, ";") is None


def test_a_pipe_joined_file_under_the_default_separator_is_refused_naming_the_config_keys(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = [[f"d{i}", f"note {i}", "|".join(labels), ["train", "val", "test"][i % 3]] for i, labels in enumerate(label_sets(120))]
    source = write_csv(tmp_path / "docs.csv", rows)
    out = tmp_path / "out"
    assert prepare_csv(source, out, *SPLIT, "--from-config", "--dataset", "docs") == 1
    message = capsys.readouterr().err
    assert "(field 'labels'): the labels of column 'labels' look joined by '|', not by the separator ';', which occurs in no cell" in message
    assert "Read with ';', every row has one label and there are" in message and "split by '|', 7." in message
    assert "Fix: set `sources.docs.separator` (--separator) to '|', or, if each cell is one label, `sources.docs.separator_check: false` (--no-separator-check)" in message
    assert leaves_nothing(out)
    assert prepare_csv(source, tmp_path / "right", *SPLIT, "--separator", "|") == 0
    assert read_stats(tmp_path / "right")["num_labels"] == 7
    assert prepare_csv(source, tmp_path / "as_given", *SPLIT, "--no-separator-check") == 0  # the user's word: one label per cell
    assert read_stats(tmp_path / "as_given")["num_labels"] > 7 and read_stats(tmp_path / "as_given")["options"] == {"separator_check": False}


def test_split_column_and_fractions_exclude_each_other_and_bad_delimiters_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = write_csv(tmp_path / "docs.csv", text_rows())
    for options in (["--split-column", "split", "--fractions", "0.5", "0.25", "0.25"], ["--delimiter", "ab"], ["--delimiter", "x"], ["--family", "audio"]):
        with pytest.raises(SystemExit) as exit_info:
            prepare_csv(source, tmp_path / "out", *options)
        assert exit_info.value.code == 2
        assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------ prepare-manifest


def test_manifest_folder_round_trip_recomputes_stats_and_keeps_provenance(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "docs.csv", ROWS)
    made = tmp_path / "made"
    assert prepare_csv(source, made, *SPLIT, "--id-column", "id", "--family", "mimic") == 0
    (made / "stats.json").write_text(json.dumps({**read_stats(made), "counts": {"train": 99}}))  # stale statistics
    out = tmp_path / "processed" / "copy"
    assert mscl_main(["prepare-manifest", "--root", str(made), "--out", str(out)]) == 0
    for split, frame in split_frames(out).items():
        pd.testing.assert_frame_equal(frame, split_frames(made)[split])
    assert read_labels(out) == read_labels(made)
    stats = read_stats(out)
    assert stats["counts"] == {"train": 3, "val": 3, "test": 2}  # recomputed, not copied
    assert stats["family"] == "mimic"  # the input stats.json's family
    assert stats["source_info"]["format"] == "one CSV/TSV file (prepare-csv)" and "counts" not in stats["source_info"]
    assert stats["sources"]["train.parquet"] == hashlib.sha256((made / "train.parquet").read_bytes()).hexdigest()
    assert set(stats["sources"]) == {"train.parquet", "val.parquet", "test.parquet", "labels.txt", "stats.json"}
    assert mscl_main(["prepare-manifest", "--root", str(made), "--out", str(tmp_path / "text"), "--family", "text"]) == 0
    assert read_stats(tmp_path / "text")["family"] == "text"  # --family wins


def hand_made(folder: Path, splits: dict[str, pd.DataFrame], labels: list[str], stats: dict | None = None) -> Path:
    """A manifest folder as a user writes it with pandas."""
    folder.mkdir(parents=True)
    for name, frame in splits.items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    (folder / "labels.txt").write_text("".join(f"{label}\n" for label in labels))
    if stats is not None:
        (folder / "stats.json").write_text(json.dumps(stats))
    return folder


def image_splits(images: str = "pics") -> dict[str, pd.DataFrame]:
    return {
        "train": pd.DataFrame({"id": [1, 2], "labels": [["a", "b", "a"], ["b"]], "path": [f"{images}/1.png", f"{images}/2.png"], "note": ["x", "y"]}),
        "val": pd.DataFrame({"id": [3], "labels": [["a"]], "path": [f"{images}/3.png"], "note": ["z"]}),
        "test": pd.DataFrame({"id": [4], "labels": [["b"]], "path": [f"{images}/4.png"], "note": ["w"]}),
    }


def test_hand_made_image_manifest_with_a_relative_root(tmp_path: Path) -> None:
    from mscl.train.data import load_split

    for i in range(1, 5):
        write_image(tmp_path / "images" / "pics" / f"{i}.png", (i, i, i))
    root = hand_made(tmp_path / "mine", image_splits(), ["b", "a"], {"root": "../images", "note": "made by hand"})
    out = tmp_path / "out"
    assert mscl_main(["prepare-manifest", "--root", str(root), "--out", str(out)]) == 0
    frames = split_frames(out)
    assert frames["train"]["id"].tolist() == ["1", "2"]  # integer ids become strings
    assert frames["train"]["labels"].tolist() == [["a", "b"], ["b"]]  # a label repeated in a sample counts once
    assert frames["train"]["note"].tolist() == ["x", "y"]  # other columns are kept
    assert read_labels(out) == ["b", "a"]  # labels.txt's order
    stats = read_stats(out)
    assert (stats["modality"], stats["family"], stats["root"]) == ("image", "image", str((tmp_path / "images").resolve()))
    assert stats["source_info"] == {"note": "made by hand", "root": "../images"}
    assert load_split(out, "train", ["b", "a"], "image").items == [str((tmp_path / "images" / "pics" / f"{i}.png").resolve()) for i in (1, 2)]


def tabular_splits() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    frames = {}
    for split, n in (("train", 40), ("val", 20), ("test", 20)):
        features = rng.normal(size=(n, 6)).astype(np.float32)
        labels = [[name for k, name in enumerate(("p0", "p1", "p2")) if row[k] > 0] for row in features]
        frames[split] = pd.DataFrame({"id": [f"{split}{i}" for i in range(n)], "labels": labels, "features": list(features)})
    return frames


def rows_of(frame: pd.DataFrame, **columns) -> pd.DataFrame:
    return frame.assign(**columns)


def with_file(root: Path, name: str, text: str | None) -> Path:
    """`root` with file `name` replaced by `text` (removed for None)."""
    if text is None:
        (root / name).unlink()
    else:
        (root / name).write_text(text)
    return root


# case -> (write the input folder under tmp, extra options, the file the message names (relative), words it must hold)
MANIFEST_CASES: dict[str, tuple[Callable[[Path], Path], list[str], str, list[str]]] = {
    "missing_split": (lambda t: with_file(hand_made(t / "in", tabular_splits(), ["p0", "p1", "p2"]), "val.parquet", None), [], "val.parquet", ["split file not found"]),
    "labels_as_a_string": (lambda t: hand_made(t / "in", {**tabular_splits(), "test": rows_of(tabular_splits()["test"], labels="p0;p1")}, ["p0", "p1", "p2"]), [], "test.parquet", ["'labels'", "list of label names"]),
    "label_not_in_labels_txt": (lambda t: hand_made(t / "in", {**tabular_splits(), "val": rows_of(tabular_splits()["val"], labels=[["p0"]] * 19 + [["P1"]])}, ["p0", "p1", "p2"]), [], "val.parquet", ["row 20 (pandas index 19)", "'P1' is not in labels.txt"]),
    "label_carried_by_no_sample": (lambda t: hand_made(t / "in", tabular_splits(), ["p0", "p1", "p2", "p3"]), [], "labels.txt", ["'p3'", "carried by no sample", "remove it"]),
    "no_labels_txt": (lambda t: with_file(hand_made(t / "in", tabular_splits(), ["p0"]), "labels.txt", None), [], "labels.txt", ["not found"]),
    "repeated_label_in_labels_txt": (lambda t: hand_made(t / "in", tabular_splits(), ["p0", "p1", "p0", "p2"]), [], "labels.txt", ["line 3 repeats label 'p0' of line 1"]),
    "id_in_two_splits": (lambda t: hand_made(t / "in", {**tabular_splits(), "test": rows_of(tabular_splits()["test"], id=["train3"] + [f"t{i}" for i in range(19)])}, ["p0", "p1", "p2"]), [], "test.parquet", ["row 1", "repeats id 'train3' of train.parquet row 4"]),
    "features_of_two_lengths": (lambda t: hand_made(t / "in", {**tabular_splits(), "val": rows_of(tabular_splits()["val"], features=[np.zeros(5, np.float32)] * 20)}, ["p0", "p1", "p2"]), [], "val.parquet", ["row 1", "5 features where the first row has 6"]),
    "nan_feature": (lambda t: hand_made(t / "in", {**tabular_splits(), "train": rows_of(tabular_splits()["train"], features=[np.full(6, np.nan, np.float32)] + list(tabular_splits()["train"]["features"][1:]))}, ["p0", "p1", "p2"]), [], "train.parquet", ["row 1", "NaN"]),
    "mixed_content_columns": (lambda t: hand_made(t / "in", {**tabular_splits(), "test": pd.DataFrame({"id": ["x"], "labels": [["p0"]], "text": [f"a {SECRET}"]})}, ["p0", "p1", "p2"]), [], "test.parquet", ["'text' where train.parquet's is 'features'"]),
    "empty_text": (lambda t: hand_made(t / "in", {name: pd.DataFrame({"id": [name], "labels": [["a"]], "text": [" " if name == "val" else f"t {SECRET}"]}) for name in ("train", "val", "test")}, ["a"]), [], "val.parquet", ["row 1", "the text is empty"]),
    "missing_image": (lambda t: hand_made(t / "in", image_splits(), ["a", "b"]), [], "train.parquet", ["row 1", "image 'pics/1.png' is missing"]),
    "split_without_labels": (lambda t: hand_made(t / "in", {**tabular_splits(), "val": rows_of(tabular_splits()["val"], labels=[[]] * 20)}, ["p0", "p1", "p2"]), [], "val.parquet", ["no sample of split 'val' has a label"]),
    "empty_split": (lambda t: hand_made(t / "in", {**tabular_splits(), "val": tabular_splits()["val"].iloc[:0]}, ["p0", "p1", "p2"]), [], "val.parquet", ["split 'val' is empty"]),
    "stats_not_json": (lambda t: with_file(hand_made(t / "in", tabular_splits(), ["p0", "p1", "p2"]), "stats.json", "{oops"), [], "stats.json", ["not valid JSON"]),
    "unknown_family_in_stats": (lambda t: hand_made(t / "in", tabular_splits(), ["p0", "p1", "p2"], {"family": "audio"}), [], "stats.json", ["'family'", "'audio' is not a dataset family"]),
    "out_is_root": (lambda t: hand_made(t / "in", tabular_splits(), ["p0", "p1", "p2"]), ["--out", "SAME"], "in", ["is the input folder itself"]),
}


@pytest.mark.parametrize("name", MANIFEST_CASES)
def test_bad_manifest_folder_names_file_row_field_and_fix_and_writes_nothing(name: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write, options, file, named = MANIFEST_CASES[name]
    root = write(tmp_path)
    out = tmp_path / "processed" / "mine"
    out.parent.mkdir()
    argv = ["prepare-manifest", "--root", str(root), "--out", str(root if options == ["--out", "SAME"] else out)]
    before = sorted((p.name, p.read_bytes()) for p in root.iterdir())
    assert mscl_main(argv) == 1
    message = capsys.readouterr().err
    assert message.startswith("mscl prepare-manifest: error: ") and "Traceback" not in message and "Fix: " in message
    assert str(root / file) in message or (file == "in" and str(root) in message), message
    for words in named:
        assert words in message, (words, message)
    assert SECRET not in message
    assert leaves_nothing(out) and sorted((p.name, p.read_bytes()) for p in root.iterdir()) == before


# --------------------------------------------------------------- the dataset family downstream


def test_family_names_are_the_metrics_families() -> None:
    assert DATASET_FAMILY_NAMES == tuple(FAMILY_MACRO_F1) and set(DATASET_FAMILIES.values()) <= set(DATASET_FAMILY_NAMES)


def test_run_spec_dataset_family_is_optional_validated_and_round_trips() -> None:
    base = {"dataset": "mydocs", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 6}, "loss": "simdissim", "batch_size": 8}
    plain = RunSpec.from_mapping(base)
    assert plain.dataset_family is None and "dataset_family" not in plain.to_dict()  # a spec without it reads (and resumes) as before
    own = RunSpec.from_mapping({**base, "dataset_family": "mimic"})
    assert own.dataset_family == "mimic" and own.to_dict()["dataset_family"] == "mimic"
    assert RunSpec.from_mapping(own.to_dict()) == own
    with pytest.raises(ValueError, match="dataset_family"):
        RunSpec.from_mapping({**base, "dataset_family": "audio"})
    assert dataset_family("mydocs", None, "mimic") == "mimic" and dataset_family("coco", None, "image") == "image"
    with pytest.raises(InputError, match="dataset 'coco' is of family 'image', not 'text'"):
        dataset_family("coco", "spec.json", "text")
    with pytest.raises(InputError, match="give the run spec a `dataset_family`"):
        dataset_family("mydocs", "spec.json")


def test_probe_label_prior_and_collect_use_the_spec_dataset_family(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A tabular dataset of one's own, named `own` (no DATASET_FAMILIES entry), declared of the
    mimic family: its macro_f1 must be CAML's, where the tabular default would be per-class."""
    from mscl.report.collect import collect_runs

    data = tmp_path / "own"
    assert mscl_main(["prepare-manifest", "--root", str(hand_made(tmp_path / "in", tabular_splits(), ["p0", "p1", "p2"])), "--out", str(data), "--family", "mimic"]) == 0
    spec = {
        "dataset": "own", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 6, "hidden_dims": [8]}, "loss": "simdissim",
        "batch_size": 16, "pretrain": {"epochs": 1, "projection_dim": 4}, "probe": {"epochs": 2, "batch_size": 16},
    }  # fmt: skip
    run = tmp_path / "runs" / "own"
    assert mscl_main(["pretrain", "--data", str(data), "--spec", json.dumps(spec), "--out", str(run / "pre")]) == 0
    probe = ["probe", "--data", str(data), "--pretrained", str(run / "pre")]
    assert mscl_main([*probe, "--spec", json.dumps(spec), "--out", str(run / "unknown")]) == 1  # without a family: refused
    assert "give the run spec a `dataset_family`" in capsys.readouterr().err and not (run / "unknown").exists()
    assert mscl_main([*probe, "--spec", json.dumps({**spec, "dataset_family": "mimic"}), "--out", str(run / "probe")]) == 0
    metrics = json.loads((run / "probe" / "metrics.json").read_text())
    assert metrics["macro_f1_definition"] == MACRO_F1_CAML and metrics["spec"]["dataset_family"] == "mimic"
    assert metrics["test"]["macro_f1"] == metrics["test"]["macro_f1_caml"] != metrics["test"]["macro_f1_per_class"]

    chance = tmp_path / "runs" / "chance"
    assert mscl_main(["chance", "--data", str(data), "--out", str(chance), "--dataset", "own", "--dataset-family", "mimic"]) == 0
    prior = json.loads((chance / "metrics.json").read_text())
    assert prior["macro_f1_definition"] == MACRO_F1_CAML and prior["spec"]["dataset_family"] == "mimic"
    labels = [[name in row for name in ("p0", "p1", "p2")] for row in tabular_splits()["test"]["labels"]]
    frequency = np.mean([[name in row for name in ("p0", "p1", "p2")] for row in tabular_splits()["train"]["labels"]], axis=0)
    assert prior["test"]["macro_f1"] == pytest.approx(evaluate(np.array(labels), np.tile(frequency, (20, 1)), macro_f1_definition=MACRO_F1_CAML)["macro_f1"])

    frame = collect_runs([run / "probe" / "metrics.json", chance / "metrics.json"], {"mlp": "mlp", "chance": "reference"})
    value = frame.set_index(["encoder", "split", "metric"])["value"]
    assert value[("mlp", "test", "macro_f1")] == pytest.approx(metrics["test"]["macro_f1_caml"])
    assert value[("chance", "test", "macro_f1")] == pytest.approx(prior["test"]["macro_f1_caml"])
    assert MACRO_F1_PER_CLASS == FAMILY_MACRO_F1["tabular"]  # what `own` would have had without its family


def test_the_workflows_preparation_names_the_config_keys_the_user_wrote(tmp_path: Path) -> None:
    """A csv source whose `labels_column` is not in the file, run by Snakemake: the log of the
    preparation names `sources.docs.labels_column`, not only the command's flag."""
    from test_workflow import snakemake

    write_csv(tmp_path / "docs.csv", text_rows())
    mine = tmp_path / "mine.yaml"
    mine.write_text("datasets: [docs]\nsources:\n  docs: {kind: csv, path: docs.csv, input_column: text, labels_column: tags}\n")
    result = snakemake(tmp_path, "data/processed/docs/stats.json", "--configfile", str(mine), check=False)
    assert result.returncode != 0
    log = (tmp_path / "results" / "logs" / "preprocess" / "docs.log").read_text()
    assert "no column 'tags' (named by `sources.docs.labels_column` (--labels-column))" in log
    assert "Fix: set `sources.docs.labels_column` (--labels-column) to one of those columns" in log
    assert not (tmp_path / "data" / "processed" / "docs").exists()
