"""The benchmark: every dataset x encoder x method x batch size that ran, as a table and a figure.

    python -m mscl benchmark --runs results/metrics/all_runs.csv --out-prefix results/tables/benchmark
        [--figure-prefix results/figures/benchmark] [--metric METRIC] [--split test|val]
        [--families DATASET=FAMILY...]

writes `<out-prefix>.csv`, `.md` and `.html` and, with --figure-prefix, `<figure-prefix>.pdf`,
`.png` and `.html`, each atomically and only after everything is rendered. Rows and columns come
from all_runs.csv alone, never from a list of known names: a loss, dataset or encoder that ran
is in the benchmark whether or not the paper's tables know it.

The CSV is tidy: columns dataset, encoder, method, batch_size, metric, mean, sd, n; one row per
(dataset, encoder, method, batch size, metric) of the split (`--split`, default test), every
score metric the runs have (not the bookkeeping entries: threshold, num_examples and the
`*_labels` counts), in percent. mean is over the seeds with a finite value, sd their sample
standard deviation (ddof 1; empty for n < 2), n their number. Keys as the config names them (the
label prior: encoder and method `chance`, batch size 0).

The Markdown and HTML tables show one metric per dataset, one table per dataset: a row per
method (display names, `method_display`), the reference rows (Chance, No pretraining, Supervised
BCE: `style.REFERENCE_METHODS`) below them, and a column per encoder and batch size that ran on
the dataset; Chance, which has no encoder, is shown in every column of its dataset. A cell is
"mean ± sd" with n in the caption, or in each cell when n differs. Bold marks the best of a
column among its method rows (`tables.mark_best`: the best displayed mean among the cells with
the column's largest n, when at least two have one); reference rows are never bold.

The metric a dataset shows: --metric where its runs have it, else its family's default
(DEFAULT_METRICS): mAP for images, micro-F1 for text, tabular data and MIMIC, micro-F1 for a
dataset of an unknown family. The family is --families' (the workflow passes the config's), else
`mscl.metrics.DATASET_FAMILIES`'. A dataset whose runs lack that metric shows the first of
METRIC_PREFERENCE they have. The caption says which metric each dataset shows.

The figure: a heatmap of the same cells (methods x datasets, a column per dataset, encoder and
batch size), each cell's colour its place between the lowest and highest method mean of its
column (datasets on different scales stay comparable), its value printed, the best of the column
bold and framed; reference rows grey.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from mscl import cli
from mscl.errors import InputError
from mscl.io import write_text
from mscl.metrics import DATASET_FAMILIES, FAMILY_MACRO_F1, is_score
from mscl.report import html
from mscl.report.collect import known_order_key, load_runs, method_sort_key, mixed_code_sentence, parse_pairs, with_later_columns
from mscl.report.names import DATASET_NAMES
from mscl.report.style import CHANCE, METRIC_DISPLAY_NAMES, REFERENCE_METHODS, metric_name
from mscl.report.tables import (
    Column,
    Label,
    ReferenceRule,
    Table,
    ValueCell,
    bold_note,
    html_table,
    is_result,
    mark_best,
    reference_notes,
    seeds_sentence,
    show_seed_counts,
    to_markdown,
)

CSV_COLUMNS = ("dataset", "encoder", "method", "batch_size", "metric", "mean", "sd", "n")
KEYS = ["dataset", "encoder", "method", "batch_size", "metric"]
# The metric each dataset family shows by default: mAP for images, as the paper's image table;
# micro-F1 for text, tabular data and MIMIC, the F1 the paper reports for every dataset (it
# reports mAP for images only).
DEFAULT_METRICS = {"image": "map", "text": "micro_f1", "tabular": "micro_f1", "mimic": "micro_f1"}
UNKNOWN_FAMILY_METRIC = "micro_f1"
# When a dataset lacks its default metric: the first of these it has.
METRIC_PREFERENCE = ("micro_f1", "map", "macro_f1", "micro_auc", "macro_auc")
NOT_RUN_NOTE = "not run: this method did not run with this encoder and batch size"
TITLE = "Benchmark: every run"


# ----------------------------------------------------------------------- the numbers


def dataset_sort_key(dataset: str) -> tuple[int, str]:
    """The paper's settings and the claim check's data in their order, then any other by key."""
    return known_order_key(list(DATASET_NAMES), dataset)


def metric_sort_key(metric: str) -> tuple[int, str]:
    return known_order_key(list(METRIC_DISPLAY_NAMES), metric)


def benchmark_frame(runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """The tidy benchmark (CSV_COLUMNS), percent, ordered by dataset, encoder (the config's
    order, the label prior last), method (references last), batch size and metric."""
    chosen = runs[(runs["split"] == split) & runs["metric"].map(is_score)].rename(columns={"loss": "method"})
    grouped = chosen.groupby(KEYS, sort=False)["value"]
    frame = grouped.agg(mean="mean", sd="std", n="count").reset_index()
    frame[["mean", "sd"]] = frame[["mean", "sd"]] * 100
    frame["n"] = frame["n"].astype(int)
    frame["batch_size"] = frame["batch_size"].astype(int)
    encoder_order = dict(zip(chosen["encoder"], chosen["encoder_order"]))
    sort_keys = {
        "dataset": dataset_sort_key,
        "encoder": lambda encoder: (encoder == CHANCE, encoder_order[encoder], encoder),
        "method": lambda method: (method in REFERENCE_METHODS, REFERENCE_METHODS.index(method) if method in REFERENCE_METHODS else 0, method_sort_key(method)),
        "batch_size": int,
        "metric": metric_sort_key,
    }
    ranks = pd.DataFrame({column: ranked(frame[column], key) for column, key in sort_keys.items()})
    order = ranks.sort_values(list(sort_keys), kind="stable").index
    return frame.loc[order].reset_index(drop=True)[list(CSV_COLUMNS)]


def ranked(values: pd.Series, key) -> pd.Series:
    """Each value's rank (0 first) in the order `key` gives the distinct values."""
    rank = {value: place for place, value in enumerate(sorted(values.unique(), key=key))}
    return values.map(rank)


