"""The paper's figures, regenerated from a run's tidy results (PDF + PNG at 200 dpi + an HTML page).

`python -m mscl figure NAME --runs results/metrics/all_runs.csv --out-prefix results/figures/NAME
[--batch-size B] [--split test|val]` writes `<prefix>.pdf`, `<prefix>.png` and `<prefix>.html`
(the PNG with its title, caption and notes, for `snakemake --report`) atomically. `relations` is
drawn from the loss definitions and needs no --runs.

Every figure function takes the tidy runs (see `mscl.report.collect`) and returns
`(figure, data)`, `data` being exactly the values it plots (percent), one row per item of the
paper's grid with a `status` column: `ok`, or `not_run` where the run has no result (outside the
configuration's grid: the pipeline collects every run of its grid). `data.attrs` holds the
figure's `title`, `caption` (what it shows, what ran, how many seeds, what the error bars are)
and `notes`, and `not_run`, the items without a result, which `main` prints to the log.

What is drawn: only what ran. A dataset, encoder, panel or method without any result is left
out (the caption says so); a figure with nothing to draw is one line saying that its content is
outside this configuration's grid. Legends name only what is drawn. Titles and tick labels call
datasets and encoders by the names all_runs.csv records (`mscl.report.names`): a stand-in is
called what it is. Where several encoders ran under one role on a dataset, a figure draws the one
`collect.shown_encoders` picks (the paper's model, else the config's first) and its notes name
the others: "also ran: <encoder> (see benchmark)".

Spread: a mean over several seeds is drawn with its sample std as the error bar (the
improvement figure: the 95% t confidence interval of the paired per-seed difference, where
n >= 3); every figure says its n (tick labels, legend or caption), and single-seed points are
hollow where a figure mixes seed counts. Bars start at 0; dot and line plots whose value axis
does not start at 0 say "zoomed" in the axis label.

References: only the label prior (`python -m mscl chance`) is drawn, as a dashed "chance" line
in the batch-size figure (one per metric panel) and the frequency-bucket figure (one per bucket),
when the results have it; its rows are then in `data` too (method "chance"). The other figures
compare named losses and ignore every reference.
"""

from __future__ import annotations

import math
import sys
import textwrap
from fractions import Fraction
from io import BytesIO
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from mscl import cli
from mscl.layout import FIGURE_NAMES  # noqa: F401  (the names `figure NAME` accepts: FIGURES' keys)
from mscl.errors import InputError
from mscl.io import atomic_path, write_text
from mscl.metrics import macro_f1_definition
from mscl.report import html
from mscl.report.collect import CellKey, CellStat, cell_index, load_runs, mixed_code_sentence, paper_runs, select_batch_size, summarise_seeds, what_ran, with_later_columns
from mscl.report.names import PAPER_ENCODER_NAMES, WhatRan
from mscl.report.style import (
    CHANCE,
    COLUMN_WIDTH_IN,
    CORE_METHODS,
    ENCODER_MARKERS,
    F1_METRICS,
    FULL_WIDTH_IN,
    IMAGE_DATASETS,
    IMAGE_METRICS,
    LABEL_SPACES,
    MACRO_F1_DEFINITION_NAMES,
    MIMIC_FAMILIES,
    MIMIC_ROLES,
    MISSING_COLOUR,
    PNG_DPI,
    REFERENCE_ROLE,
    apply_style,
    method_colour,
    metric_colour,
    metric_name,
    mimic_dataset,
    precision_at_k_metric,
)

apply_style()

import matplotlib.pyplot as plt  # noqa: E402  (after apply_style selected the Agg backend)
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

# MIMIC metrics in the paper's column order; "p_at_k" is P@8 (Full) or P@5 (Top-50).
MIMIC_METRICS = ("macro_auc", "micro_auc", "macro_f1", "micro_f1", "p_at_k")
MISSING_TEXT_COLOUR = "#B00000"
NOT_RUN_COLOUR = "#777777"
CI_LEVEL = 0.95
# Fewest seeds for a confidence interval of a paired difference (below: the n is shown instead).
CI_MIN_SEEDS = 3
# Characters per line of a wrapped dataset or encoder name under a tick (7 pt).
TICK_WRAP = 14
OUTSIDE_GRID = "outside this configuration's grid"

FigureData = tuple[Figure, pd.DataFrame]


# ------------------------------------------------------------------------ helpers


def new_figure(width_in: float, height_in: float, **subplots: object) -> tuple[Figure, np.ndarray]:
    """A constrained-layout figure of exactly width x height inches and its axes as a 2-D array."""
    figure, axes = plt.subplots(figsize=(width_in, height_in), layout="constrained", squeeze=False, **subplots)
    return figure, axes


def save_figure(figure: Figure, out_prefix: str | Path, data: pd.DataFrame | None = None) -> None:
    """Write <prefix>.pdf and <prefix>.png (PNG_DPI) atomically, and <prefix>.html when `data`
    carries the figure's title and caption (data.attrs); then close the figure."""
    prefix = Path(out_prefix)
    png = BytesIO()
    figure.savefig(png, format="png", dpi=PNG_DPI)
    for suffix in (".pdf", ".png"):
        with atomic_path(prefix.with_name(prefix.name + suffix), suffix=suffix) as tmp:
            if suffix == ".png":
                tmp.write_bytes(png.getvalue())
            else:
                # No creation date: the same data give the same bytes, so a regenerated figure
                # shows up in `git status` only when it changed.
                figure.savefig(tmp, format="pdf", dpi=PNG_DPI, metadata={"CreationDate": None})
    plt.close(figure)
    if data is not None and "caption" in data.attrs:
        title = data.attrs["title"]
        write_text(prefix.with_name(prefix.name + ".html"), html.page(title, data.attrs["caption"], html.png_image(png.getvalue(), title), data.attrs.get("notes", [])))


def describe(data: pd.DataFrame, title: str, caption: Sequence[str], notes: Sequence[str] = (), not_run: Sequence[str] = ()) -> pd.DataFrame:
    """Attach the figure's title, caption (sentences, empty ones dropped), notes and not-run items to `data`."""
    data.attrs.update(title=title, caption=" ".join(s for s in caption if s), notes=list(notes), not_run=list(not_run))
    return data


def wrapped(text: str, width: int = TICK_WRAP) -> str:
    """`text` broken into lines of at most `width` characters (tick labels, titles)."""
    return "\n".join(textwrap.wrap(text, width=width, break_on_hyphens=False)) or text


