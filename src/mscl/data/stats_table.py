"""The paper's Table "Statistics of datasets", regenerated from prepared manifests.

`python -m mscl stats-table --dataset coco=data/coco --dataset aapd=data/aapd ...
[--name coco='COCO-demo (30 glyph classes)' ...] --out-prefix results/tables/statistics` reads
each folder's stats.json and writes `<prefix>.tex` (booktabs tabular, to be \\input into a table
float, the caption under it), `<prefix>.csv` (exact numbers), `<prefix>.md` and `<prefix>.html`
(a standalone page for `snakemake --report`). Rows are called by --name (the workflow passes the
config's names of what ran, `mscl.report.names`), else by the dataset's plain name. Rows are grouped like the paper (image datasets, AAPD, MIMIC)
with a \\midrule between groups; within a group they keep the command-line order.
Counts follow the paper's style: image datasets and AAPD in thousands with one decimal and
"k" (82.0k), MIMIC exactly with thousands separators (47,723).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from mscl import cli
from mscl.data.manifest import SPLITS, read_stats
from mscl.errors import InputError
from mscl.io import write_text
from mscl.report import html
from mscl.report.names import DATASET_NAMES

# Plain dataset names (the workflow passes the names of what ran with --name).
DISPLAY_NAMES = DATASET_NAMES
# The paper's printed train / val / test sizes (Table "Statistics of datasets"), shown next to
# the produced ones: the image and AAPD splits are inferred from these sizes, so a reader can
# see how close they come (COCO val/test: 20.1k produced vs 20.2k printed).
PAPER_SPLIT_SIZES = {
    "coco": ("82.0k", "20.2k", "20.2k"),
    "voc": ("5.0k", "2.5k", "2.5k"),
    "nuswide": ("125.4k", "41.9k", "41.9k"),
    "aapd": ("37.8k", "6.7k", "11.3k"),
    "mimic3_full": ("47,723", "1,631", "3,372"),
    "mimic3_50": ("8,066", "1,573", "1,729"),
    "mimic4_icd9_full": ("188,533", "7,110", "13,709"),
    "mimic4_icd9_50": ("170,664", "6,406", "12,405"),
    "mimic4_icd10_full": ("110,442", "4,017", "7,851"),
    "mimic4_icd10_50": ("104,077", "3,805", "7,368"),
}
PAPER_COLUMN = "Paper train / val / test"
# A manifest whose stats.json says `not_comparable_with_paper` (COCO 2017 against the paper's
# COCO 2014) gets this after the paper's sizes, and its sentence under the table.
NOT_COMPARABLE = "not comparable"
# Row groups in table order; a \midrule separates consecutive groups.
GROUPS = ("image", "text", "tabular", "mimic")
COLUMNS = ("Dataset", "Train", "Val", "Test", "Total # labels", "Avg # labels")
LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


TITLE = "Statistics of the prepared datasets (paper Table statistics)"
CAPTION = (
    "Samples per split, label vocabulary size and average labels per sample of the datasets this run prepared, "
    "counted from their manifests. The last column is what the paper prints for the real dataset each row is or stands in for: "
    "a demo dataset is far smaller by design."
)


def display_name(name: str, names: Mapping[str, str] | None = None) -> str:
    """The dataset's name in `names` (what ran), else its plain name; unknown keys as given."""
    return (names or {}).get(name) or DISPLAY_NAMES.get(name, name)


def row_group(name: str, stats: Mapping[str, Any]) -> str:
    """Table group of a dataset: MIMIC by name, otherwise by the manifest's modality."""
    if name.startswith("mimic"):
        return "mimic"
    return stats.get("modality") if stats.get("modality") in ("image", "tabular") else "text"


def format_count(count: int, group: str) -> str:
    """Paper-style count: '82.1k' (rounded half up) for image/AAPD counts >= 1000, '47,723' for MIMIC."""
    if group == "mimic" or count < 1000:
        return f"{count:,}"
    tenths = (count * 10 + 500) // 1000  # integer rounding half up, no float error
    return f"{tenths // 10:,}.{tenths % 10}k"


def stats_field(stats: Mapping[str, Any], key: str, path: Path) -> Any:
    """Return stats[key] or raise an InputError naming the stats file and key."""
    if key not in stats:
        raise InputError(path, f"stats.json has no {key!r}", "re-run the preprocessing rule of this dataset", field=key)
    return stats[key]


