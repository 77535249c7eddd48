"""The report's convergence figure: every pretraining's loss per epoch, a panel per dataset x
encoder and a line per loss, so that the report answers "did they all converge?".

    python -m mscl loss-curves --pretrain DIR... --runs results/metrics/all_runs.csv
        --out-prefix results/figures/loss_curves

writes `<prefix>.pdf`, `.png` and `.html` (the PNG with its caption and notes, for
`snakemake --report`). Each --pretrain folder is a run's pretraining output: its train_log.csv
gives the loss of every epoch (the epoch's mean over its steps) and its resolved_spec.json the
run's dataset, encoder, loss, batch size and seed; all_runs.csv gives the names tables and
figures call them by. The curves come from train_log.csv, not from the TensorBoard event
files beside it: every trained run writes train_log.csv whatever the config's `tensorboard`
says, it holds exactly one value per epoch (the grain of "has it converged"), and reading it
needs neither tensorboard's event reader nor files the workflow does not track. The methods
that train nothing (`none`, `logreg`) have no curve.

A line is the loss relative to its first epoch (losses live on different scales: a
contrastive loss starts near log(2B - 1), BCE near 0.69), the mean over seeds, with the
seeds' range shaded. A panel shows the batch size most of its runs share (ties: the larger);
the caption names what it leaves out. A line whose first-epoch loss is not a positive number
cannot be drawn relative to it: the notes name it.

Convergence: a line has settled when the mean of its last quarter of epochs is within
STILL_MOVING (5%) of the mean of the quarter before (means, so that one noisy epoch does not
decide). The notes name every line still moving (falling: it may need more epochs; rising: it
may have diverged), and the lines with fewer than MIN_EPOCHS epochs, too short to judge.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from mscl import cli
from mscl.errors import InputError
from mscl.report.benchmark import dataset_sort_key
from mscl.report.collect import load_runs, method_sort_key
from mscl.report.figures import FigureData, describe, empty_figure, new_figure, panel_grid, save_figure, wrapped
from mscl.report.style import COLUMN_WIDTH_IN, FULL_WIDTH_IN, method_colour

# A line whose last quarter of epochs moved by more than this share of the quarter before (in
# mean loss) may not have converged.
STILL_MOVING = 0.05
# Fewer epochs than this: too short to tell a plateau from noise.
MIN_EPOCHS = 4
PANEL_COLUMNS = 3
TITLE = "Pretraining loss per epoch: did every run converge?"
CURVE_COLUMNS = ["dataset", "encoder", "loss", "batch_size", "seed", "epoch", "value"]


class Names:
    """How tables and figures call datasets, encoders and losses (all_runs.csv's display
    columns; a key it lacks is called by itself)."""

    def __init__(self, runs: pd.DataFrame):
        self.names = {
            kind: dict(zip(runs[key], runs[display]))
            for kind, key, display in (("dataset", "dataset", "dataset_display"), ("encoder", "encoder", "encoder_display"), ("method", "loss", "method_display"))
        }

    def dataset(self, key: str) -> str:
        return self.names["dataset"].get(key, key)

    def encoder(self, key: str) -> str:
        return self.names["encoder"].get(key, key)

    def method(self, key: str) -> str:
        return self.names["method"].get(key, key)


def read_curves(folders: Sequence[Path]) -> pd.DataFrame:
    """One row per epoch of every trained run among `folders` (CURVE_COLUMNS); folders
    without a train_log.csv (methods that train nothing) are left out."""
    frames = []
    for folder in folders:
        spec_path, log_path = folder / "resolved_spec.json", folder / "train_log.csv"
        if not spec_path.is_file():
            raise InputError(spec_path, "no resolved_spec.json in the pretraining folder", "pass the folders of finished pretrain jobs (their encoder.pt's folder)", field="--pretrain")
        if not log_path.is_file():
            continue
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        log = pd.read_csv(log_path)
        if not {"epoch", "loss"} <= set(log.columns):
            raise InputError(log_path, "no epoch and loss columns", "rerun the pretrain job that wrote it", field="loss")
        frames.append(
            pd.DataFrame(
                {"dataset": spec["dataset"], "encoder": spec["encoder_name"], "loss": spec["loss"], "batch_size": int(spec["batch_size"]),
                 "seed": int(spec.get("seed", 0)), "epoch": log["epoch"].astype(int), "value": log["loss"].astype(float)}
            )  # fmt: skip
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CURVE_COLUMNS)


def panel_batch_sizes(curves: pd.DataFrame) -> dict[tuple[str, str], int]:
    """Per (dataset, encoder): the batch size most of its runs (loss x seed) share, ties the larger."""
    runs = curves.drop_duplicates(["dataset", "encoder", "loss", "batch_size", "seed"])
    counts = runs.groupby(["dataset", "encoder", "batch_size"]).size()
    chosen: dict[tuple[str, str], int] = {}
    for (dataset, encoder, size), count in counts.items():
        best = chosen.get((dataset, encoder))
        if best is None or (count, size) > (counts[(dataset, encoder, best)], best):
            chosen[(dataset, encoder)] = int(size)
    return chosen


def relative_lines(curves: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per line (dataset, encoder, loss, batch size) and epoch: the mean, min and max over seeds
    of the loss divided by the seed's first-epoch loss; and the lines that could not be."""
    first = curves.sort_values("epoch").groupby(["dataset", "encoder", "loss", "batch_size", "seed"])["value"].transform("first").reindex(curves.index)
    usable = first.gt(0) & first.map(math.isfinite)
    dropped = curves[~usable].drop_duplicates(["dataset", "encoder", "loss", "batch_size"])
    relative = curves[usable].assign(value=curves["value"][usable] / first[usable])
    lines = relative.groupby(["dataset", "encoder", "loss", "batch_size", "epoch"])["value"].agg(["mean", "min", "max", "count"]).reset_index()
    return lines.rename(columns={"count": "seeds"}), [f"{r.dataset} {r.encoder} {r.loss} batch {r.batch_size}" for r in dropped.itertuples()]