def fitted_suptitle(figure: Figure, text: str, fontsize: float = 8) -> None:
    """`text` as the figure's title, wrapped to the figure's width: a one-panel figure is a
    column wide (3.4 in), too narrow for a one-line title. Width per character: 0.6 em, the
    widest average of the fonts in use (DejaVu Sans runs about 0.55)."""
    characters = int(figure.get_figwidth() * 72 / (0.6 * fontsize))  # 72 points an inch
    figure.suptitle(wrapped(text, characters), fontsize=fontsize)


def empty_figure(width_in: float, what: str) -> Figure:
    """A figure that says, in one line, that its content is outside this configuration's grid."""
    figure, axes = new_figure(width_in, 0.9)
    axes[0, 0].axis("off")
    axes[0, 0].text(0.5, 0.5, wrapped(f"{what}: {OUTSIDE_GRID}, nothing to draw.", int(width_in * 14)), ha="center", va="center", fontsize=8, color=NOT_RUN_COLOUR)
    return figure


def stat_row(stat: CellStat | None) -> dict[str, object]:
    """Plotted values of one cell in percent: mean, std, seeds, status."""
    if stat is None:
        return {"mean": math.nan, "std": math.nan, "seeds": 0, "status": "not_run"}
    return {"mean": stat.mean * 100, "std": stat.std * 100, "seeds": stat.seeds, "status": "ok"}


def error_of(row: pd.Series | dict) -> float:
    """The error bar of a plotted mean: its std when several seeds, else 0."""
    return float(row["std"]) if row["seeds"] > 1 and math.isfinite(row["std"]) else 0.0


def present(data: pd.DataFrame) -> pd.DataFrame:
    """The rows with a finite result."""
    return data[(data["status"] == "ok") & np.isfinite(data["mean"].astype(float))]


def seeds_text(counts: Sequence[int]) -> str:
    """'n = 3', or 'n = 1-3' when the counts differ."""
    values = sorted({int(n) for n in counts if n})
    if not values:
        return "n = 0"
    return f"n = {values[0]}" if len(values) == 1 else f"n = {values[0]}-{values[-1]}"


def spread_sentence(data: pd.DataFrame) -> str:
    """The caption's sentence on seeds and error bars of a figure of means."""
    seeds = sorted({int(n) for n in present(data)["seeds"]})
    if not seeds:
        return ""
    if seeds == [1]:
        return "Every point is one run (n = 1 seed): no error bar."
    counts = "/".join(map(str, seeds))
    return f"Points are means over n = {counts} seeds (n given in the figure); error bars: ± sample standard deviation over seeds where n > 1{', single-seed points hollow' if 1 in seeds else ''}."


def mark_missing(ax: plt.Axes, x: float) -> None:
    """A visible 'missing' mark at data position x, near the bottom of the axes (claim-check figure)."""
    ax.text(x, 0.03, "missing", transform=ax.get_xaxis_transform(), rotation=90, ha="center", va="bottom", fontsize=5.5, color=MISSING_TEXT_COLOUR)


def mark_not_run(ax: plt.Axes, x: float) -> None:
    """A 'not run' mark where a bar of a shown group would be (that cell is outside the grid)."""
    ax.text(x, 0.03, "not run", transform=ax.get_xaxis_transform(), rotation=90, ha="center", va="bottom", fontsize=5.5, color=NOT_RUN_COLOUR)


def grouped_bars(
    ax: plt.Axes,
    data: pd.DataFrame,
    group_column: str,
    groups: Sequence[str],
    series_column: str,
    series: Sequence[str],
    colour: Callable[[str], str],
    value_column: str = "mean",
    error_column: str | None = "std",
    value_labels: bool = False,
) -> None:
    """Bars of `value_column` from 0, one cluster per group, one bar per series; a series a shown
    group lacks is marked "not run"; `value_labels` prints each value on its bar."""
    width = 0.8 / len(series)
    for j, name in enumerate(series):
        for i, group in enumerate(groups):
            x = i - 0.4 + width * (j + 0.5)
            rows = data[(data[group_column] == group) & (data[series_column] == name)]
            if rows.empty or rows.iloc[0]["status"] != "ok" or not math.isfinite(rows.iloc[0][value_column]):
                mark_not_run(ax, x)
                continue
            row = rows.iloc[0]
            error = row[error_column] if error_column and row["seeds"] > 1 and math.isfinite(row[error_column]) else None
            ax.bar(x, row[value_column], width * 0.92, color=colour(name), yerr=error, capsize=1.5, error_kw={"linewidth": 0.7})
            if value_labels:
                ax.text(x, row[value_column] * 0.97, f"{row[value_column]:.1f}", rotation=90, ha="center", va="top", fontsize=5, color="white")
    ax.set_xticks(range(len(groups)))
    ax.set_xlim(-0.5, len(groups) - 0.5)


def zoomed_limits(values: pd.Series, margin: float = 3.0) -> tuple[float, float]:
    """An axis range from just below the lowest to just above the highest finite value (0-100)."""
    finite = values[np.isfinite(values.astype(float))]
    low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 100.0)
    return max(0.0, low - margin), min(100.5, high + margin)


def zoom_label(label: str, low: float) -> str:
    """An axis label that says when the axis does not start at 0."""
    return f"{label}\nzoomed: axis from {low:.0f}" if low > 0 else label


def method_legend_handles(what: WhatRan, methods: Sequence[str], seeds: dict[str, str] | None = None) -> list[Patch]:
    """Legend patches of `methods`, each label followed by its n when `seeds` gives one."""
    return [Patch(facecolor=method_colour(m), label=f"{what.method(m)} ({seeds[m]})" if seeds and m in seeds else what.method(m)) for m in methods]


def chance_handle(what: WhatRan) -> Line2D:
    """The legend entry of the dashed label-prior line."""
    return Line2D([], [], color=method_colour(CHANCE), linestyle="--", linewidth=0.8, label=what.method(CHANCE))