def statistics_frame(datasets: Sequence[tuple[str, str | Path]], names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Exact statistics, one row per (name, prepared folder), ordered by group then given order.

    Columns: key, group, Dataset, Train, Val, Test, Total # labels, Avg # labels, Paper note
    (why the paper's sizes do not compare, from stats.json; empty when they do).
    """
    if not datasets:
        raise InputError(None, "no dataset given", "pass at least one --dataset NAME=DIR", field="--dataset")
    rows = []
    for order, (name, folder) in enumerate(datasets):
        stats = read_stats(folder)
        path = Path(folder) / "stats.json"
        counts = stats_field(stats, "counts", path)
        missing = [s for s in SPLITS if s not in counts]
        if missing:
            raise InputError(path, f"counts lack split {missing[0]!r}", "re-run the preprocessing rule of this dataset", field="counts")
        group = row_group(name, stats)
        rows.append(
            {
                "key": name,
                "group": group,
                "Dataset": display_name(name, names),
                "Train": int(counts["train"]),
                "Val": int(counts["val"]),
                "Test": int(counts["test"]),
                "Total # labels": int(stats_field(stats, "num_labels", path)),
                "Avg # labels": float(stats_field(stats, "avg_labels", path)),
                "Paper note": str(stats.get("not_comparable_with_paper") or ""),
                "_order": (GROUPS.index(group), order),
            }
        )
    frame = pd.DataFrame(rows).sort_values("_order", kind="stable").drop(columns="_order")
    return frame.reset_index(drop=True)


def paper_sizes(key: str, note: str = "") -> str:
    """The paper's printed sizes of a dataset ("82.0k / 20.2k / 20.2k"), "-" when it has none,
    marked when the manifest's stats.json says they do not compare (`note`)."""
    sizes = " / ".join(PAPER_SPLIT_SIZES[key]) if key in PAPER_SPLIT_SIZES else "-"
    return f"{sizes} ({NOT_COMPARABLE})" if note else sizes


def caption(frame: pd.DataFrame) -> str:
    """CAPTION, then the sentence of every row whose sizes do not compare with the paper's."""
    notes = [f"{row['Dataset']}: {row['Paper note']}." for _, row in frame.iterrows() if row["Paper note"]]
    return " ".join([CAPTION, *notes])


def formatted_cells(frame: pd.DataFrame) -> list[list[str]]:
    """The display strings of each row, in COLUMNS order, then the paper's sizes."""
    return [
        [
            row["Dataset"],
            *(format_count(int(row[c]), row["group"]) for c in ("Train", "Val", "Test")),
            f"{int(row['Total # labels']):,}",
            f"{float(row['Avg # labels']):.1f}",
            paper_sizes(row["key"], row["Paper note"]),
        ]
        for _, row in frame.iterrows()
    ]


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters of a cell."""
    return "".join(LATEX_SPECIALS.get(char, char) for char in text)


def to_latex(frame: pd.DataFrame) -> str:
    """booktabs tabular like the paper's, with \\midrule between groups."""
    header = " & ".join([r"\multicolumn{1}{c}{Dataset}", *(latex_escape(c) for c in (*COLUMNS[1:], PAPER_COLUMN))])
    lines = [r"\begin{tabular}{@{}lcccccc@{}}", r"\toprule", header + r" \\", r"\midrule"]
    groups = list(frame["group"])
    for index, cells in enumerate(formatted_cells(frame)):
        if index and groups[index] != groups[index - 1]:
            lines.append(r"\midrule")
        lines.append(" & ".join(latex_escape(c) for c in cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\par\smallskip", rf"{{\footnotesize {latex_escape(caption(frame))}\par}}"]
    return "\n".join([f"% {TITLE}", *lines]) + "\n"


def to_markdown(frame: pd.DataFrame) -> str:
    """GitHub Markdown table with the paper-style cells, under its title and caption."""
    lines = [f"**{TITLE}.** {caption(frame)}", ""]
    lines += ["| " + " | ".join((*COLUMNS, PAPER_COLUMN)) + " |", "|" + "|".join([":---"] + ["---:"] * len(COLUMNS)) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in formatted_cells(frame)]
    return "\n".join(lines) + "\n"


def to_html(frame: pd.DataFrame) -> str:
    """A standalone page for the report (mscl.report.html), a rule between row groups."""
    groups = list(frame["group"])
    rules = [index for index in range(1, len(groups)) if groups[index] != groups[index - 1]]
    return html.page(TITLE, caption(frame), html.simple_table([*COLUMNS, PAPER_COLUMN], formatted_cells(frame), rules_before=rules))


def to_csv(frame: pd.DataFrame) -> str:
    """CSV with exact numbers (full-precision average), the dataset key, the paper's printed
    sizes (empty for datasets the paper does not have) and why they do not compare, if so."""
    paper = {
        f"Paper {split}": [PAPER_SPLIT_SIZES.get(key, ("", "", ""))[index] for key in frame["key"]]
        for index, split in enumerate(("train", "val", "test"))
    }
    return frame[["key", *COLUMNS]].assign(**paper, **{"Paper note": frame["Paper note"]}).to_csv(index=False, lineterminator="\n")


def parse_pairs(values: Sequence[str], flag: str, example: str) -> list[tuple[str, str]]:
    """Turn repeated KEY=VALUE arguments into (key, value) pairs; keys must be unique."""
    pairs = []
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key or not item:
            raise InputError(None, f"{flag} {value!r} is not NAME=VALUE", f"write e.g. {flag} {example}", field=flag)
        pairs.append((key, item))
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise InputError(None, f"a dataset name is given twice in {keys}", "give each dataset once", field=flag)
    return pairs


def parse_dataset_arguments(values: Sequence[str]) -> list[tuple[str, Path]]:
    """Turn repeated NAME=DIR arguments into (name, folder) pairs; names must be unique."""
    return [(name, Path(folder)) for name, folder in parse_pairs(values, "--dataset", "coco=data/prepared/coco")]


def write_statistics_table(datasets: Sequence[tuple[str, str | Path]], out_prefix: str | Path, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Write <prefix>.tex/.csv/.md/.html atomically (all rendered before any is written); return the frame."""
    frame = statistics_frame(datasets, names)
    rendered = {".tex": to_latex(frame), ".csv": to_csv(frame), ".md": to_markdown(frame), ".html": to_html(frame)}
    prefix = Path(out_prefix)
    for suffix, text in rendered.items():
        write_text(prefix.with_name(prefix.name + suffix), text)
    return frame


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl stats-table --dataset NAME=DIR [--dataset ...] --out-prefix PREFIX`."""
    args = cli.parse_args("stats-table", argv)
    names = dict(parse_pairs(args.name, "--name", "coco='COCO-demo (30 glyph classes)'"))
    frame = write_statistics_table(parse_dataset_arguments(args.dataset), args.out_prefix, names)
    print(f"stats-table: wrote {args.out_prefix}.{{tex,csv,md,html}} with {len(frame)} datasets")
    return 0
