"""The paper's figures, regenerated from a run's tidy results (PDF + PNG at 200 dpi).

`python -m mscl figure NAME --runs results/metrics/all_runs.csv --out-prefix results/figures/NAME
[--batch-size B] [--split test|val]` writes `<prefix>.pdf` and `<prefix>.png` atomically.
`relations` is drawn from the loss definitions and needs no --runs.

Every figure function takes the tidy runs (see `mscl.report.collect`) and returns
`(figure, data)`, `data` being exactly the values it plots (percent), one row per plotted
item with a `status` column: `ok`, or `missing` where the run has no result. Missing parts
are drawn as a visible "missing" mark and listed in a footnote; the figure always renders.
Several seeds: the mean is plotted with the sample std as an error bar.

References: only the label prior (`python -m mscl chance`) is drawn, as a dashed "chance" line
in the batch-size figure (one per metric panel) and the frequency-bucket figure (one per bucket),
when the results have it; its rows are then in `data` too (method "chance"). The other figures
compare named losses and ignore every reference.
"""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from mscl import cli
from mscl.cli import FIGURE_NAMES  # noqa: F401  (the names `figure NAME` accepts: FIGURES' keys)
from mscl.errors import InputError
from mscl.io import atomic_path
from mscl.metrics import macro_f1_definition
from mscl.report.collect import CellKey, CellStat, cell_index, load_runs, summarise_seeds
from mscl.report.style import (
    CHANCE,
    COLUMN_WIDTH_IN,
    CORE_METHODS,
    ENCODER_MARKERS,
    F1_METRICS,
    FULL_WIDTH_IN,
    IMAGE_DATASETS,
    IMAGE_METRICS,
    LABEL_SPACE_DISPLAY_NAMES,
    LABEL_SPACES,
    MACRO_F1_DEFINITION_NAMES,
    MIMIC_FAMILIES,
    MIMIC_FAMILY_DISPLAY_NAMES,
    MIMIC_ROLES,
    MISSING_COLOUR,
    PNG_DPI,
    REFERENCE_ROLE,
    apply_style,
    dataset_name,
    encoder_name,
    method_colour,
    method_name,
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
# Footnote geometry at 6 pt: at most 19 characters per inch and 0.1 inch per line.
FOOTNOTE_CHARS_PER_IN = 19
FOOTNOTE_LINE_IN = 0.1
FOOTNOTE_LINES = 2

FigureData = tuple[Figure, pd.DataFrame]


# ------------------------------------------------------------------------ helpers


def new_figure(width_in: float, height_in: float, **subplots: object) -> tuple[Figure, np.ndarray]:
    """A constrained-layout figure of exactly width x height inches and its axes as a 2-D array."""
    figure, axes = plt.subplots(figsize=(width_in, height_in), layout="constrained", squeeze=False, **subplots)
    return figure, axes


def save_figure(figure: Figure, out_prefix: str | Path) -> None:
    """Write <prefix>.pdf and <prefix>.png (PNG_DPI) atomically, then close the figure."""
    prefix = Path(out_prefix)
    for suffix in (".pdf", ".png"):
        with atomic_path(prefix.with_name(prefix.name + suffix), suffix=suffix) as tmp:
            figure.savefig(tmp, format=suffix[1:], dpi=PNG_DPI)
    plt.close(figure)


def stat_row(stat: CellStat | None) -> dict[str, object]:
    """Plotted values of one cell in percent: mean, std, seeds, status."""
    if stat is None:
        return {"mean": math.nan, "std": math.nan, "seeds": 0, "status": "missing"}
    return {"mean": stat.mean * 100, "std": stat.std * 100, "seeds": stat.seeds, "status": "ok"}


def error_of(row: pd.Series | dict) -> float:
    """The error bar of a plotted mean: its std when several seeds, else 0."""
    return float(row["std"]) if row["seeds"] > 1 and math.isfinite(row["std"]) else 0.0


def add_footnote(figure: Figure, missing: Sequence[str]) -> None:
    """Name the missing parts in at most FOOTNOTE_LINES lines above everything else (the
    constrained layout keeps that strip free; the bottom is where figure legends go)."""
    if not missing:
        return
    width_in, height_in = figure.get_size_inches()
    text = "missing (no result in this run): " + ", ".join(missing)
    lines = textwrap.wrap(text, width=int(width_in * FOOTNOTE_CHARS_PER_IN), max_lines=FOOTNOTE_LINES, placeholder=f" ... ({len(missing)} in all)")
    strip = (len(lines) * FOOTNOTE_LINE_IN + 0.04) / height_in
    figure.get_layout_engine().set(rect=(0, 0, 1, 1 - strip))
    figure.text(0.01, 0.995, "\n".join(lines), fontsize=6, color=MISSING_TEXT_COLOUR, ha="left", va="top")


def mark_missing(ax: plt.Axes, x: float) -> None:
    """A visible 'missing' mark at data position x, near the bottom of the axes."""
    ax.text(x, 0.03, "missing", transform=ax.get_xaxis_transform(), rotation=90, ha="center", va="bottom", fontsize=5.5, color=MISSING_TEXT_COLOUR)


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
) -> None:
    """Bars of `value_column`, one cluster per group, one bar per series; missing bars marked."""
    width = 0.8 / len(series)
    for j, name in enumerate(series):
        for i, group in enumerate(groups):
            x = i - 0.4 + width * (j + 0.5)
            rows = data[(data[group_column] == group) & (data[series_column] == name)]
            if rows.empty or rows.iloc[0]["status"] != "ok" or not math.isfinite(rows.iloc[0][value_column]):
                mark_missing(ax, x)
                continue
            row = rows.iloc[0]
            error = row[error_column] if error_column and row["seeds"] > 1 and math.isfinite(row[error_column]) else None
            ax.bar(x, row[value_column], width * 0.92, color=colour(name), yerr=error, capsize=1.5, error_kw={"linewidth": 0.7})
    ax.set_xticks(range(len(groups)))
    ax.set_xlim(-0.5, len(groups) - 0.5)