def method_cells(index: dict[CellKey, CellStat], dataset: str, role: str, methods: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """One plotted row per (method, metric) of a dataset and encoder."""
    rows = [
        {"dataset": dataset, "encoder_role": role, "method": method, "metric": metric, **stat_row(index.get((dataset, role, method, metric)))}
        for method in methods
        for metric in metrics
    ]
    return pd.DataFrame(rows)


def ran_clause(what: WhatRan, role: str, datasets: Sequence[str]) -> str:
    """'Ran: ENCODER on DATASET, DATASET.' for a figure's caption."""
    return f"Ran: {what.encoder(role, datasets)} on {', '.join(what.dataset(d) for d in datasets)}." if datasets else ""


def left_out_sentence(items: Sequence[str]) -> str:
    return f"Left out, {OUTSIDE_GRID}: {', '.join(items)}." if items else ""


def dataset_item(what: WhatRan, dataset: str) -> str:
    """A dataset as a left-out item: its name if it ran, else the paper's name, said to be the paper's."""
    return what.dataset(dataset) if what.ran(dataset) else f"the paper's {what.dataset(dataset)}"


def encoder_item(role: str) -> str:
    """An encoder role that did not run, as a left-out item."""
    return f"the paper's {PAPER_ENCODER_NAMES.get(role, role)}"


def paired_gain(ours: pd.Series, base: pd.Series) -> dict[str, float]:
    """Mean relative (%) and absolute (points) paired difference of two per-seed series (fractions,
    indexed by seed) over the seeds both have, with 95% t intervals when n >= CI_MIN_SEEDS."""
    both = pd.concat([ours, base], axis=1, keys=["ours", "base"]).dropna()
    both = both[both["base"] > 0]
    n = len(both)
    result = {"seeds": n, "simdissim": math.nan, "mulsupcon": math.nan, "mean": math.nan, "ci_low": math.nan, "ci_high": math.nan, "delta": math.nan, "delta_ci_low": math.nan, "delta_ci_high": math.nan}
    if n == 0:
        return result
    relative = (both["ours"] - both["base"]) / both["base"] * 100
    absolute = (both["ours"] - both["base"]) * 100
    result.update(simdissim=both["ours"].mean() * 100, mulsupcon=both["base"].mean() * 100, mean=relative.mean(), delta=absolute.mean())
    if n >= CI_MIN_SEEDS:
        for key, values in (("", relative), ("delta_", absolute)):
            low, high = scipy_stats.t.interval(CI_LEVEL, n - 1, loc=values.mean(), scale=values.std(ddof=1) / math.sqrt(n))
            result[f"{key}ci_low"], result[f"{key}ci_high"] = float(low), float(high)
    return result


# ----------------------------------------------------------------------- figures


def improvement_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Sim-Dissim's gain over MulSupCon in micro-/macro-F1 per image dataset, relative (%) as the paper's
    text ("macro-F1 increases by 5.7% on MS-COCO"), paired by seed: the mean over seeds of
    (ours_s - base_s) / base_s, with its 95% t interval where n >= 3; the absolute paired gain
    (points, `delta`) and its interval are in the data too."""
    what = what_ran(runs)
    chosen = select_batch_size(runs[(runs["split"] == split) & (runs["encoder_role"] == "resnet")], batch_size)
    rows = []
    for dataset in IMAGE_DATASETS:
        for metric in F1_METRICS:
            cells = chosen[(chosen["dataset"] == dataset) & (chosen["metric"] == metric)]
            ours, base = (cells[cells["loss"] == loss].set_index("seed")["value"] for loss in ("simdissim", "mulsupcon"))
            gain = paired_gain(ours, base)
            rows.append({"dataset": dataset, "metric": metric, **gain, "status": "ok" if gain["seeds"] else "not_run"})
    data = pd.DataFrame(rows)
    shown = [d for d in IMAGE_DATASETS if (data.loc[data["dataset"] == d, "status"] == "ok").any()]
    not_run = [f"{what.dataset(r.dataset)} {metric_name(r.metric)}" for r in data.itertuples() if r.status != "ok"]
    caption = [
        "Gain of Sim-Dissim over MulSupCon in test micro- and macro-F1 on each image dataset, relative to MulSupCon, as the paper's Figure improve (a):"
        " for each seed s, (Sim-Dissim_s − MulSupCon_s) / MulSupCon_s × 100, paired by seed (same split, batch size and seed), averaged over the n seeds both losses have (n under each dataset).",
        f"Error bars: {CI_LEVEL:.0%} Student-t confidence interval of that mean where n ≥ {CI_MIN_SEEDS}; none where n < {CI_MIN_SEEDS}. The absolute gain in points is in the data (column delta).",
        ran_clause(what, "resnet", shown),
        left_out_sentence([dataset_item(what, d) for d in IMAGE_DATASETS if d not in shown]),
    ]
    title = "Sim-Dissim vs MulSupCon, paired by seed (paper Figure improve a)"
    if not shown:
        return empty_figure(COLUMN_WIDTH_IN, "Sim-Dissim and MulSupCon on the image datasets"), describe(data, title, caption, not_run=not_run)
    figure, axes = new_figure(COLUMN_WIDTH_IN, 2.9)
    ax = axes[0, 0]
    for i, dataset in enumerate(shown):
        for j, metric in enumerate(F1_METRICS):
            row = data[(data["dataset"] == dataset) & (data["metric"] == metric)].iloc[0]
            x = i - 0.2 + 0.4 * j
            if row["status"] != "ok":
                mark_not_run(ax, x)
                continue
            interval = math.isfinite(row["ci_low"])
            error = [[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]] if interval else None
            ax.bar(x, row["mean"], 0.36, color=metric_colour(metric), yerr=error, capsize=1.5, error_kw={"linewidth": 0.7})
            # Label beyond the error bar's end, on the side the bar points to.
            end = (row["ci_high"] if row["mean"] >= 0 else row["ci_low"]) if interval else row["mean"]
            ax.annotate(f"{row['mean']:+.1f}%", (x, end), xytext=(0, 2 if row["mean"] >= 0 else -8), textcoords="offset points", ha="center", fontsize=6)
    ticks = [f"{wrapped(what.dataset(d))}\n{seeds_text(data.loc[data['dataset'] == d, 'seeds'])}" for d in shown]
    ax.set_xticks(range(len(shown)), ticks, fontsize=6.5)
    ax.set_xlim(-0.5, len(shown) - 0.5)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel("Paired gain over MulSupCon (%)")
    ax.set_title(wrapped(f"{what.encoder('resnet', shown)}: Sim-Dissim vs MulSupCon", 48))
    ax.margins(y=0.15)
    metrics = [m for m in F1_METRICS if ((data["metric"] == m) & (data["status"] == "ok")).any()]
    figure.legend(handles=[Patch(facecolor=metric_colour(m), label=metric_name(m)) for m in metrics], loc="outside lower center", ncols=len(metrics))
    return figure, describe(data, title, caption, not_run=not_run)


def std_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Standard deviation across ALL, ANY, MulSupCon and Sim-Dissim per image dataset and metric
    (sample std, ddof 1, of the methods' mean values: the paper's 0.58/0.64/0.27 on PASCAL)."""
    what = what_ran(runs)
    index = cell_index(runs, split, batch_size)
    rows = []
    for dataset in IMAGE_DATASETS:
        for metric in IMAGE_METRICS:
            stats = [index[key] for key in ((dataset, "resnet", m, metric) for m in CORE_METHODS) if key in index and math.isfinite(index[key].mean)]
            values = [stat.mean * 100 for stat in stats]
            enough = len(values) >= 2
            rows.append(
                {"dataset": dataset, "metric": metric, "mean": float(np.std(values, ddof=1)) if enough else math.nan, "methods": len(values), "std": math.nan, "seeds": 1,
                 "method_seeds": seeds_text([stat.seeds for stat in stats]), "status": "ok" if enough else "not_run"}
            )  # fmt: skip
    data = pd.DataFrame(rows)
    shown = [d for d in IMAGE_DATASETS if (data.loc[data["dataset"] == d, "status"] == "ok").any()]
    partial = [f"{what.dataset(r.dataset)} {metric_name(r.metric)} ({r.methods}/{len(CORE_METHODS)} methods)" for r in data.itertuples() if 2 <= r.methods < len(CORE_METHODS)]
    caption = [
        "Sample standard deviation (ddof 1, in points) across the test means of ALL, ANY, MulSupCon and Sim-Dissim, per image dataset and metric, as the paper's Figure improve (b): how far the choice of loss moves the result.",
        "Each method's value is the mean over its n seeds (n under each dataset); the bar is one number, so it has no error bar.",
        ran_clause(what, "resnet", shown),
        f"Fewer than four methods: {', '.join(partial)}." if partial else "",
        left_out_sentence([dataset_item(what, d) for d in IMAGE_DATASETS if d not in shown]),
    ]
    title = "Spread across the four main losses (paper Figure improve b)"
    not_run = [f"{what.dataset(r.dataset)} {metric_name(r.metric)} ({r.methods} methods)" for r in data.itertuples() if r.status != "ok"]
    if not shown:
        return empty_figure(COLUMN_WIDTH_IN, "The four main losses on the image datasets"), describe(data, title, caption, not_run=not_run)
    figure, axes = new_figure(COLUMN_WIDTH_IN, 2.9)
    ax = axes[0, 0]
    grouped_bars(ax, data, "dataset", shown, "metric", IMAGE_METRICS, metric_colour, error_column=None)
    ticks = [f"{wrapped(what.dataset(d))}\n{data.loc[data['dataset'] == d, 'method_seeds'].iloc[0]}" for d in shown]
    ax.set_xticklabels(ticks, fontsize=6.5)
    ax.set_ylabel("Std across methods (points)")
    ax.set_ylim(bottom=0)
    ax.margins(y=0.1)
    ax.set_title(wrapped(f"{what.encoder('resnet', shown)}: std across the four losses", 48))
    figure.legend(handles=[Patch(facecolor=metric_colour(m), label=metric_name(m)) for m in IMAGE_METRICS], loc="outside lower center", ncols=len(IMAGE_METRICS))
    return figure, describe(data, title, caption, not_run=not_run)


def text_encoders_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """AAPD: RoBERTa vs Llama, micro- and macro-F1 per method; bars from 0 with their values."""
    what = what_ran(runs)
    index = cell_index(runs, split, batch_size)
    data = pd.concat([method_cells(index, "aapd", role, CORE_METHODS, F1_METRICS) for role in ("roberta", "llama")], ignore_index=True)
    drawn = present(data)
    roles = [r for r in ("roberta", "llama") if (drawn["encoder_role"] == r).any()]
    methods = [m for m in CORE_METHODS if (drawn["method"] == m).any()]
    not_run = [f"{what.encoder(r.encoder_role, ['aapd'])} {what.method(r.method)} {metric_name(r.metric)}" for r in data.itertuples() if r.status != "ok"]
    caption = [
        f"Test micro- and macro-F1 (%) on {what.dataset('aapd')} of a linear probe on each text encoder after each contrastive loss, as the paper's Figure text; bars start at 0 and carry their values.",
        spread_sentence(data),
        "; ".join(f"{what.encoder(r, ['aapd'])}: {seeds_text(drawn.loc[drawn['encoder_role'] == r, 'seeds'])}" for r in roles) + "." if roles else "",
        left_out_sentence([encoder_item(r) for r in ("roberta", "llama") if r not in roles]),
    ]
    title = f"Text encoders on {what.dataset('aapd')} (paper Figure text)"
    if not roles:
        return empty_figure(COLUMN_WIDTH_IN * 1.5, "The text encoders on AAPD"), describe(data, title, caption, not_run=not_run)
    figure, axes = new_figure(COLUMN_WIDTH_IN * 1.5, 2.9, ncols=2)
    for ax, metric in zip(axes[0], F1_METRICS):
        panel = data[data["metric"] == metric]
        grouped_bars(ax, panel, "encoder_role", roles, "method", methods, method_colour, value_labels=True)
        ax.set_xticklabels([f"{wrapped(what.encoder(r, ['aapd']), 22)}\n{seeds_text(drawn.loc[drawn['encoder_role'] == r, 'seeds'])}" for r in roles], fontsize=6)
        ax.set_title(wrapped(f"{what.dataset('aapd')} {metric_name(metric)}", 34))
        ax.set_ylabel(f"{metric_name(metric)} (%)")
        ax.set_ylim(0, min(100.0, max(10.0, float(present(panel)["mean"].max()) * 1.08)) if len(present(panel)) else 100.0)
    figure.legend(handles=method_legend_handles(what, methods), loc="outside lower center", ncols=len(methods))
    return figure, describe(data, title, caption, not_run=not_run)


def mimic_cells(index: dict[CellKey, CellStat]) -> pd.DataFrame:
    """Every MIMIC (family, label space, encoder, method, metric) cell; metric 'p_at_k' is P@8/P@5."""
    rows = []
    for family in MIMIC_FAMILIES:
        for space in LABEL_SPACES:
            dataset = mimic_dataset(family, space)
            for role in MIMIC_ROLES:
                for method in CORE_METHODS:
                    for metric in MIMIC_METRICS:
                        key = precision_at_k_metric(space) if metric == "p_at_k" else metric
                        rows.append(
                            {"family": family, "label_space": space, "dataset": dataset, "encoder_role": role, "method": method, "metric": metric, "metric_key": key, **stat_row(index.get((dataset, role, method, key)))}
                        )
    return pd.DataFrame(rows)


def mimic_metric_label(metric: str, label_space: str) -> str:
    return metric_name(precision_at_k_metric(label_space) if metric == "p_at_k" else metric)


def mimic_settings(data: pd.DataFrame) -> list[str]:
    """The MIMIC dataset settings (paper order) with at least one result."""
    drawn = present(data)
    return [d for d in dict.fromkeys(data["dataset"]) if (drawn["dataset"] == d).any()]


def panel_grid(count: int, ncols: int) -> tuple[int, int]:
    """(rows, columns) of a grid of `count` panels at most `ncols` wide."""
    columns = max(1, min(ncols, count))
    return math.ceil(count / columns), columns


def mimic_dotplot_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Small multiples, one panel per MIMIC setting that ran (the paper's 3 x 2: MIMIC-III,
    MIMIC-IV-ICD9, MIMIC-IV-ICD10 x Full, Top-50): metrics on the y axis, one dot per method
    (colour) and encoder (marker)."""
    what = what_ran(runs)
    data = mimic_cells(cell_index(runs, split, batch_size))
    settings = mimic_settings(data)
    drawn = present(data)
    roles = [r for r in MIMIC_ROLES if (drawn["encoder_role"] == r).any()]
    methods = [m for m in CORE_METHODS if (drawn["method"] == m).any()]
    mixed = drawn["seeds"].nunique() > 1
    caption = [
        "Test scores (%) of every encoder (marker) and contrastive loss (colour) on each MIMIC setting that ran, as the paper's Figure mimic-dotplot (Ours = Sim-Dissim); P@8 for Full, P@5 for Top-50.",
        spread_sentence(data),
        "; ".join(f"{what.encoder(r, settings)} on {', '.join(what.dataset(d) for d in settings if what.ran(d, r))}" for r in roles).join(("Ran: ", ".")) if roles else "",
        left_out_sentence([dataset_item(what, d) for d in dict.fromkeys(data["dataset"]) if d not in settings] + [encoder_item(r) for r in MIMIC_ROLES if r not in roles]),
        "Each panel's score axis is zoomed to its values (it says from where).",
    ]
    title = "MIMIC results per setting (paper Figure mimic-dotplot)"
    not_run = [f"{r.dataset} {r.encoder_role} {r.method} {r.metric_key}" for r in data.itertuples() if r.status != "ok" and r.dataset in settings and r.encoder_role in roles]
    if not settings:
        return empty_figure(FULL_WIDTH_IN, "The MIMIC settings"), describe(data, title, caption, not_run=not_run)
    nrows, ncols = panel_grid(len(settings), 2)
    figure, axes = new_figure(FULL_WIDTH_IN, 0.8 + 2.1 * nrows, nrows=nrows, ncols=ncols)
    # Within a metric's row the encoders get their own lanes, and methods a small extra shift,
    # so that equal scores do not hide each other.
    offsets = {role: (k - (len(roles) - 1) / 2) * 0.27 for k, role in enumerate(roles)}
    method_shift = {m: (k - 1.5) * 0.05 for k, m in enumerate(CORE_METHODS)}
    for ax in axes.flat[len(settings) :]:
        ax.axis("off")
    for ax, dataset in zip(axes.flat, settings):
        panel = data[data["dataset"] == dataset]
        space = panel["label_space"].iloc[0]
        for row in present(panel).itertuples():
            y = MIMIC_METRICS.index(row.metric) + offsets[row.encoder_role] + method_shift[row.method]
            error = error_of(row._asdict()) or None
            face = "white" if mixed and row.seeds == 1 else method_colour(row.method)
            ax.errorbar(row.mean, y, xerr=error, fmt=ENCODER_MARKERS[row.encoder_role], color=method_colour(row.method), markerfacecolor=face, markersize=3.5, markeredgewidth=0.6, elinewidth=0.7, capsize=1)
        ax.set_yticks(range(len(MIMIC_METRICS)), [mimic_metric_label(m, space) for m in MIMIC_METRICS])
        ax.set_ylim(len(MIMIC_METRICS) - 0.5, -0.5)
        low, high = zoomed_limits(panel["mean"])
        ax.set_xlim(low, high)
        ax.set_title(wrapped(f"{what.dataset(dataset)} ({seeds_text(present(panel)['seeds'])})", 50))
        ax.set_xlabel(zoom_label("Score (%)", low))
    encoder_handles = [Line2D([], [], linestyle="", marker=ENCODER_MARKERS[role], color="#444444", label=wrapped(what.encoder(role, settings), 30)) for role in roles]
    handles = method_legend_handles(what, methods) + encoder_handles
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    return figure, describe(data, title, caption, not_run=not_run)


def heatstrip_deltas(cells: pd.DataFrame) -> pd.DataFrame:
    """Delta = Ours - max(ALL, ANY, MulSupCon) per (family, label space, encoder, metric), in points.

    The max is over the baselines present; not_run if Ours or every baseline has no result.
    """
    rows = []
    keys = ["family", "label_space", "dataset", "encoder_role", "metric"]
    for key, group in cells.groupby(keys, sort=False):
        found = present(group).set_index("method")
        baselines = found["mean"].drop("simdissim", errors="ignore")
        row = dict(zip(keys, key)) | {"ours": math.nan, "best_baseline": math.nan, "best_baseline_method": "", "baselines": len(baselines), "delta": math.nan, "seeds": 0, "status": "not_run"}
        if "simdissim" in found.index and len(baselines):
            seeds = int(min(found["seeds"]))
            row.update(ours=found.loc["simdissim", "mean"], best_baseline=baselines.max(), best_baseline_method=baselines.idxmax(), delta=found.loc["simdissim", "mean"] - baselines.max(), seeds=seeds, status="ok")
        rows.append(row)
    return pd.DataFrame(rows)


def zero_centred_norm(deltas: pd.Series) -> TwoSlopeNorm:
    """A colour norm centred at 0 whose two halves each span the observed range on their side."""
    finite = deltas[np.isfinite(deltas)]
    if finite.empty:
        return TwoSlopeNorm(vcenter=0.0, vmin=-1.0, vmax=1.0)
    low, high = min(float(finite.min()), 0.0), max(float(finite.max()), 0.0)
    # TwoSlopeNorm needs vmin < 0 < vmax; an all-positive strip still gets a (small) cool half.
    extent = max(abs(low), abs(high), 0.01)
    return TwoSlopeNorm(vcenter=0.0, vmin=min(low, -0.1 * extent), vmax=max(high, 0.1 * extent))


def mimic_heatstrip_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Gain heatstrips: Ours - best baseline per encoder (rows) x metric (columns), one strip per
    MIMIC setting that ran, diverging colours centred at 0, every cell annotated."""
    what = what_ran(runs)
    data = heatstrip_deltas(mimic_cells(cell_index(runs, split, batch_size)))
    settings = [d for d in dict.fromkeys(data["dataset"]) if (data.loc[data["dataset"] == d, "status"] == "ok").any()]
    roles = [r for r in MIMIC_ROLES if (data.loc[data["dataset"].isin(settings) & (data["encoder_role"] == r), "status"] == "ok").any()]
    shown = data[data["dataset"].isin(settings) & data["encoder_role"].isin(roles)]
    few = shown[(shown["status"] == "ok") & (shown["baselines"] < 3)]
    caption = [
        "Δ = Ours (Sim-Dissim) − the best of ALL, ANY and MulSupCon, in test points, per encoder (rows) and metric (columns) of each MIMIC setting that ran, as the paper's Figure mimic-heatmap; warm = Ours better, colours centred at 0.",
        f"Each term is a mean over its seeds ({seeds_text(shown.loc[shown['status'] == 'ok', 'seeds'])}); the cell is a difference of means, without an interval.",
        f"{len(few)} cells take the best of fewer than three baselines (those that ran)." if len(few) else "",
        "; ".join(f"{what.encoder(r, settings)} on {', '.join(what.dataset(d) for d in settings if what.ran(d, r))}" for r in roles).join(("Ran: ", ".")) if roles else "",
        left_out_sentence([dataset_item(what, d) for d in dict.fromkeys(data["dataset"]) if d not in settings] + [encoder_item(r) for r in MIMIC_ROLES if r not in roles]),
    ]
    title = "Gain of Ours over the best baseline on MIMIC (paper Figure mimic-heatmap)"
    not_run = [f"{r.dataset} {r.encoder_role} {r.metric}" for r in shown.itertuples() if r.status != "ok"]
    if not settings:
        return empty_figure(FULL_WIDTH_IN, "Ours and the baselines on the MIMIC settings"), describe(data, title, caption, not_run=not_run)
    norm = zero_centred_norm(shown["delta"])
    cmap = plt.get_cmap("RdBu_r")
    nrows, ncols = panel_grid(len(settings), 3)
    figure, axes = new_figure(FULL_WIDTH_IN, 0.3 + (0.3 * len(roles) + 1.0) * nrows, nrows=nrows, ncols=ncols)
    for ax in axes.flat[len(settings) :]:
        ax.axis("off")
    for number, (ax, dataset) in enumerate(zip(axes.flat, settings)):
        strip = data[data["dataset"] == dataset]
        space = strip["label_space"].iloc[0]
        grid = strip.pivot(index="encoder_role", columns="metric", values="delta").reindex(index=roles, columns=list(MIMIC_METRICS))
        ax.imshow(np.ma.masked_invalid(grid.to_numpy(dtype=float)), cmap=cmap, norm=norm, aspect="auto")
        for i, role in enumerate(roles):
            for j, metric in enumerate(MIMIC_METRICS):
                value = grid.loc[role, metric]
                if math.isfinite(value):
                    ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=6, color="white" if abs(norm(value) - 0.5) > 0.35 else "black")
                else:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=MISSING_COLOUR, edgecolor="white"))
                    ax.text(j, i, "not run", ha="center", va="center", fontsize=5, color=NOT_RUN_COLOUR)
        ax.set_xticks(range(len(MIMIC_METRICS)), [mimic_metric_label(m, space) for m in MIMIC_METRICS], rotation=30, ha="right")
        ax.set_yticks(range(len(roles)), [wrapped(what.encoder(role, [dataset]), 26) for role in roles] if number % ncols == 0 else [])
        ax.tick_params(length=0)
        ax.grid(False)
        ax.spines[:].set_visible(False)
        ax.set_title(wrapped(what.dataset(dataset), 40))
    colourbar = figure.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8, pad=0.02)
    colourbar.set_label("Δ = Ours − max(ALL, ANY,\nMulSupCon) (points)", fontsize=7)
    return figure, describe(data, title, caption, not_run=not_run)