def convergence_notes(lines: pd.DataFrame, name: Names) -> tuple[list[str], int]:
    """The notes on lines still moving or too short to judge, and how many lines have settled."""
    moving, short, settled = [], [], 0
    for (dataset, encoder, loss, _), line in lines.groupby(["dataset", "encoder", "loss", "batch_size"]):
        values = line.sort_values("epoch")["mean"].to_numpy()
        label = f"{name.dataset(dataset)}, {name.encoder(encoder)}, {name.method(loss)}"
        if len(values) < MIN_EPOCHS:
            short.append(label)
            continue
        quarter = len(values) // 4
        before, last = values[-2 * quarter : -quarter].mean(), values[-quarter:].mean()
        change = (last - before) / before
        if abs(change) > STILL_MOVING:
            moving.append(f"{label} ({100 * change:+.0f}%)")
        else:
            settled += 1
    notes = []
    if moving:
        notes.append(
            f"Still moving, their last quarter of epochs more than {STILL_MOVING:.0%} from the quarter before in mean loss "
            f"(falling: more epochs may help; rising: diverging): " + "; ".join(moving) + "."
        )
    if short:
        notes.append(f"Fewer than {MIN_EPOCHS} epochs, too short to judge: " + "; ".join(short) + ".")
    return notes, settled


def loss_curves_figure(curves: pd.DataFrame, name: Names) -> FigureData:
    """The figure and its plotted data (see the module docstring)."""
    chosen = panel_batch_sizes(curves)
    shown = curves[[chosen[(d, e)] == b for d, e, b in zip(curves["dataset"], curves["encoder"], curves["batch_size"])]]
    left_out = sorted({(d, e, int(b)) for d, e, b in zip(curves["dataset"], curves["encoder"], curves["batch_size"]) if chosen[(d, e)] != b})
    lines, not_relative = relative_lines(shown)
    notes, settled = convergence_notes(lines, name)
    if not_relative:
        notes.append("Not drawn, their first-epoch loss is not a positive number: " + "; ".join(not_relative) + ".")
    count = lines.groupby(["dataset", "encoder", "loss", "batch_size"]).ngroups
    caption = [
        "Each pretraining's loss per epoch (its mean over the epoch's steps, from train_log.csv) relative to its first epoch, "
        "one panel per dataset and encoder, one line per loss: the mean over seeds, the seeds' range shaded.",
        f"Settled: {settled} of {count} lines (their last quarter of epochs within {STILL_MOVING:.0%} of the quarter before, in mean loss)." if count else "",
        "Methods that train nothing (No pretraining, logistic regression) have no curve.",
        ("Batch sizes left out (each panel shows the size most of its runs share): "
         + "; ".join(f"{name.dataset(d)}, {name.encoder(e)}: {b}" for d, e, b in left_out) + ".") if left_out else "",
    ]  # fmt: skip
    data = describe(lines, TITLE, caption, notes)
    panels = sorted({(d, e) for d, e in zip(lines["dataset"], lines["encoder"])}, key=lambda panel: (dataset_sort_key(panel[0]), panel[1]))
    if not panels:
        return empty_figure(FULL_WIDTH_IN, "Pretraining loss curves"), data
    nrows, ncols = panel_grid(len(panels), PANEL_COLUMNS)
    figure, axes = new_figure(FULL_WIDTH_IN if ncols > 1 else COLUMN_WIDTH_IN, 0.9 + 1.9 * nrows, nrows=nrows, ncols=ncols)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (dataset, encoder) in zip(axes.flat, panels):
        panel = lines[(lines["dataset"] == dataset) & (lines["encoder"] == encoder)]
        for loss in sorted(panel["loss"].unique(), key=method_sort_key):
            line = panel[panel["loss"] == loss].sort_values("epoch")
            colour = method_colour(loss)
            ax.plot(line["epoch"], line["mean"], color=colour, linewidth=1.0, label=name.method(loss))
            if line["seeds"].max() > 1:
                ax.fill_between(line["epoch"], line["min"], line["max"], color=colour, alpha=0.15, linewidth=0)
        seeds = panel.groupby("loss")["seeds"].max()
        seeds_text = f"{seeds.min()} seed{'s' if seeds.min() > 1 else ''}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()} seeds"
        ax.set_title(wrapped(f"{name.dataset(dataset)}, {name.encoder(encoder)} (batch {int(panel['batch_size'].iloc[0])}, {seeds_text})", 40), fontsize=7)
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss / first epoch's")
        ax.legend(fontsize=5, ncols=2, frameon=False)
    return figure, data


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("loss-curves", argv)
    figure, data = loss_curves_figure(read_curves(args.pretrain), Names(load_runs(args.runs)))
    save_figure(figure, args.out_prefix, data)
    for note in data.attrs["notes"]:
        print(f"loss-curves: {note}", file=sys.stderr)
    print(f"loss-curves: wrote {args.out_prefix}.{{pdf,png,html}}")
    return 0
