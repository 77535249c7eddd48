"""`python -m mscl check-complete`: every cell of the paper's tables and every item of its
figures has a result.

    python -m mscl check-complete --tables results/tables/{image,aapd,...}.csv \\
        --statistics results/tables/statistics.csv --datasets coco voc ... \\
        --runs results/metrics/all_runs.csv --figure improvement=256 --figure relations ... \\
        --out results/paper_complete.txt

A run of the paper's whole grid (config/paper.yaml, or its smoke overlay) should leave no hole;
this command says whether it did, from the files the DAG wrote:

- every table CSV (one row per cell, a `status` column): no cell without a result (status
  `missing` or `not_run`), and every cell with a result holds a finite number (`mean`, or
  `run_mean` in paper_vs_run): a NaN there means a metric had nothing to average;
- statistics.csv: one row per dataset setting named by --datasets, no empty count;
- every figure, rebuilt from the tidy runs by `mscl.report.figures.build_figure` at its batch
  size (`NAME=BATCH`, or `NAME` for the figure's own default): no plotted item without a result
  (its data's `status` column, or the `not_run` list a figure may carry in `data.attrs`) and no
  NaN among the plotted means.

Every problem is printed (one line each); the exit status is 1 when there is any, and --out
(a short summary) is written only when there is none, so a Snakemake target of it exists only
for a complete run.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from mscl import cli
from mscl.errors import InputError
from mscl.io import write_text

# Statuses of a cell or plotted item that has no result: `not_run` (tables: outside the run's
# grid) and `missing` (a figure's item whose runs are absent).
ABSENT = ("missing", "not_run")
# Statuses whose cell holds this run's number (`stand_in`: a run on stand-in data or models).
PRESENT = ("ok", "stand_in")
VALUE_COLUMNS = ("mean", "run_mean")


def table_problems(path: Path) -> tuple[list[str], int]:
    """(problems, cells with a result) of one table CSV."""
    frame = read_csv(path)
    if "status" not in frame.columns:
        raise InputError(path, "no `status` column", "pass the CSV of a paper table (`python -m mscl table NAME`)", field="status")
    value = next((column for column in VALUE_COLUMNS if column in frame.columns), None)
    problems = []
    for row in frame.itertuples(index=False):
        where = describe(row)
        if row.status in ABSENT:
            problems.append(f"{path.name}: no result for {where}")
        elif row.status in PRESENT and value is not None and not math.isfinite(float(getattr(row, value))):
            problems.append(f"{path.name}: {where} is NaN")
    return problems, int(frame["status"].isin(PRESENT).sum())


def describe(row: tuple) -> str:
    """A cell's address from the columns the table has (cell id, or dataset/encoder/method/metric)."""
    fields = row._asdict()
    if fields.get("cell"):
        return str(fields["cell"])
    parts = [str(fields[key]) for key in ("table", "block", "dataset", "encoder_role", "method", "metric", "row", "column") if key in fields and str(fields[key]) not in ("", "nan")]
    return "/".join(parts) or "a cell"


def statistics_problems(path: Path, datasets: Sequence[str]) -> list[str]:
    """A row per dataset setting, every count filled."""
    frame = read_csv(path).set_index("key")
    problems = [f"{path.name}: no row for dataset {name!r}" for name in datasets if name not in frame.index]
    for name in (n for n in datasets if n in frame.index):
        empty = [column for column in ("Train", "Val", "Test", "Total # labels", "Avg # labels") if column in frame.columns and pd.isna(frame.at[name, column])]
        problems += [f"{path.name}: dataset {name!r} has no {column!r}" for column in empty]
    return problems


def figure_problems(name: str, runs: pd.DataFrame, batch_size: int | None) -> tuple[list[str], int]:
    """(problems, plotted items) of one figure rebuilt from the runs."""
    from mscl.report.figures import build_figure, plt

    figure, data = build_figure(name, runs, batch_size)
    plt.close(figure)
    absent = data[data["status"].isin(ABSENT)] if "status" in data.columns else data.iloc[0:0]
    problems = [f"figure {name}: no result for {describe(row)}" for row in absent.itertuples(index=False)]
    if "status" in data.columns and "mean" in data.columns:
        nan = data[data["status"].isin(PRESENT) & data["mean"].isna()]
        problems += [f"figure {name}: {describe(row)} is NaN" for row in nan.itertuples(index=False)]
    problems += [f"figure {name}: not run: {item}" for item in data.attrs.get("not_run", [])]
    return problems, len(data) - len(absent)


def parse_figure(value: str) -> tuple[str, int | None]:
    """`NAME=BATCH` or `NAME` -> (name, batch size or None)."""
    name, _, batch = value.partition("=")
    if batch and not batch.isdigit():
        raise InputError(None, f"--figure {value!r}: the batch size {batch!r} is not a whole number", "write NAME=BATCH, e.g. improvement=256, or NAME", field="--figure")
    return name, int(batch) if batch else None


def read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=True)
    except FileNotFoundError:
        raise InputError(path, "file not found", "build the tables first (snakemake ... all)") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("check-complete", argv)
    figures = [parse_figure(value) for value in args.figure]
    problems: list[str] = []
    cells = 0
    for path in args.tables:
        found, present = table_problems(path)
        problems += found
        cells += present
    if args.statistics is not None:
        problems += statistics_problems(args.statistics, args.datasets)
    items = 0
    if figures:
        from mscl.report.collect import load_runs

        runs = load_runs(args.runs) if args.runs else None
        for name, batch_size in figures:
            found, plotted = figure_problems(name, runs, batch_size)
            problems += found
            items += plotted
    for problem in problems:
        print(f"check-complete: {problem}", file=sys.stderr)
    summary = f"{len(args.tables)} tables ({cells} cells with a result), {len(args.datasets)} datasets in the statistics, {len(figures)} figures ({items} plotted items)"
    if problems:
        print(f"check-complete: {len(problems)} problems in {summary}", file=sys.stderr)
        return 1
    if args.out is not None:
        write_text(args.out, f"complete: {summary}\n")
    print(f"check-complete: complete: {summary}")
    return 0