def frequency_buckets_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """MS-COCO head/tail-bucket macro-F1 per method (buckets from training label counts, head = 60%).

    The buckets extend the image table, so they use its macro-F1 definition, MS-COCO's
    (`mscl.metrics.macro_f1_definition`, which `collect` passes to `bucket_macro_f1`); `data`
    names it in `macro_f1_definition` and the y label spells it out.
    """
    what = what_ran(runs)
    index = cell_index(runs, split, batch_size)
    definition = macro_f1_definition("coco")
    rows = []
    for method in CORE_METHODS:
        for bucket in ("head", "tail"):
            classes = index.get(("coco", "resnet", method, f"bucket_{bucket}_labels"))
            stat = index.get(("coco", "resnet", method, f"bucket_{bucket}_macro_f1"))
            rows.append({"method": method, "bucket": bucket, "classes": int(classes.mean) if classes else 0, **stat_row(stat)})
    chance = {bucket: index.get(("coco", REFERENCE_ROLE, CHANCE, f"bucket_{bucket}_macro_f1")) for bucket in ("head", "tail")}
    chance = {bucket: stat for bucket, stat in chance.items() if stat is not None and math.isfinite(stat.mean)}
    for bucket, stat in chance.items():
        classes = index.get(("coco", REFERENCE_ROLE, CHANCE, f"bucket_{bucket}_labels"))
        rows.append({"method": CHANCE, "bucket": bucket, "classes": int(classes.mean) if classes else 0, **stat_row(stat)})
    data = pd.DataFrame(rows).assign(macro_f1_definition=definition)
    drawn = present(data[data["method"] != CHANCE])
    methods = [m for m in CORE_METHODS if (drawn["method"] == m).any()]
    sizes = {b: int(data.loc[data["bucket"] == b, "classes"].max()) for b in ("head", "tail")}
    dataset = what.dataset("coco")
    caption = [
        f"Test macro-F1 (%; {MACRO_F1_DEFINITION_NAMES[definition]}) on the head and tail classes of {dataset}, as the paper's Figure frequency-bucket:"
        " the head is the smallest set of most frequent classes that holds 60% of the training label instances, the tail the rest.",
        spread_sentence(data[data["method"] != CHANCE]),
        "Dashed: the label prior (Chance)." if chance else "",
        ran_clause(what, "resnet", ["coco"] if methods else []),
        left_out_sentence([what.method(m) for m in CORE_METHODS if m not in methods]) if methods else "",
    ]
    title = f"Head and tail classes of {dataset} (paper Figure frequency-bucket)"
    not_run = [f"{what.method(r.method)} {r.bucket}" for r in data.itertuples() if r.status != "ok"]
    if not methods:
        return empty_figure(COLUMN_WIDTH_IN, "The losses' head/tail buckets on MS-COCO"), describe(data, title, caption, not_run=not_run)
    figure, axes = new_figure(COLUMN_WIDTH_IN, 3.0)
    ax = axes[0, 0]
    grouped_bars(ax, data, "bucket", ("head", "tail"), "method", methods, method_colour)
    for i, bucket in enumerate(("head", "tail")):
        if bucket in chance:
            ax.hlines(chance[bucket].mean * 100, i - 0.45, i + 0.45, colors=method_colour(CHANCE), linestyles="--", linewidth=0.8)
    ax.set_xticklabels([f"{b.capitalize()} ({sizes[b]} classes)" if sizes[b] else f"{b.capitalize()} (size unknown)" for b in ("head", "tail")])
    ax.set_ylabel(f"Macro-F1 (%)\n{MACRO_F1_DEFINITION_NAMES[definition]}")
    buckets = "head: the classes with 60% of train instances" if sizes["head"] else "bucket sizes unknown"
    encoder = what.encoder("resnet", ["coco"])
    ax.set_title(f"{wrapped(f'{dataset}; {encoder}', 52)}\n{buckets}", fontsize=7.5)
    ax.set_ylim(0, min(100.0, max(10.0, float(present(data)["mean"].max()) * 1.12)))
    seeds = {m: seeds_text(drawn.loc[drawn["method"] == m, "seeds"]) for m in methods}
    handles = method_legend_handles(what, methods, seeds) + ([chance_handle(what)] if chance else [])
    figure.legend(handles=handles, loc="outside lower center", ncols=2 if len(handles) > 2 else len(handles))
    return figure, describe(data, title, caption, not_run=not_run)