def shown_metrics(frame: pd.DataFrame, metric: str | None, families: Mapping[str, str]) -> dict[str, str]:
    """Dataset -> the metric its table and figure column show (see the module docstring)."""
    chosen = {}
    for dataset in dict.fromkeys(frame["dataset"]):
        finite = frame[(frame["dataset"] == dataset) & (frame["n"] > 0)]
        has = set(finite["metric"])
        family = families.get(dataset, DATASET_FAMILIES.get(dataset))
        default = DEFAULT_METRICS.get(family, UNKNOWN_FAMILY_METRIC) if family else UNKNOWN_FAMILY_METRIC
        for candidate in (metric, default, *METRIC_PREFERENCE, *sorted(has, key=metric_sort_key)):
            if candidate is not None and candidate in has:
                chosen[dataset] = candidate
                break
    return chosen


# ----------------------------------------------------------------------- the tables


@dataclass(frozen=True)
class Setting:
    """A column of the benchmark: one encoder at one batch size on one dataset."""

    dataset: str
    encoder: str
    batch_size: int


@dataclass
class Section:
    """One dataset's table: its metric, its columns and the Table to render."""

    dataset: str
    metric: str
    settings: list[Setting]
    table: Table


def names_of(runs: pd.DataFrame, key: str, display: str) -> dict[str, str]:
    """key -> display name as all_runs.csv records it (the first one given)."""
    pairs = runs[[key, display]].drop_duplicates(key)
    return dict(zip(pairs[key], pairs[display]))


