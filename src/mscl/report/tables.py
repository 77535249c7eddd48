"""The paper's tables, regenerated from a run's tidy results (LaTeX + CSV + Markdown).

`python -m mscl table NAME --runs results/metrics/all_runs.csv --out-prefix results/tables/NAME
[--batch-size B] [--benchmarks FILE...]` writes `<prefix>.tex` (a booktabs tabular to \\input
into a table float; needs booktabs and amssymb), `<prefix>.csv` (exact numbers, one row per
cell) and `<prefix>.md`, each atomically and only after all three are rendered.

NAME is one of TABLE_NAMES. Values are test-split percentages with two decimals (the SOTA table
one, as the paper). Several seeds show as "mean ± std" (sample std, one decimal) and bold is
decided on the displayed mean (ties all bold). A cell without a result is never dropped: it
reads `--` in LaTeX (with a note under the table) and `missing` in CSV and Markdown.
Without --batch-size each (dataset, encoder) uses the batch size most of its runs share.

Macro-F1: every table with a macro-F1 column says under it which definition that column uses
(`mscl.report.style.macro_f1_note`: the one of its datasets' family, `mscl.metrics.macro_f1_definition`):
the image, AAPD and ablation tables the mean of per-class F1 (MulSupCon), the MIMIC and SOTA
tables the harmonic mean of macro-precision and macro-recall (CAML).

Reference rows: the tables that list methods (image, aapd, mimic_full, mimic_50, ablation) show,
below a rule under the loss rows, Chance (label prior, `python -m mscl chance`), No pretraining
(method `none`) and Supervised BCE (method `bce`) when the results hold them (a reference with
no result at all is left out, not shown as missing). Reference cells are never bold and never
count in the best of a column. Chance has no encoder: it is looked up under the role
`reference` whatever the column's encoder; the MIMIC tables show it once, in a last block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from mscl import cli
from mscl.cli import TABLE_NAMES  # noqa: F401  (the names `table NAME` accepts; the docstrings refer to it)
from mscl.data.stats_table import latex_escape
from mscl.errors import InputError
from mscl.io import write_text
from mscl.report import paper
from mscl.report.collect import CellKey, CellStat, cell_index, load_runs
from mscl.report.cost import cost_frame
from mscl.report.style import (
    BASELINE_METHODS,
    CHANCE,
    CORE_METHODS,
    F1_METRICS,
    IMAGE_DATASETS,
    IMAGE_METRICS,
    METHOD_ORDER,
    MIMIC_FAMILIES,
    MIMIC_ROLES,
    REFERENCE_METHODS,
    REFERENCE_ROLE,
    dataset_name,
    encoder_name,
    macro_f1_note,
    method_name,
    metric_name,
    mimic_dataset,
    precision_at_k_metric,
)

SOTA_METRICS = ("macro_auc", "micro_auc", "macro_f1", "micro_f1", "p_at_8")
# Ablation rows as (loss, uses the similarity factor, uses the dissimilarity factor).
ABLATION_ROWS = (("any", False, False), ("sim", True, False), ("dissim", False, True), ("simdissim", True, True))
CSV_COLUMNS = ("table", "block", "row", "column", "dataset", "encoder_role", "method", "metric", "source", "mean", "std", "seeds", "best", "status")


# ------------------------------------------------------------------------ table model


@dataclass(frozen=True)
class Label:
    """A text cell; `latex` overrides the escaped text in the .tex output."""

    text: str
    latex: str | None = None

    def as_latex(self) -> str:
        return self.latex if self.latex is not None else latex_escape(self.text)


@dataclass
class ValueCell:
    """A number in percent. status: ok, missing (no result in this run) or not_reported (paper's '-')."""

    mean: float = math.nan
    std: float = math.nan
    seeds: int = 1
    decimals: int = 2
    status: str = "ok"
    signed: bool = False
    bold: bool = False
    record: dict[str, Any] = field(default_factory=dict)

    def display_mean(self) -> float:
        """The mean as displayed (rounded), the quantity bold is decided on."""
        return round(self.mean, self.decimals)


@dataclass(frozen=True)
class Column:
    """A column's header texts from top to bottom (None: empty) and its LaTeX alignment."""

    levels: tuple[Label | None, ...]
    align: str = "c"


@dataclass(frozen=True)
class BlockTitle:
    """A full-width row naming the block below (e.g. the encoder in the MIMIC tables)."""

    title: str


@dataclass(frozen=True)
class Rule:
    """A \\midrule between row groups."""


@dataclass(frozen=True)
class ReferenceRule(Rule):
    """The rule above a block's reference rows: \\midrule in LaTeX, a labelled row in Markdown."""

    text: str = "*reference rows (not ranked)*"


Row = list  # of Label | ValueCell, one per column
BodyItem = Row | BlockTitle | Rule


@dataclass
class Table:
    """A rendered-ready table: columns, body, notes under it and the CSV frame."""

    name: str
    columns: list[Column]
    body: list[BodyItem]
    records: pd.DataFrame
    notes: list[str] = field(default_factory=list)  # Markdown notes under the table
    latex_notes: list[str] = field(default_factory=list)  # the same notes, LaTeX markup


def stat_cell(stat: CellStat | None, decimals: int = 2, **record: Any) -> ValueCell:
    """A ValueCell in percent from a CellStat (fractions); a missing cell if `stat` is None."""
    if stat is None:
        return ValueCell(status="missing", decimals=decimals, record=record)
    return ValueCell(mean=stat.mean * 100, std=stat.std * 100, seeds=stat.seeds, decimals=decimals, record=record)


def mark_best(cells: Sequence[ValueCell]) -> None:
    """Bold every cell whose displayed mean is the highest of `cells` (missing/NaN ignored)."""
    present = [c for c in cells if c.status == "ok" and math.isfinite(c.mean)]
    if not present:
        return
    best = max(c.display_mean() for c in present)
    for cell in present:
        cell.bold = cell.display_mean() == best


# -------------------------------------------------------------------------- rendering


def format_value(cell: ValueCell, flavour: str) -> str:
    """The cell text in 'latex' or 'md': mean, ' ± std' when several seeds, bold if best."""
    if cell.status == "missing":
        return "--" if flavour == "latex" else "missing"
    if cell.status == "not_reported":
        return "-"
    if not math.isfinite(cell.mean):
        return "NaN"
    # Adding 0.0 turns a rounded -0.0 into 0.0, so a zero delta never prints as "-0.00".
    shown = round(cell.mean, cell.decimals) + 0.0
    text = f"{shown:+.{cell.decimals}f}" if cell.signed else f"{shown:.{cell.decimals}f}"
    if cell.seeds > 1 and math.isfinite(cell.std):
        text += (r" $\pm$ " if flavour == "latex" else " ± ") + f"{cell.std:.1f}"
    if cell.bold:
        text = rf"\textbf{{{text}}}" if flavour == "latex" else f"**{text}**"
    return text


def format_cell(cell: Label | ValueCell, flavour: str) -> str:
    if isinstance(cell, ValueCell):
        return format_value(cell, flavour)
    return cell.as_latex() if flavour == "latex" else cell.text.replace("|", r"\|")


def _padded_levels(columns: Sequence[Column]) -> list[tuple[Label | None, ...]]:
    """Every column's header levels padded at the top to the same depth."""
    depth = max(len(c.levels) for c in columns)
    return [(None,) * (depth - len(c.levels)) + c.levels for c in columns]


def latex_header(columns: Sequence[Column]) -> list[str]:
    """Header rows: upper levels merged over equal neighbours with \\multicolumn + \\cmidrule."""
    levels = _padded_levels(columns)
    lines = []
    for depth in range(len(levels[0]) - 1):
        cells, rules, start = [], [], 0
        while start < len(columns):
            label, end = levels[start][depth], start + 1
            while label is not None and end < len(columns) and levels[end][: depth + 1] == levels[start][: depth + 1]:
                end += 1
            if label is None:
                cells.append("")
            else:
                cells.append(rf"\multicolumn{{{end - start}}}{{c}}{{{label.as_latex()}}}")
                rules.append(rf"\cmidrule(lr){{{start + 1}-{end}}}")
            start = end
        lines += [" & ".join(cells) + r" \\", " ".join(rules)] if rules else [" & ".join(cells) + r" \\"]
    lines.append(" & ".join(level[-1].as_latex() if level[-1] else "" for level in levels) + r" \\")
    return lines


def to_latex(table: Table) -> str:
    """booktabs tabular like the paper's; notes as full-width rows under \\bottomrule."""
    width = len(table.columns)
    lines = [rf"\begin{{tabular}}{{@{{}}{''.join(c.align for c in table.columns)}@{{}}}}", r"\toprule"]
    lines += latex_header(table.columns)
    lines.append(r"\midrule")
    for item in table.body:
        if isinstance(item, Rule):
            lines.append(r"\midrule")
        elif isinstance(item, BlockTitle):
            lines.append(rf"\multicolumn{{{width}}}{{c}}{{\textbf{{{latex_escape(item.title)}}}}} \\")
        else:
            lines.append(" & ".join(format_cell(cell, "latex") for cell in item) + r" \\")
    lines.append(r"\bottomrule")
    lines += [rf"\multicolumn{{{width}}}{{@{{}}l}}{{\footnotesize {note}}} \\" for note in table.latex_notes]
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"


def to_markdown(table: Table) -> str:
    """GitHub Markdown: one header row (levels joined), block titles as bold rows, notes below."""
    titles = [" ".join(level.text for level in levels if level) for levels in _padded_levels(table.columns)]
    aligns = [":---" if c.align == "l" else "---:" for c in table.columns]
    lines = ["| " + " | ".join(titles) + " |", "|" + "|".join(aligns) + "|"]
    for item in table.body:
        if isinstance(item, BlockTitle):
            lines.append("| " + " | ".join([f"**{item.title}**"] + [""] * (len(titles) - 1)) + " |")
        elif isinstance(item, ReferenceRule):
            lines.append("| " + " | ".join([item.text] + [""] * (len(titles) - 1)) + " |")
        elif not isinstance(item, Rule):
            lines.append("| " + " | ".join(format_cell(cell, "md") for cell in item) + " |")
    if table.notes:
        lines.append("")
        lines += [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    return table.records.to_csv(index=False, lineterminator="\n", float_format="%.17g")


# ------------------------------------------------------------------- table notes


# Notes are full-width rows of the tabular: kept short so that they do not widen a narrow table.
MISSING_NOTE = ("--: no result in this run", "missing: no result in this run")


def grid_notes(cells: Sequence[ValueCell], bold_scope: str) -> tuple[list[str], list[str]]:
    """(LaTeX notes, Markdown notes) about missing cells, seeds and what bold means."""
    latex, markdown = [], []
    if any(c.status == "missing" for c in cells):
        latex.append(MISSING_NOTE[0])
        markdown.append(MISSING_NOTE[1])
    seeds = sorted({c.seeds for c in cells if c.status == "ok" and c.seeds > 1})
    if seeds:
        counts = "/".join(str(s) for s in seeds)
        latex.append(rf"mean $\pm$ sample std over {counts} seeds")
        markdown.append(f"mean ± sample std over {counts} seeds (percentage points)")
    latex.append(f"bold: best {bold_scope}")
    markdown.append(f"bold: best mean {bold_scope}")
    return latex, markdown


def records_frame(name: str, cells: Sequence[ValueCell]) -> pd.DataFrame:
    """The CSV frame of a grid table: one row per value cell with its exact mean/std (percent)."""
    rows = []
    for cell in cells:
        present = cell.status == "ok"
        rows.append(
            {
                **{column: "" for column in CSV_COLUMNS},
                "table": name,
                **cell.record,
                "mean": cell.mean if present else math.nan,
                "std": cell.std if present else math.nan,
                "seeds": cell.seeds if present else 0,
                "best": cell.bold,
                "status": cell.status,
            }
        )
    return pd.DataFrame(rows, columns=list(CSV_COLUMNS))


# ------------------------------------------------------------------ grid tables


@dataclass(frozen=True)
class ValueColumn:
    """A value column: its header and the (dataset, encoder_role or None, metric) it shows."""

    column: Column
    dataset: str
    metric: str
    encoder_role: str | None = None


@dataclass(frozen=True)
class Block:
    """Rows of one encoder block: title (None: no title row), the block's encoder role, methods
    (loss rows, bold best per column) and references (rows shown under a rule when present)."""

    title: str | None
    encoder_role: str | None
    methods: tuple[str, ...]
    references: tuple[str, ...] = ()


# What each reference row is, for the note under a table that shows it.
REFERENCE_NOTES = {
    CHANCE: "Chance (label prior) = each label's train frequency as every sample's score (macro-AUC 0.5; F1 at the probe's 0.5 threshold)",
    "none": "No pretraining = the same probe on the encoder before pretraining",
    "bce": "Supervised BCE = the encoder trained end to end with BCE, then the same probe",
}


def definition_notes(datasets: Sequence[str]) -> tuple[list[str], list[str]]:
    """(LaTeX notes, Markdown notes) naming the macro-F1 definition of these macro-F1 columns' datasets."""
    note = macro_f1_note(datasets)
    return ([latex_escape(note)], [note]) if note else ([], [])


def reference_notes(methods: Sequence[str]) -> tuple[list[str], list[str]]:
    """(LaTeX notes, Markdown notes) about the reference rows a table shows (none: no notes)."""
    if not methods:
        return [], []
    shown = [m for m in REFERENCE_METHODS if m in methods]
    markdown = "reference rows (under the losses, never bold): " + "; ".join(REFERENCE_NOTES[m] for m in shown)
    return ["rows under the losses: references, never bold"], [markdown]


def grid_table(
    name: str,
    index: dict[CellKey, CellStat],
    lead: Sequence[Column],
    lead_cells: Callable[[str], list[Label]],
    value_columns: Sequence[ValueColumn],
    blocks: Sequence[Block],
    bold_scope: str,
) -> Table:
    """A methods x columns table; bold best per column within each block, among its loss rows.

    A block's reference rows follow its loss rows under a rule, each only when at least one
    of its cells has a result; a block left with no row at all is not shown.
    """

    def row_cells(block: Block, method: str) -> list[ValueCell]:
        cells = []
        for spec in value_columns:
            # The label prior has no encoder: one value per dataset, under the reference role.
            role = REFERENCE_ROLE if method == CHANCE else spec.encoder_role or block.encoder_role or ""
            column_title = " ".join(level.text for level in spec.column.levels if level)
            record = {"block": block.title or "", "row": method_name(method), "column": column_title, "dataset": spec.dataset, "encoder_role": role, "method": method, "metric": spec.metric, "source": "run"}
            cells.append(stat_cell(index.get((spec.dataset, role, method, spec.metric)), **record))
        return cells

    body: list[BodyItem] = []
    all_cells: list[ValueCell] = []
    shown_references: list[str] = []
    for block in blocks:
        rows = [row_cells(block, method) for method in block.methods]
        for column_cells in zip(*rows):
            mark_best(column_cells)
        references = [(method, row_cells(block, method)) for method in block.references]
        references = [(method, cells) for method, cells in references if any(c.status == "ok" for c in cells)]
        if not rows and not references:
            continue
        if body:
            body.append(Rule())
        if block.title:
            body.append(BlockTitle(block.title))
        body += [[*lead_cells(method), *cells] for method, cells in zip(block.methods, rows)]
        if references and rows:
            body.append(ReferenceRule())
        body += [[*lead_cells(method), *cells] for method, cells in references]
        all_cells += [cell for row in rows for cell in row] + [cell for _, cells in references for cell in cells]
        shown_references += [method for method, _ in references]
    latex_definitions, markdown_definitions = definition_notes([spec.dataset for spec in value_columns if spec.metric == "macro_f1"])
    latex_notes, notes = grid_notes(all_cells, bold_scope)
    latex_references, markdown_references = reference_notes(shown_references)
    return Table(
        name, [*lead, *(spec.column for spec in value_columns)], body, records_frame(name, all_cells),
        markdown_definitions + notes + markdown_references, latex_definitions + latex_notes + latex_references,
    )  # fmt: skip


def bold_label(text: str) -> Label:
    return Label(text, rf"\textbf{{{latex_escape(text)}}}")


METHOD_COLUMN = Column((Label("Method"),), align="l")


def method_label(method: str) -> list[Label]:
    return [Label(method_name(method))]


def image_table(index: dict[CellKey, CellStat]) -> Table:
    """Table 'results-image': MS-COCO, PASCAL, NUS-WIDE x micro-F1, macro-F1, mAP; seven methods."""
    columns = [
        ValueColumn(Column((bold_label(dataset_name(d)), Label(metric_name(m)))), d, m, "resnet")
        for d in IMAGE_DATASETS
        for m in IMAGE_METRICS
    ]
    methods = tuple(m for m in METHOD_ORDER if m not in ("sim", "dissim"))
    return grid_table("image", index, [METHOD_COLUMN], method_label, columns, [Block(None, None, methods, REFERENCE_METHODS)], "per column")


def aapd_table(index: dict[CellKey, CellStat]) -> Table:
    """Table 'results-text': AAPD with RoBERTa and Llama x micro/macro-F1; ALL, ANY, MulSupCon, Sim-Dissim."""
    columns = [
        ValueColumn(Column((bold_label(encoder_name(r)), Label(metric_name(m)))), "aapd", m, r)
        for r in ("roberta", "llama")
        for m in F1_METRICS
    ]
    return grid_table("aapd", index, [METHOD_COLUMN], method_label, columns, [Block(None, None, CORE_METHODS, REFERENCE_METHODS)], "per column")


def mimic_columns(label_space: str) -> list[ValueColumn]:
    """Three MIMIC settings x (AUC macro/micro, F1 macro/micro, P@k), headers as the paper."""
    columns = []
    for family in MIMIC_FAMILIES:
        dataset = mimic_dataset(family, label_space)
        group = bold_label(dataset_name(dataset))
        for metric, middle, bottom in (
            ("macro_auc", "AUC", "Macro"),
            ("micro_auc", "AUC", "Micro"),
            ("macro_f1", "F1", "Macro"),
            ("micro_f1", "F1", "Micro"),
            (precision_at_k_metric(label_space), None, metric_name(precision_at_k_metric(label_space))),
        ):
            columns.append(ValueColumn(Column((group, Label(middle) if middle else None, Label(bottom))), dataset, metric))
    return columns


def mimic_method_label(method: str) -> list[Label]:
    """The MIMIC tables call Sim-Dissim 'Ours'."""
    return [Label("Ours" if method == "simdissim" else method_name(method))]


def mimic_table(index: dict[CellKey, CellStat], label_space: str) -> Table:
    """Tables 'results-mimic-full' / 'results-mimic-50': an encoder block each for RoBERTa, Llama, PLM-ICD
    (with its No pretraining / Supervised BCE rows when run), then the label prior's block."""
    blocks = [Block(encoder_name(role), role, CORE_METHODS, BASELINE_METHODS) for role in MIMIC_ROLES]
    blocks.append(Block("Label prior (no encoder)", REFERENCE_ROLE, (), (CHANCE,)))
    return grid_table(
        f"mimic_{label_space}", index, [METHOD_COLUMN], mimic_method_label, mimic_columns(label_space), blocks, "per column within each encoder"
    )


def ablation_table(index: dict[CellKey, CellStat]) -> Table:
    """Table 'ablation': with/without the similarity and dissimilarity factors, MS-COCO and AAPD (RoBERTa)."""
    factors = bold_label("Factors")
    lead = [Column((factors, Label("Similarity", r"\textit{Similarity}"))), Column((factors, Label("Dissimilarity", r"\textit{Dissimilarity}")))]
    columns = [
        ValueColumn(Column((bold_label(dataset_name(d)), Label(metric_name(m)))), d, m, role)
        for d, role in (("coco", "resnet"), ("aapd", "roberta"))
        for m in F1_METRICS
    ]
    marks = {loss: (sim, dissim) for loss, sim, dissim in ABLATION_ROWS}

    def mark(flag: bool) -> Label:
        return Label("✓", r"$\checkmark$") if flag else Label("✗", r"$\times$")

    def lead_cells(method: str) -> list[Label]:
        # A reference row has no factors: its name takes the first factor column.
        return [mark(f) for f in marks[method]] if method in marks else [Label(method_name(method)), Label("")]

    methods = tuple(loss for loss, _, _ in ABLATION_ROWS)
    return grid_table("ablation", index, lead, lead_cells, columns, [Block(None, None, methods, REFERENCE_METHODS)], "per column")


# ----------------------------------------------------------------------- SOTA table


def sota_table(index: dict[CellKey, CellStat]) -> Table:
    """Table 'mimic-sota': published MIMIC-III-Full rows (paper values), the paper's and this run's
    Sim-Dissim + PLM-ICD rows, then below a rule the not strictly comparable MRR and AKIL.

    Bold: best per column among the rows above the rule (as the paper).
    """
    published = paper.paper_results("mimic-sota")
    columns = [Column((None, Label("Models")), align="l")] + [
        Column((Label(middle) if middle else None, Label(bottom)))
        for middle, bottom in (("AUC", "Macro"), ("AUC", "Micro"), ("F1", "Macro"), ("F1", "Micro"), (None, "P@8"))
    ]

    def paper_cells(role: str, method: str, row: str) -> list[ValueCell]:
        rows = published[(published["encoder_role"] == role) & (published["method"] == method)].set_index("metric")["value"]
        record = {"row": row, "dataset": "mimic3_full", "encoder_role": role, "method": method, "source": "paper"}
        return [
            ValueCell(mean=float(rows[m]), decimals=1, record={**record, "metric": m, "column": metric_name(m)})
            if m in rows.index
            else ValueCell(status="not_reported", decimals=1, record={**record, "metric": m, "column": metric_name(m)})
            for m in SOTA_METRICS
        ]

    comparable = [m for m in paper.published_models() if m not in paper.NOT_STRICTLY_COMPARABLE]
    rows: list[tuple[str, list[ValueCell]]] = [(model, paper_cells("", model, model)) for model in comparable]
    rows.append(("Sim-Dissim (paper)", paper_cells("plm_icd", "simdissim", "Sim-Dissim (paper)")))
    run_record = {"row": "Sim-Dissim (this run)", "dataset": "mimic3_full", "encoder_role": "plm_icd", "method": "simdissim", "source": "run"}
    rows.append(
        (
            "Sim-Dissim (this run)",
            [stat_cell(index.get(("mimic3_full", "plm_icd", "simdissim", m)), 1, **run_record, metric=m, column=metric_name(m)) for m in SOTA_METRICS],
        )
    )
    for column_cells in zip(*(cells for _, cells in rows)):
        mark_best(column_cells)
    reference = [(model, paper_cells("", model, model)) for model in paper.NOT_STRICTLY_COMPARABLE]
    body: list[BodyItem] = [[Label(name), *cells] for name, cells in rows]
    body.append(Rule())
    body += [[Label(name), *cells] for name, cells in reference]
    all_cells = [cell for _, cells in rows + reference for cell in cells]
    latex, markdown = grid_notes(all_cells, "per column above the rule")
    latex_definitions, markdown_definitions = definition_notes(["mimic3_full"])
    comparability = "below the rule: MRR and AKIL use DRG codes, CPT codes and medications annotated by coders; not strictly comparable"
    short = "below the rule: not strictly comparable (use DRG/CPT codes, medications)"
    return Table("sota", columns, body, records_frame("sota", all_cells), [*markdown_definitions, comparability, *markdown], [*latex_definitions, short, *latex])


# ------------------------------------------------------------------ paper vs this run


def paper_vs_run_frame(index: dict[CellKey, CellStat]) -> pd.DataFrame:
    """Every paper cell of a loss method with this run's value: table, cell, paper, run mean/std/seeds,
    delta (run - paper, percentage points) and status (ok or missing)."""
    cells = paper.paper_results()
    cells = cells[cells["table"].isin(paper.RESULT_TABLES) & (cells["encoder_role"] != "")]
    rows = []
    for cell in cells.itertuples(index=False):
        stat = index.get((cell.dataset, cell.encoder_role, cell.method, cell.metric))
        run_mean = stat.mean * 100 if stat else math.nan
        rows.append(
            {
                "table": cell.table,
                "cell": cell.cell,
                "paper": cell.value,
                "run_mean": run_mean,
                "run_std": stat.std * 100 if stat else math.nan,
                "seeds": stat.seeds if stat else 0,
                "delta": run_mean - cell.value,
                "status": "ok" if stat else "missing",
            }
        )
    return pd.DataFrame(rows, columns=["table", "cell", "paper", "run_mean", "run_std", "seeds", "delta", "status"])


def paper_vs_run_table(index: dict[CellKey, CellStat]) -> Table:
    """The cells this run has, side by side with the paper; a note counts the paper cells it lacks."""
    frame = paper_vs_run_frame(index)
    columns = [Column((Label("Table"),), "l"), Column((Label("Cell"),), "l"), Column((Label("Paper"),), "r"), Column((Label("This run"),), "r"), Column((Label("Delta"),), "r")]
    body: list[BodyItem] = []
    for row in frame[frame["status"] == "ok"].itertuples(index=False):
        decimals = 1 if row.table == "mimic-sota" else 2
        body.append(
            [
                Label(row.table),
                Label(row.cell),
                ValueCell(mean=row.paper, decimals=decimals),
                ValueCell(mean=row.run_mean, std=row.run_std, seeds=row.seeds),
                ValueCell(mean=row.delta, signed=True),
            ]
        )
    lacking = int((frame["status"] == "missing").sum())
    note = f"{len(frame) - lacking} paper cells compared; {lacking} of the paper's {len(frame)} cells have no result in this run; delta = this run - paper (percentage points)"
    # Cell ids are table/dataset/encoder_role/method/metric (paper.cell_id).
    shown = [row.cell.split("/") for row in frame.itertuples(index=False) if row.status == "ok"]
    latex_definitions, markdown_definitions = definition_notes([parts[1] for parts in shown if parts[4] == "macro_f1"])
    return Table("paper_vs_run", columns, body, frame, [note, *markdown_definitions], [note, *latex_definitions])


# ----------------------------------------------------------------------- cost table


def cost_table(benchmarks: Sequence[str | Path]) -> Table:
    """Compute cost per rule x dataset x encoder from Snakemake benchmark files."""
    frame = cost_frame(benchmarks)
    columns = [Column((Label(t),), a) for t, a in (("Rule", "l"), ("Dataset", "l"), ("Encoder", "l"), ("Jobs", "r"), ("CPU h", "r"), ("Wall h", "r"), ("Max RSS (GB)", "r"))]
    body: list[BodyItem] = [
        [Label(row.rule), Label(row.dataset), Label(row.encoder), Label(str(row.jobs)), *(Label(_format_amount(v, 3)) for v in (row.cpu_hours, row.wall_hours)), Label(_format_amount(row.max_rss_gb, 2))]
        for row in frame.itertuples(index=False)
    ]
    note = "hours summed over jobs (a job's repeats averaged); max RSS is the largest over jobs"
    notes = [note] if len(frame) else ["no benchmark files given", note]
    return Table("cost", columns, body, frame, notes, notes)


def _format_amount(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}" if math.isfinite(value) else "n/a"


# --------------------------------------------------------------------------- driver


def build_table(name: str, runs: pd.DataFrame | None, batch_size: int | None = None, benchmarks: Sequence[str | Path] = ()) -> Table:
    """Build table `name` (one of TABLE_NAMES) from the tidy runs (not needed for 'cost')."""
    if name == "cost":
        return cost_table(benchmarks)
    if runs is None:
        raise InputError(None, f"table {name!r} needs the run results", "pass --runs results/metrics/all_runs.csv", field="--runs")
    index = cell_index(runs, "test", batch_size)
    builders: dict[str, Callable[[dict[CellKey, CellStat]], Table]] = {
        "image": image_table,
        "aapd": aapd_table,
        "mimic_full": lambda i: mimic_table(i, "full"),
        "mimic_50": lambda i: mimic_table(i, "50"),
        "sota": sota_table,
        "ablation": ablation_table,
        "paper_vs_run": paper_vs_run_table,
    }
    return builders[name](index)


def write_table(table: Table, out_prefix: str | Path) -> None:
    """Render all three formats first, then write each atomically."""
    rendered = {".tex": to_latex(table), ".csv": to_csv(table), ".md": to_markdown(table)}
    prefix = Path(out_prefix)
    for suffix, text in rendered.items():
        write_text(prefix.with_name(prefix.name + suffix), text)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    args = cli.parse_args("table", argv)
    runs = load_runs(args.runs) if args.runs else None
    table = build_table(args.name, runs, args.batch_size, args.benchmarks)
    write_table(table, args.out_prefix)
    print(f"table: wrote {args.out_prefix}.{{tex,csv,md}} ({args.name})")
    return 0