def batch_size_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "val") -> FigureData:
    """MS-COCO micro-F1 / macro-F1 / mAP against the batch sizes the run has, a line per method.

    The paper measures this on the validation set, hence split 'val' by default. `batch_size`
    is ignored: every batch size is plotted.
    """
    del batch_size  # every batch size is on the x axis
    what = what_ran(runs)
    chosen = runs[(runs["split"] == split) & (runs["dataset"] == "coco") & (runs["encoder_role"] == "resnet")]
    summary = summarise_seeds(chosen)
    sizes = sorted({int(b) for b in summary["batch_size"]}) or [32, 64, 128, 256]
    rows = []
    for size in sizes:
        for method in CORE_METHODS:
            for metric in IMAGE_METRICS:
                match = summary[(summary["batch_size"] == size) & (summary["loss"] == method) & (summary["metric"] == metric)]
                stat = CellStat(float(match.iloc[0]["mean"]), float(match.iloc[0]["std"]), int(match.iloc[0]["seeds"])) if len(match) else None
                rows.append({"batch_size": size, "method": method, "metric": metric, **stat_row(stat)})
    # The label prior has no batch size (bs0): one dashed line per metric, at every batch size.
    reference = summarise_seeds(runs[(runs["split"] == split) & (runs["dataset"] == "coco") & (runs["encoder_role"] == REFERENCE_ROLE) & (runs["loss"] == CHANCE)])
    chance = {row.metric: CellStat(float(row.mean), float(row.std), int(row.seeds)) for row in reference.itertuples(index=False) if row.metric in IMAGE_METRICS and math.isfinite(row.mean)}
    rows += [{"batch_size": 0, "method": CHANCE, "metric": metric, **stat_row(stat)} for metric, stat in chance.items()]
    data = pd.DataFrame(rows)
    drawn = present(data[data["method"] != CHANCE])
    metrics = [m for m in IMAGE_METRICS if (drawn["metric"] == m).any()]
    methods = [m for m in CORE_METHODS if (drawn["method"] == m).any()]
    mixed = drawn["seeds"].nunique() > 1
    dataset = what.dataset("coco")
    points = "; ".join(f"{what.method(m)}: " + ", ".join(f"bs{int(r.batch_size)} n = {int(r.seeds)}" for r in drawn[(drawn["method"] == m) & (drawn["metric"] == metrics[0])].itertuples()) for m in methods) if metrics else ""
    caption = [
        f"Validation micro-F1, macro-F1 and mAP (%) on {dataset} against the pretraining batch size, one line per loss, as the paper's Figure batch (which uses the validation set).",
        spread_sentence(data[data["method"] != CHANCE]),
        f"Seeds per point: {points}." if points else "",
        "Dashed: the label prior (Chance)." if chance else "",
        ran_clause(what, "resnet", ["coco"] if methods else []),
        "A panel's y axis that does not start at 0 says so.",
    ]
    title = f"Batch size on {dataset} (paper Figure batch)"
    not_run = [f"{what.method(r.method)} bs{r.batch_size} {metric_name(r.metric)}" for r in data.itertuples() if r.status != "ok"]
    if not metrics:
        return empty_figure(FULL_WIDTH_IN, "The batch-size sweep on MS-COCO"), describe(data, title, caption, not_run=not_run)
    figure, axes = new_figure(FULL_WIDTH_IN, 2.7, ncols=len(metrics))
    for ax, metric in zip(axes[0], metrics):
        for method in methods:
            line = drawn[(drawn["metric"] == metric) & (drawn["method"] == method)].sort_values("batch_size")
            ax.plot(line["batch_size"], line["mean"], linewidth=1.2, color=method_colour(method))
            for row in line.itertuples():
                face = "white" if mixed and row.seeds == 1 else method_colour(method)
                ax.errorbar(row.batch_size, row.mean, yerr=error_of(row._asdict()) or None, marker="o", markersize=3.5, markerfacecolor=face, capsize=1.5, color=method_colour(method), linewidth=0.8)
        if metric in chance:
            ax.axhline(chance[metric].mean * 100, color=method_colour(CHANCE), linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)  # half a doubling of room on each side
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("Batch size")
        values = drawn.loc[drawn["metric"] == metric, "mean"]
        values = pd.concat([values + drawn.loc[drawn["metric"] == metric, "std"].fillna(0), values - drawn.loc[drawn["metric"] == metric, "std"].fillna(0)])
        low, high = zoomed_limits(pd.concat([values, pd.Series([chance[metric].mean * 100] if metric in chance else [], dtype=float)]), margin=1.5)
        ax.set_ylim(low, high)
        ax.set_ylabel(zoom_label(f"{metric_name(metric)} (%)", low))
        ax.set_title(metric_name(metric))
    handles = method_legend_handles(what, methods) + ([chance_handle(what)] if chance else [])
    if mixed:
        handles.append(Line2D([], [], linestyle="", marker="o", markerfacecolor="white", color="#444444", label="hollow: one seed (n = 1)"))
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    fitted_suptitle(figure, f"{dataset}, {what.encoder('resnet', ['coco'])}, {split} split", fontsize=8.5)
    return figure, describe(data, title, caption, not_run=not_run)


