"""The paper's tables, regenerated from a run's tidy results (LaTeX + CSV + Markdown + HTML).

`python -m mscl table NAME --runs results/metrics/all_runs.csv --out-prefix results/tables/NAME
[--batch-size B] [--metrics FILE...]` writes `<prefix>.tex` (a booktabs tabular to \\input
into a table float, its caption and notes as a footnote-size paragraph under it; needs booktabs
and amssymb), `<prefix>.csv` (exact numbers, one row per cell), `<prefix>.md` and `<prefix>.html`
(a standalone page for `snakemake --report`), each atomically and only after all four are rendered.

NAME is one of TABLE_NAMES. Every table has a title and a caption of its own: what it shows, what
ran (the dataset and encoder names all_runs.csv records, `mscl.report.names`: a stand-in is called
what it is), how many seeds each value averages and what ± means. The notes under it (the same in
every format) name the macro-F1 definition, what bold means, the reference rows and what was left out.

Values are test-split percentages with two decimals (the SOTA table one, as the paper). Several
seeds show as "mean ± std" (sample std, one decimal). Every mean says its n: the caption when all
cells share one n, else each cell ("(n=3)"). Bold marks the best displayed mean of a column among
its loss rows with the column's largest n (ties all bold), only when at least two such cells
exist: a cell with fewer seeds is never bold over a mean of more seeds.

Cells without a result: the pipeline collects every run of its configuration, so a cell with no
result in all_runs.csv is outside the configuration's grid. A row, column or block with no result
at all is left out (a note names it); a single such cell among results reads `not run` (LaTeX
`--`). The CSV keeps every cell of the paper's grid, with status `ok`, `not_run` or `not_reported`.
Without --batch-size each (dataset, encoder) uses the batch size most of its runs share.

Macro-F1: every table with a macro-F1 column says under it which definition that column uses
(`mscl.report.style.macro_f1_note`: the one of its datasets' family, `mscl.metrics.macro_f1_definition`):
the image, AAPD and ablation tables the mean of per-class F1 (MulSupCon), the MIMIC and SOTA
tables the harmonic mean of macro-precision and macro-recall (CAML).

Reference rows: the tables that list methods (image, aapd, mimic_full, mimic_50, ablation) show,
below a rule under the loss rows, Chance (label prior, `python -m mscl chance`), No pretraining
(method `none`) and Supervised BCE (method `bce`) when the results hold them. Reference cells are
never bold and never count in the best of a column. Chance has no encoder: it is looked up under
the role `reference` whatever the column's encoder; the MIMIC tables show it once, in a last block.

What ran beyond the paper's grid: a table lists the paper's losses, datasets and encoder roles,
never more, so its CSV (and `check-complete`) keeps judging the paper's cells only. A loss that ran
on a (dataset, encoder role) the table shows but that no loss table (GRID_TABLES) lists there (a
plugin's loss, say) is named in a note, "also ran: <display names> (see benchmark)"; so is an
encoder that ran under a role the table shows beside the one it shows (per dataset and role the
tables show the paper's own model, else the first encoder of the config, `collect.shown_encoders`).
Every run is in the benchmark table (`python -m mscl benchmark`). Losses are called by the
`method_display` all_runs.csv records (`collect --method-names`), else by the paper's name.

Comparison with the paper: `paper_vs_run` and `sota` put this run's numbers beside the paper's
only for cells of the paper's own data and models (`WhatRan.is_paper`). A run on stand-ins gets no
delta and no place among the published rows: `paper_vs_run` then lists what stood in for what.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from mscl import cli
from mscl.layout import TABLE_NAMES  # noqa: F401  (the names `table NAME` accepts; the docstrings refer to it)
from mscl.data.stats_table import latex_escape
from mscl.errors import InputError
from mscl.io import write_text
from mscl.report import html, paper
from mscl.report.collect import CellKey, CellStat, cell_index, load_runs, mixed_code_sentence, paper_runs, what_ran, with_later_columns
from mscl.report.cost import cost_frame
from mscl.report.names import DATASET_NAMES, PAPER_ENCODER_NAMES, WhatRan
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
    macro_f1_note,
    metric_name,
    mimic_dataset,
    precision_at_k_metric,
)

SOTA_METRICS = ("macro_auc", "micro_auc", "macro_f1", "micro_f1", "p_at_8")
# Ablation rows as (loss, uses the similarity factor, uses the dissimilarity factor).
ABLATION_ROWS = (("any", False, False), ("sim", True, False), ("dissim", False, True), ("simdissim", True, True))
CSV_COLUMNS = ("table", "block", "row", "column", "dataset", "encoder_role", "method", "metric", "source", "mean", "std", "seeds", "best", "status")
# LaTeX for the few non-ASCII characters captions and notes use.
LATEX_SYMBOLS = {"±": r"$\pm$", "≥": r"$\geq$", "−": r"$-$", "Δ": r"$\Delta$", "→": r"$\rightarrow$"}


def latex_text(text: str) -> str:
    """Plain caption/note text as LaTeX: specials escaped, ± and friends in math mode."""
    escaped = latex_escape(text)
    for symbol, latex in LATEX_SYMBOLS.items():
        escaped = escaped.replace(symbol, latex)
    return escaped


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
    """A number in percent. status: ok, not_run (no result: outside the configuration's grid)
    or not_reported (paper's '-'). show_n: the cell names its seed count."""

    mean: float = math.nan
    std: float = math.nan
    seeds: int = 1
    decimals: int = 2
    status: str = "ok"
    signed: bool = False
    bold: bool = False
    show_n: bool = False
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
    """The rule above a block's reference rows: \\midrule in LaTeX, a labelled row in Markdown/HTML."""

    text: str = "reference rows (not ranked)"


Row = list  # of Label | ValueCell, one per column
BodyItem = Row | BlockTitle | Rule


@dataclass
class Table:
    """A rendered-ready table: columns, body, title, caption, notes (plain text) and the CSV frame."""

    name: str
    columns: list[Column]
    body: list[BodyItem]
    records: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    title: str = ""
    caption: str = ""

    @property
    def latex_notes(self) -> list[str]:
        """The notes as LaTeX (the .tex prints them under the tabular)."""
        return [latex_text(note) for note in self.notes]


def stat_cell(stat: CellStat | None, decimals: int = 2, **record: Any) -> ValueCell:
    """A ValueCell in percent from a CellStat (fractions); a not-run cell if `stat` is None."""
    if stat is None:
        return ValueCell(status="not_run", decimals=decimals, record=record)
    return ValueCell(mean=stat.mean * 100, std=stat.std * 100, seeds=stat.seeds, decimals=decimals, record=record)


def is_result(cell: ValueCell) -> bool:
    return cell.status == "ok"


def mark_best(cells: Sequence[ValueCell]) -> None:
    """Bold the best displayed mean among the cells with the largest seed count, if at least two
    such cells have a finite mean (ties all bold); cells with fewer seeds are not ranked."""
    present = [c for c in cells if is_result(c) and math.isfinite(c.mean)]
    if not present:
        return
    most = max(c.seeds for c in present)
    ranked = [c for c in present if c.seeds == most]
    if len(ranked) < 2:
        return
    best = max(c.display_mean() for c in ranked)
    for cell in ranked:
        cell.bold = cell.display_mean() == best


# -------------------------------------------------------------------------- rendering

NOT_RUN_TEXT = {"latex": "--", "md": "not run", "html": '<span class="notrun">not run</span>'}


def format_value(cell: ValueCell, flavour: str) -> str:
    """The cell text in 'latex', 'md' or 'html': mean, ' ± std' when several seeds, '(n=K)' when
    the table mixes seed counts, bold if best."""
    if cell.status == "not_run":
        return NOT_RUN_TEXT[flavour]
    if cell.status == "not_reported":
        return "-"
    if not math.isfinite(cell.mean):
        text = "NaN"
    else:
        # Adding 0.0 turns a rounded -0.0 into 0.0, so a zero delta never prints as "-0.00".
        shown = round(cell.mean, cell.decimals) + 0.0
        text = f"{shown:+.{cell.decimals}f}" if cell.signed else f"{shown:.{cell.decimals}f}"
        if cell.seeds > 1 and math.isfinite(cell.std):
            text += (r" $\pm$ " if flavour == "latex" else " ± ") + f"{cell.std:.1f}"
    if cell.bold:
        text = {"latex": rf"\textbf{{{text}}}", "md": f"**{text}**", "html": f"<strong>{text}</strong>"}[flavour]
    if cell.show_n:
        text += {"latex": rf"\,{{\scriptsize(n={cell.seeds})}}", "md": f" (n={cell.seeds})", "html": f' <span class="n">(n={cell.seeds})</span>'}[flavour]
    return text


def format_cell(cell: Label | ValueCell, flavour: str) -> str:
    if isinstance(cell, ValueCell):
        return format_value(cell, flavour)
    if flavour == "latex":
        return cell.as_latex()
    return escape(cell.text) if flavour == "html" else cell.text.replace("|", r"\|")


def _padded_levels(columns: Sequence[Column]) -> list[tuple[Label | None, ...]]:
    """Every column's header levels padded at the top to the same depth."""
    depth = max(len(c.levels) for c in columns)
    return [(None,) * (depth - len(c.levels)) + c.levels for c in columns]


def header_groups(columns: Sequence[Column]) -> list[list[tuple[Label | None, int, int]]]:
    """Per header level above the last: (label, first column, end column) runs of equal labels
    (a run only merges columns whose labels agree on every level above too)."""
    levels = _padded_levels(columns)
    rows = []
    for depth in range(len(levels[0]) - 1):
        runs, start = [], 0
        while start < len(columns):
            label, end = levels[start][depth], start + 1
            while label is not None and end < len(columns) and levels[end][: depth + 1] == levels[start][: depth + 1]:
                end += 1
            runs.append((label, start, end))
            start = end
        rows.append(runs)
    return rows


def latex_header(columns: Sequence[Column]) -> list[str]:
    """Header rows: upper levels merged over equal neighbours with \\multicolumn + \\cmidrule."""
    lines = []
    for runs in header_groups(columns):
        cells = ["" if label is None else rf"\multicolumn{{{end - start}}}{{c}}{{{label.as_latex()}}}" for label, start, end in runs]
        rules = [rf"\cmidrule(lr){{{start + 1}-{end}}}" for label, start, end in runs if label is not None]
        lines += [" & ".join(cells) + r" \\", " ".join(rules)] if rules else [" & ".join(cells) + r" \\"]
    lines.append(" & ".join(level[-1].as_latex() if level[-1] else "" for level in _padded_levels(columns)) + r" \\")
    return lines


def to_latex(table: Table) -> str:
    """booktabs tabular like the paper's; the caption and notes as a footnote-size paragraph under it."""
    width = len(table.columns)
    lines = [f"% {line}" for line in (table.title, table.caption) if line]
    lines += [rf"\begin{{tabular}}{{@{{}}{''.join(c.align for c in table.columns)}@{{}}}}", r"\toprule"]
    lines += latex_header(table.columns)
    lines.append(r"\midrule")
    for item in table.body:
        if isinstance(item, Rule):
            lines.append(r"\midrule")
        elif isinstance(item, BlockTitle):
            lines.append(rf"\multicolumn{{{width}}}{{c}}{{\textbf{{{latex_escape(item.title)}}}}} \\")
        else:
            lines.append(" & ".join(format_cell(cell, "latex") for cell in item) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    paragraphs = ([latex_text(table.caption)] if table.caption else []) + table.latex_notes
    if paragraphs:
        lines += [r"\par\smallskip", r"{\footnotesize", *(rf"{text}\par" for text in paragraphs), "}"]
    return "\n".join(lines) + "\n"


def to_markdown(table: Table) -> str:
    """GitHub Markdown: title and caption, one header row (levels joined), block titles as bold
    rows, reference rules as labelled rows, notes below."""
    titles = [" ".join(level.text for level in levels if level) for levels in _padded_levels(table.columns)]
    aligns = [":---" if c.align == "l" else "---:" for c in table.columns]
    lines = [f"**{table.title}.** {table.caption}".rstrip(), ""] if table.title else []
    lines += ["| " + " | ".join(titles) + " |", "|" + "|".join(aligns) + "|"]
    for item in table.body:
        if isinstance(item, BlockTitle):
            lines.append("| " + " | ".join([f"**{item.title}**"] + [""] * (len(titles) - 1)) + " |")
        elif isinstance(item, ReferenceRule):
            lines.append("| " + " | ".join([f"*{item.text}*"] + [""] * (len(titles) - 1)) + " |")
        elif not isinstance(item, Rule):
            lines.append("| " + " | ".join(format_cell(cell, "md") for cell in item) + " |")
    if table.notes:
        lines.append("")
        lines += [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def html_table(table: Table) -> str:
    """The <table> element: merged group headers, block titles, reference rules, rules between groups."""
    width = len(table.columns)
    align = ["l" if c.align == "l" else "" for c in table.columns]
    lines = ["<table>", "<thead>"]
    for runs in header_groups(table.columns):
        cells = []
        for label, start, end in runs:
            span = f' colspan="{end - start}"' if end - start > 1 else ""
            cells.append(f'<th class="group"{span}>{escape(label.text)}</th>' if label is not None else f"<th{span}></th>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    last = [levels[-1].text if levels[-1] else "" for levels in _padded_levels(table.columns)]
    lines.append("<tr>" + "".join(f'<th class="{a}">{escape(text)}</th>' for a, text in zip(align, last)) + "</tr>")
    lines += ["</thead>", "<tbody>"]
    rule_next = False
    for item in table.body:
        if isinstance(item, ReferenceRule):
            lines.append(f'<tr class="reference"><td colspan="{width}">{escape(item.text)}</td></tr>')
        elif isinstance(item, Rule):
            rule_next = True
            continue
        elif isinstance(item, BlockTitle):
            css = "block rule" if rule_next else "block"
            lines.append(f'<tr class="{css}"><th colspan="{width}">{escape(item.title)}</th></tr>')
        else:
            css = ' class="rule"' if rule_next else ""
            lines.append(f"<tr{css}>" + "".join(f'<td class="{a}">{format_cell(cell, "html")}</td>' for a, cell in zip(align, item)) + "</tr>")
        rule_next = False
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def to_html(table: Table) -> str:
    """A standalone page (mscl.report.html): title, caption, the table, its notes."""
    return html.page(table.title or table.name, table.caption, html_table(table), table.notes)


def to_csv(table: Table) -> str:
    return table.records.to_csv(index=False, lineterminator="\n", float_format="%.17g")


# ------------------------------------------------------------------- captions and notes

NOT_RUN_NOTE = "not run: no result for this cell, which is outside this configuration's grid (the pipeline collects every run of its grid)"
STAND_IN_SENTENCE = (
    "These are stand-ins for the paper's data and models, not a reproduction: compare the rows with each other, "
    "not with the paper's numbers (paper_vs_run and sota compare only the paper's own data and models)."
)
PAPER_SENTENCE = "The paper's own data and models: paper_vs_run sets these cells beside the paper's."


def seeds_sentence(cells: Sequence[ValueCell]) -> str:
    """How many seeds the shown values average, and what ± is (the caption's spread sentence)."""
    counts: dict[int, int] = {}
    for cell in cells:
        if is_result(cell) and cell.record.get("method") != CHANCE:
            counts[cell.seeds] = counts.get(cell.seeds, 0) + 1
    if not counts:
        return ""
    spread = " ± is the sample standard deviation over seeds (ddof 1), in points."
    if len(counts) == 1:
        n = next(iter(counts))
        return "Every value is one run (n = 1 seed), so no spread is shown." if n == 1 else f"Every value is the mean over n = {n} seeds.{spread}"
    parts = ", ".join(f"n = {n} for {count} cell{'s' if count > 1 else ''}" for n, count in sorted(counts.items(), reverse=True))
    return f"Values are means over n seeds, n in each cell ({parts}).{spread}"


def ran_sentence(what: WhatRan, pairs: Sequence[tuple[str, str]]) -> str:
    """'Ran: ENCODER on DATASET, DATASET; ENCODER on DATASET.' for the (dataset, role) pairs shown."""
    by_role: dict[str, list[str]] = {}
    for dataset, role in pairs:
        if role != REFERENCE_ROLE:
            datasets = by_role.setdefault(role, [])
            if dataset not in datasets:
                datasets.append(dataset)
    if not by_role:
        return ""
    clauses = [f"{what.encoder(role, datasets)} on {', '.join(what.dataset(d) for d in datasets)}" for role, datasets in by_role.items()]
    return "Ran: " + "; ".join(clauses) + "."


def provenance_sentence(what: WhatRan, pairs: Sequence[tuple[str, str]]) -> str:
    """Whether the shown cells are stand-ins or the paper's own data and models."""
    shown = [(d, r) for d, r in pairs if r != REFERENCE_ROLE]
    if not shown:
        return ""
    return PAPER_SENTENCE if all(what.is_paper(d, r) for d, r in shown) else STAND_IN_SENTENCE


def caption_text(*sentences: str) -> str:
    return " ".join(s for s in sentences if s)


def records_frame(name: str, cells: Sequence[ValueCell]) -> pd.DataFrame:
    """The CSV frame of a grid table: one row per value cell with its exact mean/std (percent)."""
    rows = []
    for cell in cells:
        present = is_result(cell)
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
    CHANCE: "Chance (label prior) = each label's train frequency as every sample's score (macro-AUC 0.5; F1 at the probe's 0.5 threshold); deterministic, no seed",
    "none": "No pretraining = the same probe on the encoder before pretraining",
    "bce": "Supervised BCE = the encoder trained end to end with BCE, then the same probe",
}


def definition_notes(datasets: Sequence[str]) -> list[str]:
    """The note naming the macro-F1 definition of these macro-F1 columns' datasets (none: no note)."""
    note = macro_f1_note(datasets)
    return [note] if note else []


def reference_notes(methods: Sequence[str]) -> list[str]:
    """The note about the reference rows a table shows (none: no note)."""
    shown = [m for m in REFERENCE_METHODS if m in methods]
    if not shown:
        return []
    return ["reference rows (under the losses, never bold): " + "; ".join(REFERENCE_NOTES[m] for m in shown)]


def bold_note(cells: Sequence[ValueCell], scope: str) -> str:
    seeds = {c.seeds for c in cells if is_result(c) and c.record.get("method") != CHANCE}
    if len(seeds) > 1:
        return f"bold: best mean {scope} among the cells with the column's largest n (at least two); cells with fewer seeds are not ranked"
    return f"bold: best mean {scope} (among at least two values)"


def not_run_table(name: str, title: str, shows: str, records: pd.DataFrame) -> Table:
    """A table none of whose cells ran in this configuration: one line saying so."""
    line = "Nothing of this table ran in this configuration: every cell is outside its grid."
    return Table(name, [Column((Label(""),), "l")], [[Label(line)]], records, [], title, shows + ".")


def show_seed_counts(shown: Sequence[ValueCell]) -> None:
    """Each trained cell shows its n when the shown trained cells average different numbers of
    seeds (else the caption says the one n)."""
    mixed = len({c.seeds for c in shown if is_result(c) and c.record.get("method") != CHANCE}) > 1
    for cell in shown:
        cell.show_n = mixed and is_result(cell) and cell.record.get("method") != CHANCE


def left_out_columns(what: WhatRan, value_columns: Sequence[ValueColumn], keep: Sequence[int]) -> list[str]:
    """The names of the columns a grid table leaves out (those not in `keep`), each once."""
    kept_groups = {_column_group(value_columns[j]) for j in keep}
    return list(
        dict.fromkeys(
            _left_out_column(what, spec, whole_group=_column_group(spec) not in kept_groups)
            for j, spec in enumerate(value_columns)
            if j not in keep
        )
    )


def _left_out(columns: Sequence[str], blocks: Sequence[str], rows: Sequence[str]) -> list[str]:
    """The parts of the "left out" note: columns, the paper's blocks, rows (each row once)."""
    parts = [f"columns {', '.join(columns)}"] if columns else []
    parts += [f"the paper's blocks {', '.join(blocks)}"] if blocks else []
    return parts + ([f"rows {', '.join(dict.fromkeys(rows))}"] if rows else [])


def grid_table(
    name: str,
    index: dict[CellKey, CellStat],
    what: WhatRan,
    lead: Sequence[Column],
    lead_cells: Callable[[WhatRan, str], list[Label]],
    value_columns: Sequence[ValueColumn],
    blocks: Sequence[Block],
    bold_scope: str,
    title: str,
    shows: str,
) -> Table:
    """A methods x columns table; bold best per column within each block, among its loss rows.

    Columns, loss rows and blocks without any result are left out (a note names them); a block's
    reference rows follow its loss rows under a rule, each only when one of its cells has a result.
    """

    def role_of(spec: ValueColumn, block: Block, method: str) -> str:
        # The label prior has no encoder: one value per dataset, under the reference role.
        return REFERENCE_ROLE if method == CHANCE else spec.encoder_role or block.encoder_role or ""

    def row_cells(block: Block, method: str) -> list[ValueCell]:
        cells = []
        for spec in value_columns:
            role = role_of(spec, block, method)
            column_title = " ".join(level.text for level in spec.column.levels if level)
            record = {"block": block.title or "", "row": what.method(method), "column": column_title, "dataset": spec.dataset, "encoder_role": role, "method": method, "metric": spec.metric, "source": "run"}
            cells.append(stat_cell(index.get((spec.dataset, role, method, spec.metric)), **record))
        return cells

    built = [(block, [(m, row_cells(block, m)) for m in block.methods], [(m, row_cells(block, m)) for m in block.references]) for block in blocks]
    # The CSV: every loss cell of the paper's grid, and the cells of each reference row that has a result.
    every_cell = [cell for _, rows, references in built for _, cells in rows + [r for r in references if any(map(is_result, r[1]))] for cell in cells]
    # A column stays when a trained (non-chance) row has a result in it.
    keep = [j for j in range(len(value_columns)) if any(is_result(cells[j]) for _, rows, refs in built for method, cells in rows + refs if method != CHANCE)]
    if not keep:
        return not_run_table(name, title, shows, records_frame(name, every_cell))
    body: list[BodyItem] = []
    shown: list[ValueCell] = []
    shown_references: list[str] = []
    left_out_rows: list[str] = []
    left_out_blocks: list[str] = []
    pairs: list[tuple[str, str]] = []
    for block, rows, references in built:
        rows = [(method, [cells[j] for j in keep]) for method, cells in rows]
        kept_rows = [(method, cells) for method, cells in rows if any(map(is_result, cells))]
        references = [(method, [cells[j] for j in keep]) for method, cells in references]
        references = [(method, cells) for method, cells in references if any(map(is_result, cells))]
        if not kept_rows and not (references and (block.methods == () or any(m != CHANCE for m, _ in references))):
            if block.title and block.methods:
                left_out_blocks.append(PAPER_ENCODER_NAMES.get(block.encoder_role or "", block.title))
            continue
        left_out_rows += [what.method(method) for method, cells in rows if method not in {m for m, _ in kept_rows}]
        for column_cells in zip(*(cells for _, cells in kept_rows)):
            mark_best(column_cells)
        if body:
            body.append(Rule())
        if block.title:
            body.append(BlockTitle(block.title))
        body += [[*lead_cells(what, method), *cells] for method, cells in kept_rows]
        if references and kept_rows:
            body.append(ReferenceRule())
        body += [[*lead_cells(what, method), *cells] for method, cells in references]
        shown += [cell for _, cells in kept_rows + references for cell in cells]
        shown_references += [method for method, _ in references]
        pairs += [(cell.record["dataset"], cell.record["encoder_role"]) for _, cells in kept_rows + references for cell in cells if is_result(cell)]
    show_seed_counts(shown)
    notes = definition_notes([value_columns[j].dataset for j in keep if value_columns[j].metric == "macro_f1"])
    notes.append(bold_note(shown, bold_scope))
    if any(c.status == "not_run" for c in shown):
        notes.append(NOT_RUN_NOTE)
    left_out = _left_out(left_out_columns(what, value_columns, keep), left_out_blocks, left_out_rows)
    if left_out:
        notes.append("left out, not run in this configuration (outside its grid): " + "; ".join(left_out))
    notes += reference_notes(shown_references)
    caption = caption_text(shows + ".", ran_sentence(what, pairs), seeds_sentence(shown), provenance_sentence(what, pairs))
    columns = [*lead, *(value_columns[j].column for j in keep)]
    return Table(name, columns, body, records_frame(name, every_cell), notes, title, caption)


def _column_group(spec: ValueColumn) -> str:
    """The top header label of a value column (its dataset or encoder group)."""
    top = next((level for level in spec.column.levels if level), None)
    return top.text if top else spec.dataset


def _left_out_column(what: WhatRan, spec: ValueColumn, whole_group: bool) -> str:
    """How a note names a left-out column: its group (or group and metric); a group whose dataset
    or encoder never ran by the paper's name, said to be the paper's."""
    role = spec.encoder_role
    if not what.ran(spec.dataset):
        name = f"the paper's {DATASET_NAMES.get(spec.dataset, spec.dataset)}"
    elif role is not None and not what.ran(spec.dataset, role):
        name = f"the paper's {PAPER_ENCODER_NAMES.get(role, role)}"
    else:
        name = _column_group(spec)
    return name if whole_group else f"{name} {' '.join(level.text for level in spec.column.levels[1:] if level)}"


def bold_label(text: str) -> Label:
    return Label(text, rf"\textbf{{{latex_escape(text)}}}")


METHOD_COLUMN = Column((Label("Method"),), align="l")


def method_label(what: WhatRan, method: str) -> list[Label]:
    return [Label(what.method(method))]


def image_table(index: dict[CellKey, CellStat], what: WhatRan) -> Table:
    """Table 'results-image': MS-COCO, PASCAL, NUS-WIDE x micro-F1, macro-F1, mAP; seven methods."""
    columns = [
        ValueColumn(Column((bold_label(what.dataset(d)), Label(metric_name(m)))), d, m, "resnet")
        for d in IMAGE_DATASETS
        for m in IMAGE_METRICS
    ]
    methods = tuple(m for m in METHOD_ORDER if m not in ("sim", "dissim"))
    return grid_table(
        "image", index, what, [METHOD_COLUMN], method_label, columns, [Block(None, None, methods, REFERENCE_METHODS)], "per column",
        "Image classification (paper Table results-image)",
        "Test micro-F1, macro-F1 and mAP (%) of a linear probe on each contrastive loss's encoder, per image dataset",
    )  # fmt: skip


def aapd_table(index: dict[CellKey, CellStat], what: WhatRan) -> Table:
    """Table 'results-text': AAPD with RoBERTa and Llama x micro/macro-F1; ALL, ANY, MulSupCon, Sim-Dissim."""
    columns = [
        ValueColumn(Column((bold_label(what.encoder(r, ["aapd"])), Label(metric_name(m)))), "aapd", m, r)
        for r in ("roberta", "llama")
        for m in F1_METRICS
    ]
    return grid_table(
        "aapd", index, what, [METHOD_COLUMN], method_label, columns, [Block(None, None, CORE_METHODS, REFERENCE_METHODS)], "per column",
        f"Text classification on {what.dataset('aapd')} (paper Table results-text)",
        "Test micro- and macro-F1 (%) of a linear probe on each contrastive loss's text encoder",
    )  # fmt: skip


def mimic_columns(label_space: str, what: WhatRan) -> list[ValueColumn]:
    """Three MIMIC settings x (AUC macro/micro, F1 macro/micro, P@k), headers as the paper."""
    columns = []
    for family in MIMIC_FAMILIES:
        dataset = mimic_dataset(family, label_space)
        group = bold_label(what.dataset(dataset))
        for metric, middle, bottom in (
            ("macro_auc", "AUC", "Macro"),
            ("micro_auc", "AUC", "Micro"),
            ("macro_f1", "F1", "Macro"),
            ("micro_f1", "F1", "Micro"),
            (precision_at_k_metric(label_space), None, metric_name(precision_at_k_metric(label_space))),
        ):
            columns.append(ValueColumn(Column((group, Label(middle) if middle else None, Label(bottom))), dataset, metric))
    return columns


def mimic_method_label(what: WhatRan, method: str) -> list[Label]:
    """The MIMIC tables call Sim-Dissim 'Ours'."""
    return [Label("Ours" if method == "simdissim" else what.method(method))]


def mimic_table(index: dict[CellKey, CellStat], what: WhatRan, label_space: str) -> Table:
    """Tables 'results-mimic-full' / 'results-mimic-50': an encoder block each for RoBERTa, Llama, PLM-ICD
    (with its No pretraining / Supervised BCE rows when run), then the label prior's block."""
    datasets = [mimic_dataset(family, label_space) for family in MIMIC_FAMILIES]
    blocks = [Block(what.encoder(role, datasets), role, CORE_METHODS, BASELINE_METHODS) for role in MIMIC_ROLES]
    blocks.append(Block("Label prior (no encoder)", REFERENCE_ROLE, (), (CHANCE,)))
    space = "Full" if label_space == "full" else "Top-50"
    return grid_table(
        f"mimic_{label_space}", index, what, [METHOD_COLUMN], mimic_method_label, mimic_columns(label_space, what), blocks, "per column within each encoder",
        f"ICD coding, {space} label space (paper Table results-mimic-{label_space})",
        f"Test macro/micro-AUC, macro/micro-F1 and {metric_name(precision_at_k_metric(label_space))} (%) per encoder and contrastive loss (Ours = Sim-Dissim), per MIMIC setting",
    )  # fmt: skip


def ablation_table(index: dict[CellKey, CellStat], what: WhatRan) -> Table:
    """Table 'ablation': with/without the similarity and dissimilarity factors, MS-COCO and AAPD (RoBERTa)."""
    factors = bold_label("Factors")
    lead = [Column((factors, Label("Similarity", r"\textit{Similarity}"))), Column((factors, Label("Dissimilarity", r"\textit{Dissimilarity}")))]
    columns = [
        ValueColumn(Column((bold_label(what.dataset(d)), Label(metric_name(m)))), d, m, role)
        for d, role in (("coco", "resnet"), ("aapd", "roberta"))
        for m in F1_METRICS
    ]
    marks = {loss: (sim, dissim) for loss, sim, dissim in ABLATION_ROWS}

    def mark(flag: bool) -> Label:
        return Label("✓", r"$\checkmark$") if flag else Label("✗", r"$\times$")

    def lead_cells(what: WhatRan, method: str) -> list[Label]:
        # A reference row has no factors: its name takes the first factor column.
        return [mark(f) for f in marks[method]] if method in marks else [Label(what.method(method)), Label("")]

    methods = tuple(loss for loss, _, _ in ABLATION_ROWS)
    return grid_table(
        "ablation", index, what, lead, lead_cells, columns, [Block(None, None, methods, REFERENCE_METHODS)], "per column",
        "Ablation of the two factors (paper Table ablation)",
        "Test micro- and macro-F1 (%) with and without the similarity and dissimilarity factors: ANY (neither), Sim only, Dissim only, Sim-Dissim (both)",
    )  # fmt: skip


# ----------------------------------------------------------------------- SOTA table


def sota_table(index: dict[CellKey, CellStat], what: WhatRan) -> Table:
    """Table 'mimic-sota': published MIMIC-III-Full rows (paper values) and the paper's Sim-Dissim +
    PLM-ICD row; this run's Sim-Dissim + PLM-ICD row only when it ran the paper's own data and model
    (else a note says what it ran instead); then below a rule the not strictly comparable MRR and AKIL.

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
    run_cells = [stat_cell(index.get(("mimic3_full", "plm_icd", "simdissim", m)), 1, **run_record, metric=m, column=metric_name(m)) for m in SOTA_METRICS]
    ran = any(map(is_result, run_cells))
    own = ran and what.is_paper("mimic3_full", "plm_icd")
    if own:
        rows.append(("Sim-Dissim (this run)", run_cells))
    for column_cells in zip(*(cells for _, cells in rows)):
        mark_best(column_cells)
    reference = [(model, paper_cells("", model, model)) for model in paper.NOT_STRICTLY_COMPARABLE]
    body: list[BodyItem] = [[Label(name), *cells] for name, cells in rows]
    body.append(Rule())
    body += [[Label(name), *cells] for name, cells in reference]
    all_cells = [cell for _, cells in rows + reference for cell in cells] + ([] if own else run_cells)
    notes = definition_notes(["mimic3_full"])
    notes.append("below the rule: MRR and AKIL use DRG codes, CPT codes and medications annotated by coders; not strictly comparable, not bold")
    notes.append("bold: best value per column above the rule")
    if own and any(c.status == "not_run" for c in run_cells):
        notes.append(NOT_RUN_NOTE)
    if own:
        seeds = max(c.seeds for c in run_cells if is_result(c))
        spread = "; ± sample std over seeds" if seeds > 1 else ""
        notes.append(f"Sim-Dissim (this run): {what.encoder('plm_icd', ['mimic3_full'])} on {what.dataset('mimic3_full')}, n = {seeds} seed{'s' if seeds > 1 else ''}{spread}")
        provenance = PAPER_SENTENCE
    elif ran:
        notes.append(
            f"This run's Sim-Dissim row is left out: it ran {what.encoder('plm_icd', ['mimic3_full'])} on {what.dataset('mimic3_full')}, "
            "stand-ins for PLM-ICD on MIMIC-III-Full, so its numbers do not belong among the published ones (they are in table mimic_full)."
        )
        provenance = "This run used stand-ins: the table shows the published numbers only."
    else:
        notes.append("This run has no Sim-Dissim + PLM-ICD result on MIMIC-III-Full: the table shows the published numbers only.")
        provenance = ""
    caption = caption_text(
        "Published results on MIMIC-III-Full (%, as printed in the paper, one decimal), with the paper's Sim-Dissim + PLM-ICD row.",
        provenance,
    )
    return Table("sota", columns, body, records_frame("sota", all_cells), notes, "Comparison with published ICD coding models (paper Table mimic-sota)", caption)


# ------------------------------------------------------------------ paper vs this run


PAPER_VS_RUN_COLUMNS = ["table", "cell", "paper", "run_mean", "run_std", "seeds", "delta", "status", "dataset_display", "encoder_display"]


def paper_vs_run_frame(index: dict[CellKey, CellStat], what: WhatRan) -> pd.DataFrame:
    """Every paper cell of a loss method with this run's value: table, cell, paper, run mean/std/seeds,
    delta (run - paper, percentage points) and status: ok (compared), stand_in (this run has the cell
    on stand-in data or models: no delta) or not_run; and the names of what ran."""
    cells = paper.paper_results()
    cells = cells[cells["table"].isin(paper.RESULT_TABLES) & (cells["encoder_role"] != "")]
    rows = []
    for cell in cells.itertuples(index=False):
        stat = index.get((cell.dataset, cell.encoder_role, cell.method, cell.metric))
        run_mean = stat.mean * 100 if stat else math.nan
        status = "not_run" if stat is None else "ok" if what.is_paper(cell.dataset, cell.encoder_role) else "stand_in"
        rows.append(
            {
                "table": cell.table,
                "cell": cell.cell,
                "paper": cell.value,
                "run_mean": run_mean,
                "run_std": stat.std * 100 if stat else math.nan,
                "seeds": stat.seeds if stat else 0,
                "delta": run_mean - cell.value if status == "ok" else math.nan,
                "status": status,
                "dataset_display": what.dataset(cell.dataset) if stat else "",
                "encoder_display": what.encoder(cell.encoder_role, [cell.dataset]) if stat else "",
            }
        )
    return pd.DataFrame(rows, columns=PAPER_VS_RUN_COLUMNS)


def paper_vs_run_table(index: dict[CellKey, CellStat], what: WhatRan) -> Table:
    """The cells this run has on the paper's own data and models, beside the paper's; when it has none,
    what stood in for the paper's datasets and models instead (no value, no delta)."""
    frame = paper_vs_run_frame(index, what)
    compared, stand_in = frame[frame["status"] == "ok"], frame[frame["status"] == "stand_in"]
    lacking = int((frame["status"] == "not_run").sum())
    notes = []
    if len(compared):
        columns = [Column((Label("Table"),), "l"), Column((Label("Cell"),), "l"), Column((Label("Paper"),), "r"), Column((Label("This run"),), "r"), Column((Label("Delta"),), "r")]
        body: list[BodyItem] = []
        mixed = compared["seeds"].nunique() > 1
        for row in compared.itertuples(index=False):
            decimals = 1 if row.table == "mimic-sota" else 2
            run = ValueCell(mean=row.run_mean, std=row.run_std, seeds=int(row.seeds), show_n=mixed)
            body.append([Label(row.table), Label(row.cell), ValueCell(mean=row.paper, decimals=decimals), run, ValueCell(mean=row.delta, signed=True)])
        seeds = sorted(compared["seeds"].unique())
        caption = caption_text(
            f"{len(compared)} cells of the paper's result tables that this run has on the paper's own data and models, beside the paper's value; "
            "delta = this run - paper (percentage points).",
            f"This run: n = {'/'.join(map(str, seeds))} seed(s) per cell{' (in each cell)' if mixed else ''}; ± sample std over seeds.",
        )
        # Cell ids are table/dataset/encoder_role/method/metric (paper.cell_id).
        notes += definition_notes([row.cell.split("/")[1] for row in compared.itertuples(index=False) if row.cell.split("/")[4] == "macro_f1"])
    else:
        columns = [Column((Label("The paper's"),), "l"), Column((Label("This run used instead"),), "l"), Column((Label("Paper cells it has"),), "r"), Column((Label("Compared"),), "l")]
        pairs = stand_in.assign(key=stand_in["cell"].str.split("/").str[1:3].str.join("/")).groupby("key", sort=False)
        body = []
        for key, group in pairs:
            dataset, role = key.split("/")
            body.append([Label(f"{DATASET_NAMES.get(dataset, dataset)} with {PAPER_ENCODER_NAMES.get(role, role)}"), Label(f"{what.dataset(dataset)} with {what.encoder(role, [dataset])}"), Label(str(len(group))), Label("no: stand-in")])
        caption = (
            "No cell is compared: this run did not use the paper's own data and models, so its numbers say nothing about the paper's and no delta is drawn. "
            "The table lists what stood in for what. Run config/paper.yaml on the real datasets for a comparison."
            if len(stand_in)
            else "No cell is compared: this run has none of the paper's result cells."
        )
    if len(stand_in) and len(compared):
        notes.append(f"{len(stand_in)} further cells of this run are on stand-ins and are not compared")
    notes.append(f"{lacking} of the paper's {len(frame)} loss cells have no result in this run; the CSV lists every paper cell with its status (ok, stand_in, not_run)")
    notes.append("compared only where the dataset is the paper's, read from the real data, and the encoder is the paper's model (mscl.report.names)")
    return Table("paper_vs_run", columns, body, frame, notes, "This run beside the paper", caption)


# ----------------------------------------------------------------------- cost table


def cost_table(metrics: Sequence[str | Path]) -> Table:
    """Compute cost per rule x dataset x encoder from the benchmark files of the runs whose
    probe metrics.json files are `metrics` (mscl.report.cost)."""
    frame = cost_frame(metrics)
    columns = [Column((Label(t),), a) for t, a in (("Rule", "l"), ("Dataset", "l"), ("Encoder", "l"), ("Jobs", "r"), ("CPU h", "r"), ("Wall h", "r"), ("Max RSS (GB)", "r"))]
    body: list[BodyItem] = [
        [Label(row.rule), Label(row.dataset), Label(row.encoder), Label(str(row.jobs)), *(Label(_format_amount(v, 3)) for v in (row.cpu_hours, row.wall_hours)), Label(_format_amount(row.max_rss_gb, 2))]
        for row in frame.itertuples(index=False)
    ]
    note = "hours summed over jobs (a job's repeats averaged); max RSS is the largest over jobs"
    notes = [note] if len(frame) else ["no runs given", note]
    caption = "Compute cost of this run's training jobs, from Snakemake's benchmark files, per rule, dataset and encoder (the config's keys)."
    return Table("cost", columns, body, frame, notes, "Computing cost (paper appendix)", caption)


def _format_amount(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}" if math.isfinite(value) else "n/a"


# --------------------------------------------------------------------------- driver


def build_table(name: str, runs: pd.DataFrame | None, batch_size: int | None = None, metrics: Sequence[str | Path] = ()) -> Table:
    """Build table `name` (one of TABLE_NAMES) from the tidy runs; 'cost' from the runs'
    probe metrics.json files `metrics` instead."""
    if name == "cost":
        return cost_table(metrics)
    if runs is None:
        raise InputError(None, f"table {name!r} needs the run results", "pass --runs results/metrics/all_runs.csv", field="--runs")
    runs = with_later_columns(runs)
    index = cell_index(paper_runs(runs), "test", batch_size)
    what = what_ran(runs)
    builders: dict[str, Callable[[dict[CellKey, CellStat], WhatRan], Table]] = {
        "image": image_table,
        "aapd": aapd_table,
        "mimic_full": lambda i, w: mimic_table(i, w, "full"),
        "mimic_50": lambda i, w: mimic_table(i, w, "50"),
        "sota": sota_table,
        "ablation": ablation_table,
        "paper_vs_run": paper_vs_run_table,
    }
    table = builders[name](index, what)
    table.notes += what.also_ran_notes(name, paper_grid_losses() if name in GRID_TABLES else None, REFERENCE_METHODS)
    return table


# The tables that list losses as rows, each a grid of (dataset, encoder role, loss) cells.
GRID_TABLES = ("image", "aapd", "mimic_full", "mimic_50", "ablation")


@functools.cache
def paper_grid_losses() -> dict[tuple[str, str], frozenset[str]]:
    """(dataset, encoder role) -> the losses some table of GRID_TABLES lists there: a loss that ran
    there and is not among them is named under the tables as "also ran". Read from the tables
    themselves, built without results (their CSV frame keeps every loss cell of the grid)."""
    empty, nothing = {}, WhatRan()
    built = [image_table(empty, nothing), aapd_table(empty, nothing), mimic_table(empty, nothing, "full"), mimic_table(empty, nothing, "50"), ablation_table(empty, nothing)]
    losses: dict[tuple[str, str], set[str]] = {}
    for table in built:
        for row in table.records.itertuples(index=False):
            losses.setdefault((row.dataset, row.encoder_role), set()).add(row.method)
    return {pair: frozenset(methods) for pair, methods in losses.items()}


def write_table(table: Table, out_prefix: str | Path) -> None:
    """Render all four formats first, then write each atomically."""
    rendered = {".tex": to_latex(table), ".csv": to_csv(table), ".md": to_markdown(table), ".html": to_html(table)}
    prefix = Path(out_prefix)
    for suffix, text in rendered.items():
        write_text(prefix.with_name(prefix.name + suffix), text)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    args = cli.parse_args("table", argv)
    runs = load_runs(args.runs) if args.runs else None
    table = build_table(args.name, runs, args.batch_size, args.metrics)
    if runs is not None:
        table.caption = caption_text(table.caption, mixed_code_sentence(runs))
    write_table(table, args.out_prefix)
    print(f"table: wrote {args.out_prefix}.{{tex,csv,md,html}} ({args.name})")
    return 0