def build_sections(runs: pd.DataFrame, frame: pd.DataFrame, metrics: Mapping[str, str]) -> list[Section]:
    """A Table per dataset of `metrics`: method rows then reference rows, a column per encoder and
    batch size (the label prior's column-free value in each), best per column bold."""
    datasets, encoders, methods = (names_of(runs, k, d) for k, d in (("dataset", "dataset_display"), ("encoder", "encoder_display"), ("loss", "method_display")))
    stats = frame.set_index(KEYS)
    sections = []
    for dataset, metric in metrics.items():
        rows = frame[(frame["dataset"] == dataset) & (frame["metric"] == metric)]
        trained = rows[rows["encoder"] != CHANCE]
        encoders_in_order = list(dict.fromkeys(trained["encoder"]))  # the frame's order: the config's
        pairs = sorted(set(zip(trained["encoder"], trained["batch_size"])), key=lambda pair: (encoders_in_order.index(pair[0]), pair[1]))
        settings = [Setting(dataset, encoder, int(batch)) for encoder, batch in pairs]
        if not settings:  # only the label prior: no encoder ran on this dataset (it is in the CSV)
            continue
        ran = list(dict.fromkeys(rows["method"]))
        losses = [m for m in ran if m not in REFERENCE_METHODS]
        references = [m for m in REFERENCE_METHODS if m in ran]

        def cell(method: str, setting: Setting) -> ValueCell:
            key = (dataset, CHANCE, CHANCE, 0, metric) if method == CHANCE else (dataset, setting.encoder, method, setting.batch_size, metric)
            record = {"dataset": dataset, "encoder": setting.encoder, "method": method, "batch_size": setting.batch_size, "metric": metric}
            if key not in stats.index:
                return ValueCell(status="not_run", record=record)
            stat = stats.loc[key]
            return ValueCell(mean=float(stat["mean"]), std=float(stat["sd"]), seeds=int(stat["n"]), record=record)

        loss_cells = [(m, [cell(m, s) for s in settings]) for m in losses]
        reference_cells = [(m, [cell(m, s) for s in settings]) for m in references]
        for column in zip(*(cells for _, cells in loss_cells)):
            mark_best(column)
        body: list = [[Label(methods[m]), *cells] for m, cells in loss_cells]
        if loss_cells and reference_cells:
            body.append(ReferenceRule())
        body += [[Label(methods[m]), *cells] for m, cells in reference_cells]
        columns = [Column((None, Label("Method")), "l")] + [Column((Label(encoders[s.encoder]), Label(f"batch {s.batch_size}"))) for s in settings]
        title = f"{datasets[dataset]}: {metric_name(metric)} (%)"
        records = pd.DataFrame([c.record for _, cells in loss_cells + reference_cells for c in cells])
        sections.append(Section(dataset, metric, settings, Table(f"benchmark_{dataset}", columns, body, records, [], title, "")))
    return sections


def section_cells(sections: Sequence[Section]) -> list[ValueCell]:
    return [cell for section in sections for row in section.table.body if isinstance(row, list) for cell in row if isinstance(cell, ValueCell)]


def caption_and_notes(runs: pd.DataFrame, sections: Sequence[Section], split: str, metric: str | None) -> tuple[str, list[str]]:
    """The benchmark's caption (what it shows, each dataset's metric, n and ±) and its notes."""
    datasets = names_of(runs, "dataset", "dataset_display")
    cells = section_cells(sections)
    show_seed_counts(cells)
    shows = "; ".join(f"{datasets[s.dataset]}: {metric_name(s.metric)}" for s in sections)
    caption = " ".join(
        part
        for part in (
            f"Every dataset × encoder × method × batch size that ran (all_runs.csv, {split} split), one table per dataset, a column per encoder and batch size, in percent.",
            f"Metric shown per dataset: {shows}." if sections else "Nothing ran on this split.",
            seeds_sentence(cells),
            "benchmark.csv has every score metric of every cell (mean, sd, n).",
        )
        if part
    )
    notes = [bold_note(cells, "per column")] if sections else []
    lacking = [datasets[s.dataset] for s in sections if metric is not None and s.metric != metric]
    if lacking:
        notes.append(f"{', '.join(lacking)}: no {metric_name(metric)}, so the dataset's default metric is shown")
    if any(c.status == "not_run" for c in cells):
        notes.append(NOT_RUN_NOTE)
    notes += reference_notes([m for s in sections for m in s.table.records["method"].unique()] if sections else [])
    return caption, notes


def to_markdown_page(sections: Sequence[Section], caption: str, notes: Sequence[str]) -> str:
    parts = [f"**{TITLE}.** {caption}", ""]
    for section in sections:
        parts += [to_markdown(section.table)]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts).rstrip("\n") + "\n"