# Figure 1's example: anchor S = {a, b, c} in a universe of six labels, and one T per relation
# with |S ∩ T| = 0, 3, 1, 2, 3 and |T \ S| = 3, 0, 2, 0, 2 as in the paper's case analysis.
RELATION_UNIVERSE = ("a", "b", "c", "d", "e", "f")
RELATION_ANCHOR = frozenset("abc")
RELATION_EXAMPLES = (
    ("R1", "S ∩ T = ∅", frozenset("def")),
    ("R2", "S = T", frozenset("abc")),
    ("R3", "S ∩ T ≠ ∅, no subset", frozenset("cde")),
    ("R4", "S ⊋ T", frozenset("ab")),
    ("R5", "S ⊊ T", frozenset("abcde")),
)


def relations_data() -> pd.DataFrame:
    """K^s, K^d and their product for the five example relations, computed by mscl.losses."""
    import torch  # imported here: only this figure needs torch

    from mscl.losses import dissimilarity_factor, similarity_factor

    rows = []
    for relation, definition, other in RELATION_EXAMPLES:
        intersection = torch.tensor(float(len(RELATION_ANCHOR & other)), dtype=torch.float64)
        k_s = float(similarity_factor(intersection, torch.tensor(float(len(RELATION_ANCHOR)), dtype=torch.float64)))
        k_d = float(dissimilarity_factor(intersection, torch.tensor(float(len(other)), dtype=torch.float64)))
        rows.append(
            {"relation": relation, "definition": definition, "T": "".join(sorted(other)), "intersection": int(intersection), "difference": len(other - RELATION_ANCHOR), "k_s": k_s, "k_d": k_d, "product": k_s * k_d}
        )
    return pd.DataFrame(rows)