def zoom_to_values(ax: plt.Axes, values: pd.Series, margin: float = 0.25) -> None:
    """Y range around the finite values (bars of close percentages would be indistinguishable from 0)."""
    finite = values[np.isfinite(values)]
    if finite.empty:
        ax.set_ylim(0, 100)
        return
    low, high = float(finite.min()), float(finite.max())
    pad = max((high - low) * margin, 1.0)
    ax.set_ylim(max(0.0, low - 2 * pad), min(100.0, high + pad))


def zoom_x_to_values(ax: plt.Axes, values: pd.Series) -> None:
    """X range from just below the lowest to just above the highest finite value (within 0-100)."""
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 100.0)
    ax.set_xlim(max(0.0, low - 3), min(100.5, high + 3))


def method_legend_handles(methods: Sequence[str]) -> list[Patch]:
    return [Patch(facecolor=method_colour(m), label=method_name(m)) for m in methods]


def chance_handle() -> Line2D:
    """The legend entry of the dashed label-prior line."""
    return Line2D([], [], color=method_colour(CHANCE), linestyle="--", linewidth=0.8, label=method_name(CHANCE))


def method_cells(index: dict[CellKey, CellStat], dataset: str, role: str, methods: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """One plotted row per (method, metric) of a dataset and encoder."""
    rows = [
        {"dataset": dataset, "encoder_role": role, "method": method, "metric": metric, **stat_row(index.get((dataset, role, method, metric)))}
        for method in methods
        for metric in metrics
    ]
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------- figures


def improvement_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Sim-Dissim's gain over MulSupCon in micro-/macro-F1 per image dataset, relative (%) as the paper's
    text ("macro-F1 increases by 5.7% on MS-COCO"); the absolute gain (points) is in the data too."""
    index = cell_index(runs, split, batch_size)
    rows = []
    for dataset in IMAGE_DATASETS:
        for metric in F1_METRICS:
            ours, base = index.get((dataset, "resnet", "simdissim", metric)), index.get((dataset, "resnet", "mulsupcon", metric))
            row = {"dataset": dataset, "metric": metric, "simdissim": math.nan, "mulsupcon": math.nan, "delta": math.nan, "mean": math.nan, "std": math.nan, "seeds": 0, "status": "missing"}
            if ours and base and base.mean > 0:
                # Error of a ratio of independent means: both stds combined (first order), in %.
                spread = math.hypot(*(s if math.isfinite(s) else 0.0 for s in (ours.std, base.std))) / base.mean * 100
                row.update(
                    simdissim=ours.mean * 100,
                    mulsupcon=base.mean * 100,
                    delta=(ours.mean - base.mean) * 100,
                    mean=(ours.mean - base.mean) / base.mean * 100,
                    std=spread,
                    seeds=min(ours.seeds, base.seeds),
                    status="ok",
                )
            rows.append(row)
    data = pd.DataFrame(rows)
    figure, axes = new_figure(COLUMN_WIDTH_IN, 2.4)
    ax = axes[0, 0]
    grouped_bars(ax, data, "dataset", IMAGE_DATASETS, "metric", F1_METRICS, metric_colour)
    for i, dataset in enumerate(IMAGE_DATASETS):
        for j, metric in enumerate(F1_METRICS):
            row = data[(data["dataset"] == dataset) & (data["metric"] == metric)].iloc[0]
            if row["status"] == "ok":
                # Label beyond the error bar's end, on the side the bar points to.
                end = row["mean"] + math.copysign(error_of(row), row["mean"])
                ax.annotate(f"{row['mean']:+.1f}%", (i - 0.2 + 0.4 * j, end), xytext=(0, 2 if row["mean"] >= 0 else -8), textcoords="offset points", ha="center", fontsize=6)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticklabels([dataset_name(d) for d in IMAGE_DATASETS])
    ax.set_ylabel("Gain over MulSupCon (%)")
    ax.set_title("Sim-Dissim vs MulSupCon (relative)")
    ax.margins(y=0.15)
    figure.legend(handles=[Patch(facecolor=metric_colour(m), label=metric_name(m)) for m in F1_METRICS], loc="outside lower center", ncols=len(F1_METRICS))
    add_footnote(figure, [f"{dataset_name(r.dataset)} {metric_name(r.metric)}" for r in data.itertuples() if r.status != "ok"])
    return figure, data


def std_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Standard deviation across ALL, ANY, MulSupCon and Sim-Dissim per image dataset and metric
    (sample std, ddof 1, of the methods' mean values: the paper's 0.58/0.64/0.27 on PASCAL)."""
    index = cell_index(runs, split, batch_size)
    rows = []
    for dataset in IMAGE_DATASETS:
        for metric in IMAGE_METRICS:
            values = [index[key].mean * 100 for key in ((dataset, "resnet", m, metric) for m in CORE_METHODS) if key in index and math.isfinite(index[key].mean)]
            enough = len(values) >= 2
            rows.append(
                {"dataset": dataset, "metric": metric, "mean": float(np.std(values, ddof=1)) if enough else math.nan, "methods": len(values), "std": math.nan, "seeds": 1, "status": "ok" if enough else "missing"}
            )
    data = pd.DataFrame(rows)
    figure, axes = new_figure(COLUMN_WIDTH_IN, 2.4)
    ax = axes[0, 0]
    grouped_bars(ax, data, "dataset", IMAGE_DATASETS, "metric", IMAGE_METRICS, metric_colour, error_column=None)
    ax.set_xticklabels([dataset_name(d) for d in IMAGE_DATASETS])
    ax.set_ylabel("Std across methods (points)")
    ax.set_ylim(bottom=0)
    ax.margins(y=0.1)
    figure.legend(handles=[Patch(facecolor=metric_colour(m), label=metric_name(m)) for m in IMAGE_METRICS], loc="outside lower center", ncols=len(IMAGE_METRICS))
    partial = [f"{dataset_name(r.dataset)} {metric_name(r.metric)} ({r.methods}/{len(CORE_METHODS)} methods)" for r in data.itertuples() if r.methods < len(CORE_METHODS)]
    add_footnote(figure, partial)
    return figure, data


def text_encoders_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """AAPD: RoBERTa vs Llama, micro- and macro-F1 per method."""
    index = cell_index(runs, split, batch_size)
    data = pd.concat([method_cells(index, "aapd", role, CORE_METHODS, F1_METRICS) for role in ("roberta", "llama")], ignore_index=True)
    figure, axes = new_figure(COLUMN_WIDTH_IN * 1.5, 2.6, ncols=2)
    for ax, metric in zip(axes[0], F1_METRICS):
        panel = data[data["metric"] == metric]
        grouped_bars(ax, panel, "encoder_role", ("roberta", "llama"), "method", CORE_METHODS, method_colour)
        ax.set_xticklabels([encoder_name(r) for r in ("roberta", "llama")])
        ax.set_title(f"AAPD {metric_name(metric)}")
        ax.set_ylabel(f"{metric_name(metric)} (%)")
        zoom_to_values(ax, panel["mean"])
    figure.legend(handles=method_legend_handles(CORE_METHODS), loc="outside lower center", ncols=len(CORE_METHODS))
    add_footnote(figure, [f"{encoder_name(r.encoder_role)} {method_name(r.method)} {metric_name(r.metric)}" for r in data.itertuples() if r.status != "ok"])
    return figure, data


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


def mimic_dotplot_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """Small multiples (rows: MIMIC-III, MIMIC-IV-ICD9, MIMIC-IV-ICD10; columns: Full, Top-50):
    metrics on the y axis, one dot per method (colour) and encoder (marker)."""
    data = mimic_cells(cell_index(runs, split, batch_size))
    figure, axes = new_figure(FULL_WIDTH_IN, 6.6, nrows=len(MIMIC_FAMILIES), ncols=len(LABEL_SPACES))
    # Within a metric's row the encoders get their own lanes, and methods a small extra shift,
    # so that equal scores do not hide each other.
    offsets = {role: (k - 1) * 0.27 for k, role in enumerate(MIMIC_ROLES)}
    method_shift = {m: (k - 1.5) * 0.05 for k, m in enumerate(CORE_METHODS)}
    for r, family in enumerate(MIMIC_FAMILIES):
        for c, space in enumerate(LABEL_SPACES):
            ax = axes[r, c]
            panel = data[(data["family"] == family) & (data["label_space"] == space)]
            for row in panel.itertuples():
                if row.status != "ok" or not math.isfinite(row.mean):
                    continue
                y = MIMIC_METRICS.index(row.metric) + offsets[row.encoder_role] + method_shift[row.method]
                error = error_of(row._asdict()) or None
                ax.errorbar(row.mean, y, xerr=error, fmt=ENCODER_MARKERS[row.encoder_role], color=method_colour(row.method), markersize=3.5, markeredgewidth=0.4, markeredgecolor="white", elinewidth=0.7, capsize=1)
            ax.set_yticks(range(len(MIMIC_METRICS)), [mimic_metric_label(m, space) for m in MIMIC_METRICS])
            ax.set_ylim(len(MIMIC_METRICS) - 0.5, -0.5)
            zoom_x_to_values(ax, panel["mean"])
            title = f"{MIMIC_FAMILY_DISPLAY_NAMES[family]}-{LABEL_SPACE_DISPLAY_NAMES[space]}"
            absent = int((panel["status"] != "ok").sum())
            ax.set_title(f"{title} (missing {absent}/{len(panel)})" if absent else title, color=MISSING_TEXT_COLOUR if absent else "black")
            ax.set_xlabel("Score (%)")
    encoder_handles = [Line2D([], [], linestyle="", marker=ENCODER_MARKERS[role], color="#444444", label=encoder_name(role)) for role in MIMIC_ROLES]
    figure.legend(handles=method_legend_handles(CORE_METHODS) + encoder_handles, loc="outside lower center", ncols=len(CORE_METHODS) + len(MIMIC_ROLES))
    return figure, data


def heatstrip_deltas(cells: pd.DataFrame) -> pd.DataFrame:
    """Delta = Ours - max(ALL, ANY, MulSupCon) per (family, label space, encoder, metric), in points.

    The max is over the baselines present; missing if Ours or every baseline is missing.
    """
    rows = []
    keys = ["family", "label_space", "dataset", "encoder_role", "metric"]
    for key, group in cells.groupby(keys, sort=False):
        present = group[(group["status"] == "ok") & np.isfinite(group["mean"])].set_index("method")["mean"]
        baselines = present.drop("simdissim", errors="ignore")
        row = dict(zip(keys, key)) | {"ours": math.nan, "best_baseline": math.nan, "best_baseline_method": "", "baselines": len(baselines), "delta": math.nan, "status": "missing"}
        if "simdissim" in present.index and len(baselines):
            row.update(ours=present["simdissim"], best_baseline=baselines.max(), best_baseline_method=baselines.idxmax(), delta=present["simdissim"] - baselines.max(), status="ok")
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
    MIMIC setting, diverging colours centred at 0, every cell annotated."""
    data = heatstrip_deltas(mimic_cells(cell_index(runs, split, batch_size)))
    norm = zero_centred_norm(data["delta"])
    cmap = plt.get_cmap("RdBu_r")
    figure, axes = new_figure(FULL_WIDTH_IN, 3.6, nrows=len(LABEL_SPACES), ncols=len(MIMIC_FAMILIES))
    for r, space in enumerate(LABEL_SPACES):
        for c, family in enumerate(MIMIC_FAMILIES):
            ax = axes[r, c]
            strip = data[(data["family"] == family) & (data["label_space"] == space)]
            grid = strip.pivot(index="encoder_role", columns="metric", values="delta").reindex(index=list(MIMIC_ROLES), columns=list(MIMIC_METRICS))
            ax.imshow(np.ma.masked_invalid(grid.to_numpy(dtype=float)), cmap=cmap, norm=norm, aspect="auto")
            for i, role in enumerate(MIMIC_ROLES):
                for j, metric in enumerate(MIMIC_METRICS):
                    value = grid.loc[role, metric]
                    if math.isfinite(value):
                        shade = norm(value)
                        ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=6, color="white" if abs(shade - 0.5) > 0.35 else "black")
                    else:
                        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=MISSING_COLOUR, edgecolor="white"))
                        ax.text(j, i, "missing", ha="center", va="center", fontsize=5, color=MISSING_TEXT_COLOUR)
            ax.set_xticks(range(len(MIMIC_METRICS)), [mimic_metric_label(m, space) for m in MIMIC_METRICS], rotation=30, ha="right")
            ax.set_yticks(range(len(MIMIC_ROLES)), [encoder_name(role) for role in MIMIC_ROLES] if c == 0 else [])
            ax.tick_params(length=0)
            ax.grid(False)
            ax.spines[:].set_visible(False)
            ax.set_title(f"{MIMIC_FAMILY_DISPLAY_NAMES[family]}-{LABEL_SPACE_DISPLAY_NAMES[space]}")
    colourbar = figure.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8, pad=0.02)
    colourbar.set_label("Δ = Ours − max(ALL, ANY, MulSupCon) (points)")
    return figure, data


def frequency_buckets_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "test") -> FigureData:
    """MS-COCO head/tail-bucket macro-F1 per method (buckets from training label counts, head = 60%).

    The buckets extend the image table, so they use its macro-F1 definition, MS-COCO's
    (`mscl.metrics.macro_f1_definition`, which `collect` passes to `bucket_macro_f1`); `data`
    names it in `macro_f1_definition` and the y label spells it out.
    """
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
    sizes = {b: int(data.loc[data["bucket"] == b, "classes"].max()) for b in ("head", "tail")}
    figure, axes = new_figure(COLUMN_WIDTH_IN, 2.7)
    ax = axes[0, 0]
    grouped_bars(ax, data, "bucket", ("head", "tail"), "method", CORE_METHODS, method_colour)
    for i, bucket in enumerate(("head", "tail")):
        if bucket in chance:
            ax.hlines(chance[bucket].mean * 100, i - 0.45, i + 0.45, colors=method_colour(CHANCE), linestyles="--", linewidth=0.8)
    ax.set_xticklabels([f"{b.capitalize()} ({sizes[b]} classes)" if sizes[b] else f"{b.capitalize()} (size unknown)" for b in ("head", "tail")])
    ax.set_ylabel(f"Macro-F1 (%)\n{MACRO_F1_DEFINITION_NAMES[definition]}")
    if sizes["head"]:
        ax.set_title(f"MS-COCO: head {sizes['head']} classes (60% of train\ninstances), tail {sizes['tail']} classes")
    else:
        ax.set_title("MS-COCO frequency buckets\n(bucket sizes unknown)")
    zoom_to_values(ax, data["mean"])
    handles = method_legend_handles(CORE_METHODS) + ([chance_handle()] if chance else [])
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles) if len(handles) <= 4 else 3)  # 5 do not fit one column-wide row
    add_footnote(figure, [f"{method_name(r.method)} {r.bucket}" for r in data.itertuples() if r.status != "ok"])
    return figure, data


def batch_size_figure(runs: pd.DataFrame, batch_size: int | None = None, split: str = "val") -> FigureData:
    """MS-COCO micro-F1 / macro-F1 / mAP against the batch sizes the run has, a line per method.

    The paper measures this on the validation set, hence split 'val' by default. `batch_size`
    is ignored: every batch size is plotted.
    """
    del batch_size  # every batch size is on the x axis
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
    figure, axes = new_figure(FULL_WIDTH_IN, 2.5, ncols=len(IMAGE_METRICS))
    for ax, metric in zip(axes[0], IMAGE_METRICS):
        for method in CORE_METHODS:
            line = data[(data["metric"] == metric) & (data["method"] == method) & (data["status"] == "ok")]
            errors = [error_of(row) for _, row in line.iterrows()]
            ax.errorbar(line["batch_size"], line["mean"], yerr=errors, marker="o", markersize=3, linewidth=1.2, capsize=1.5, color=method_colour(method))
        if metric in chance:
            ax.axhline(chance[metric].mean * 100, color=method_colour(CHANCE), linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)  # half a doubling of room on each side
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("Batch size")
        ax.set_ylabel(f"{metric_name(metric)} (%)")
        ax.set_title(f"MS-COCO {metric_name(metric)} ({split})")
        if data.loc[(data["metric"] == metric) & (data["method"] != CHANCE), "status"].eq("missing").all():
            ax.set_ylim(0, 100)
            ax.text(0.5, 0.5, "missing", transform=ax.transAxes, ha="center", color=MISSING_TEXT_COLOUR)
    handles = method_legend_handles(CORE_METHODS) + ([chance_handle()] if chance else [])
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    add_footnote(figure, [f"{method_name(r.method)} bs{r.batch_size} {metric_name(r.metric)}" for r in data.itertuples() if r.status != "ok"])
    return figure, data


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
    return figure, data


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
    if name != "relations" and runs is None:
        raise InputError(None, f"figure {name!r} needs the run results", "pass --runs results/metrics/all_runs.csv", field="--runs")
    return function(runs, **options)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    args = cli.parse_args("figure", argv)
    runs = load_runs(args.runs) if args.runs else None
    figure, _ = build_figure(args.name, runs, args.batch_size, args.split)
    save_figure(figure, args.out_prefix)
    print(f"figure: wrote {args.out_prefix}.{{pdf,png}} ({args.name})")
    return 0