def to_html_page(sections: Sequence[Section], caption: str, notes: Sequence[str]) -> str:
    body = "\n".join(f"<h2>{escape(section.table.title)}</h2>\n{html_table(section.table)}" for section in sections)
    return html.page(TITLE, caption, body, notes)


# ----------------------------------------------------------------------- the figure


def benchmark_figure(runs: pd.DataFrame, sections: Sequence[Section], caption: str, notes: Sequence[str]):
    """The heatmap of the sections' cells (see the module docstring) and its plotted data."""
    from mscl.report.figures import NOT_RUN_COLOUR, describe, empty_figure, new_figure, plt, wrapped  # matplotlib: imported only for the figure
    from mscl.report.style import COLUMN_WIDTH_IN, MISSING_COLOUR

    datasets, encoders, methods = (names_of(runs, k, d) for k, d in (("dataset", "dataset_display"), ("encoder", "encoder_display"), ("loss", "method_display")))
    columns = [(section, setting) for section in sections for setting in section.settings]
    rows = list(dict.fromkeys(m for s in sections for m in s.table.records["method"] if m not in REFERENCE_METHODS))
    rows += [m for m in REFERENCE_METHODS if any((s.table.records["method"] == m).any() for s in sections)]
    by_key = {(c.record["method"], c.record["dataset"], c.record["encoder"], c.record["batch_size"]): c for c in section_cells(sections)}
    plotted = []
    for section, setting in columns:
        for method in rows:
            cell = by_key.get((method, setting.dataset, setting.encoder, setting.batch_size))
            if cell is None:  # a method that did not run on this column's dataset at all
                continue
            present = is_result(cell)
            plotted.append(
                {"dataset": setting.dataset, "encoder": setting.encoder, "batch_size": setting.batch_size, "method": method, "metric": section.metric,
                 "mean": cell.mean if present else math.nan, "sd": cell.std if present else math.nan, "n": cell.seeds if present else 0,
                 "best": cell.bold, "reference": method in REFERENCE_METHODS, "status": cell.status}
            )  # fmt: skip
    data = pd.DataFrame(plotted, columns=["dataset", "encoder", "batch_size", "method", "metric", "mean", "sd", "n", "best", "reference", "status"])
    title = "Benchmark: every method on every dataset that ran"
    figure_caption = caption.replace("one table per dataset, a column per encoder and batch size", "a column per dataset, encoder and batch size, a row per method") + (
        " Colour: the cell's place between the lowest and highest method mean of its column; bold and framed: the column's best; grey rows: references (never best)."
    )
    if not columns:
        return empty_figure(COLUMN_WIDTH_IN, "The benchmark"), describe(data, title, [figure_caption], notes)
    mixed = data.loc[(data["status"] == "ok") & (data["method"] != CHANCE), "n"].nunique() > 1
    figure, axes = new_figure(max(COLUMN_WIDTH_IN, 1.4 + 0.62 * len(columns)), 1.6 + 0.3 * len(rows))
    ax = axes[0, 0]
    cmap = plt.get_cmap("Blues")
    for j, (section, setting) in enumerate(columns):
        column = data[(data["dataset"] == setting.dataset) & (data["encoder"] == setting.encoder) & (data["batch_size"] == setting.batch_size)].set_index("method")
        ranked = column[~column["reference"] & (column["status"] == "ok")]["mean"].dropna()
        low, high = (float(ranked.min()), float(ranked.max())) if len(ranked) else (0.0, 1.0)
        for i, method in enumerate(rows):
            if method not in column.index or column.loc[method, "status"] != "ok":
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor=MISSING_COLOUR, linewidth=0.5))
                ax.text(j, i, "not run", ha="center", va="center", fontsize=5, color=NOT_RUN_COLOUR)
                continue
            entry = column.loc[method]
            reference = bool(entry["reference"])
            place = 0.5 if high == low else (float(entry["mean"]) - low) / (high - low)
            shade = 0.15 + 0.7 * min(1.0, max(0.0, place)) if math.isfinite(entry["mean"]) else 0.0
            face = "#E6E6E6" if reference else cmap(shade)
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=face, edgecolor="white", linewidth=1.5))
            if entry["best"]:
                ax.add_patch(plt.Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, edgecolor="black", linewidth=1.2))
            text = f"{entry['mean']:.1f}" if math.isfinite(entry["mean"]) else "NaN"
            if mixed and method != CHANCE:
                text += f"\nn={int(entry['n'])}"
            colour = "white" if not reference and shade > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=6, color=colour, fontweight="bold" if entry["best"] else "normal", fontstyle="italic" if reference else "normal")
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(columns)), [wrapped(f"{datasets[s.dataset]} ({metric_name(sec.metric)}), {encoders[s.encoder]}, batch {s.batch_size}", 30) for sec, s in columns], rotation=90, fontsize=6)
    ax.set_yticks(range(len(rows)), [methods[m] for m in rows], fontsize=7)
    ax.tick_params(length=0)
    ax.grid(False)
    ax.spines[:].set_visible(False)
    references = [i for i, m in enumerate(rows) if m in REFERENCE_METHODS]
    if references and references[0] > 0:
        ax.axhline(references[0] - 0.5, color="#333333", linewidth=0.8, linestyle="--")
    ax.set_title(wrapped("Each column: its dataset's metric (%); best per column bold and framed", int(figure.get_figwidth() * 11)), fontsize=7.5)
    return figure, describe(data, title, [figure_caption], notes)