def fraction_text(value: float) -> str:
    """'1/9' for 0.111..., '0' and '1' as integers."""
    fraction = Fraction(value).limit_denominator(100)
    return str(fraction.numerator) if fraction.denominator == 1 else f"{fraction.numerator}/{fraction.denominator}"


def relations_figure(runs: pd.DataFrame | None = None, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Figure 1: anchor S = {a,b,c} and the five relations R1-R5 as one-hot rows over Ω = {a..f},
    shared labels (S ∩ T) and extra labels (T \\ S) coloured, each row annotated with K^s, K^d, K^s·K^d."""
    del runs, batch_size, split  # drawn from the definitions, not from results
    data = relations_data()
    shared, extra, anchor = "#D55E00", "#56B4E9", "#555555"
    figure, axes = new_figure(FULL_WIDTH_IN * 0.7, 2.9)
    ax = axes[0, 0]
    rows = [("anchor i", "S", RELATION_ANCHOR, None)] + [(f"{r.relation}: p{r.relation[1]}", r.definition, frozenset(r.T), r) for r in data.itertuples()]
    for i, (name, definition, labels, values) in enumerate(rows):
        for j, label in enumerate(RELATION_UNIVERSE):
            present = label in labels
            colour = "white" if not present else anchor if values is None else shared if label in RELATION_ANCHOR else extra
            ax.add_patch(Rectangle((j, i), 0.9, 0.8, facecolor=colour, edgecolor="#333333", linewidth=0.5))
            ax.text(j + 0.45, i + 0.4, "1" if present else "0", ha="center", va="center", fontsize=7, color="white" if present else "#999999")
        ax.text(-0.3, i + 0.4, name, ha="right", va="center", fontsize=7.5, fontweight="bold" if values is None else "normal")
        if values is None:
            ax.text(6.3, i + 0.4, "labels {a, b, c}", ha="left", va="center", fontsize=7)
        else:
            ax.text(6.3, i + 0.4, f"{definition}", ha="left", va="center", fontsize=6.5, color="#444444")
            annotation = f"$K^s$={fraction_text(values.k_s)}   $K^d$={fraction_text(values.k_d)}   $K^sK^d$={fraction_text(values.product)}"
            ax.text(10.9, i + 0.4, annotation, ha="left", va="center", fontsize=7)
    for j, label in enumerate(RELATION_UNIVERSE):
        ax.text(j + 0.45, -0.35, label, ha="center", va="center", fontsize=8, style="italic")
    ax.text(3, -0.95, "Ω (label universe)", ha="center", va="center", fontsize=7)
    ax.set_xlim(-2.6, 17.1)
    ax.set_ylim(len(rows) + 0.1, -1.3)
    ax.axis("off")
    ax.legend(handles=[Patch(facecolor=anchor, label="anchor labels S"), Patch(facecolor=shared, label="shared S ∩ T (similarity)"), Patch(facecolor=extra, label="extra T \\ S (dissimilarity)")], loc="lower center", bbox_to_anchor=(0.5, -0.16), ncols=3, fontsize=6.5)
    caption = [
        "The five relations between an anchor's label set S = {a, b, c} and another sample's set T (paper Figure 1), as one-hot rows over six labels,"
        " with the similarity factor K^s = |S ∩ T| / |S|, the dissimilarity factor K^d = 1 / (1 + |T \\ S|) and their product, the Sim-Dissim weight,"
        " computed by mscl.losses (no training run: the same in every configuration).",
    ]
    return figure, describe(data, "The five label-set relations and their weights (paper Figure 1)", caption)


FIGURES: dict[str, Callable[..., FigureData]] = {
    "improvement": improvement_figure,
    "std": std_figure,
    "text_encoders": text_encoders_figure,
    "mimic_dotplot": mimic_dotplot_figure,
    "mimic_heatstrip": mimic_heatstrip_figure,
    "frequency_buckets": frequency_buckets_figure,
    "batch_size": batch_size_figure,
    "relations": relations_figure,
}


def build_figure(name: str, runs: pd.DataFrame | None, batch_size: int | None = None, split: str | None = None) -> FigureData:
    """Figure `name` and its plotted data; `split` None keeps the figure's own default."""
    function = FIGURES[name]
    options = {"batch_size": batch_size} | ({"split": split} if split else {})
    if name == "relations":
        return function(runs, **options)
    if runs is None:
        raise InputError(None, f"figure {name!r} needs the run results", "pass --runs results/metrics/all_runs.csv", field="--runs")
    runs = with_later_columns(runs)
    figure, data = function(paper_runs(runs), **options)
    data.attrs["notes"] = [*data.attrs.get("notes", []), *what_ran(runs).also_ran_notes(name)]
    return figure, data


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring): the items without a result go to stderr (the job's log)."""
    args = cli.parse_args("figure", argv)
    runs = load_runs(args.runs) if args.runs else None
    figure, data = build_figure(args.name, runs, args.batch_size, args.split)
    if runs is not None and "caption" in data.attrs:
        data.attrs["caption"] = " ".join(s for s in (data.attrs["caption"], mixed_code_sentence(runs)) if s)
    save_figure(figure, args.out_prefix, data)
    not_run = data.attrs.get("not_run", [])
    if not_run:
        print(f"figure {args.name}: {len(not_run)} items not run ({OUTSIDE_GRID}), not drawn: {'; '.join(not_run)}", file=sys.stderr)
    print(f"figure: wrote {args.out_prefix}.{{pdf,png,html}} ({args.name})")
    return 0