# ----------------------------------------------------------------------- CLI


@dataclass
class Benchmark:
    """Everything the benchmark command writes, rendered."""

    frame: pd.DataFrame
    sections: list[Section]
    caption: str
    notes: list[str]

    def markdown(self) -> str:
        return to_markdown_page(self.sections, self.caption, self.notes)

    def html(self) -> str:
        return to_html_page(self.sections, self.caption, self.notes)

    def csv(self) -> str:
        return self.frame.to_csv(index=False, lineterminator="\n", float_format="%.17g")


def build_benchmark(runs: pd.DataFrame, split: str = "test", metric: str | None = None, families: Mapping[str, str] | None = None) -> Benchmark:
    """The benchmark of the tidy runs (see the module docstring); InputError when `metric` is
    none of the split's score metrics."""
    runs = with_later_columns(runs)
    frame = benchmark_frame(runs, split)
    if metric is not None and metric not in set(frame["metric"]):
        known = sorted(set(frame["metric"]), key=metric_sort_key)
        raise InputError(None, f"no run has the metric {metric!r} on the {split} split", f"use one of {known}" if known else "collect some runs first", field="--metric")
    sections = build_sections(runs, frame, shown_metrics(frame, metric, families or {}))
    caption, notes = caption_and_notes(runs, sections, split, metric)
    return Benchmark(frame, sections, " ".join(s for s in (caption, mixed_code_sentence(runs)) if s), notes)


def parse_families(values: Sequence[str]) -> dict[str, str]:
    """--families DATASET=FAMILY arguments -> dict, each FAMILY one of mscl.metrics' families."""
    families = parse_pairs(values, "--families", "my_csv=text")
    for dataset, family in families.items():
        if family not in FAMILY_MACRO_F1:
            raise InputError(None, f"--families {dataset}={family}: unknown family {family!r}", f"use one of {list(FAMILY_MACRO_F1)}", field="--families")
    return families


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    args = cli.parse_args("benchmark", argv)
    families = parse_families(args.families)
    runs = load_runs(args.runs)
    benchmark = build_benchmark(runs, args.split, args.metric, families)
    rendered = {".csv": benchmark.csv(), ".md": benchmark.markdown(), ".html": benchmark.html()}
    figure = None
    if args.figure_prefix is not None:
        figure, data = benchmark_figure(with_later_columns(runs), benchmark.sections, benchmark.caption, benchmark.notes)
    prefix = Path(args.out_prefix)
    for suffix, text in rendered.items():
        write_text(prefix.with_name(prefix.name + suffix), text)
    print(f"benchmark: wrote {args.out_prefix}.{{csv,md,html}} ({len(benchmark.frame)} rows)")
    if figure is not None:
        from mscl.report.figures import save_figure

        save_figure(figure, args.figure_prefix, data)
        print(f"benchmark: wrote {args.figure_prefix}.{{pdf,png,html}}")
    return 0
