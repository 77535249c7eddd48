"""The claim check's data files, read straight from its runs (`python -m mscl claim-export`).

    python -m mscl claim-export --metrics RUN/probe/metrics.json... --selections .../selected.json...
        --train-stats DATASET=stats.json... --out-dir DIR

Every file is one tidy CSV with fractions in [0, 1]. Each row names the code that made it:
`commit` is the mscl commit recorded in the run's versions.json. Writing stops unless every
run has the same clean commit, so that the files describe one pipeline. `--allow-mixed-commits`
writes them anyway, for work in progress, and the report then says so.

- runs.csv: dataset, method, seed, split, micro_f1, macro_f1, map, macro_auc, commit. One row per
  dataset x method x seed x split (val: the probe's val-chosen epoch; test), at each dataset's
  main batch size: the one most of its runs share.
- batch_size.csv: the same with a batch_size column, for every batch size (the batch-size claim).
- buckets.csv: dataset, method, seed, bucket (head / tail), labels, macro_f1, map, commit. The
  test split of the main-batch runs, in frequency buckets of the training label counts (head =
  the labels holding the top 60% of training instances, the paper's long-tail analysis).
  macro_f1 is the dataset's definition; map is the mean AP over the bucket's labels that have a
  test positive.
- convergence.csv: dataset, method, seed, epoch, val_map_readout, loss, commit. The convergence
  monitor's checks of every trained main-batch run (pretrain/train_log.csv).
- tuning.csv: dataset, method, batch_size, setting, seed, metric, value, chosen. Every tuning run's
  val metric, from the selections (selected.json).
- probes.csv: dataset, method, seed, best_epoch, epochs, commit. The probe's val-chosen epoch of
  every main-batch run: a probe that chose its last epoch was still improving.
- schedule.csv: dataset, method, encoder, epochs, seed, split, the four metrics, commit. The
  schedule check (docs/claim-check.md, Amendments 2 and 4): the runs of an encoder other than the
  dataset's main one (the encoder most of its runs share), e.g. the same network at twice the
  schedule. Every file above holds main-encoder runs only.
- schedule_convergence.csv: dataset, method, encoder, seed, epoch, val_map_readout, loss, commit.
  The monitor's checks of those runs.

The commit rule holds per group: the main-encoder runs (every file but the schedule files) come
from one clean commit, and the schedule runs from one clean commit, which may be a later one: a
check added after the main run, in the same clone, keeps the main files one pipeline.
"""

from __future__ import annotations

import csv
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mscl import cli
from mscl.errors import InputError
from mscl.io import read_json, write_text
from mscl.layout import CLAIM_DATA_FILES
from mscl.metrics import bucket_macro_f1, head_tail_split, macro_f1_definition, macro_f1_key, per_label_auc_and_ap
from mscl.report.collect import HEAD_SHARE, read_metrics_json, read_test_scores, read_train_counts

METRICS = ("micro_f1", "macro_f1", "map", "macro_auc")
RUNS_COLUMNS = ("dataset", "method", "seed", "split", *METRICS, "commit")
BATCH_COLUMNS = ("dataset", "method", "batch_size", "seed", "split", *METRICS, "commit")
BUCKET_COLUMNS = ("dataset", "method", "seed", "bucket", "labels", "macro_f1", "map", "commit")
CONVERGENCE_COLUMNS = ("dataset", "method", "seed", "epoch", "val_map_readout", "loss", "commit")
SCHEDULE_COLUMNS = ("dataset", "method", "encoder", "epochs", "seed", "split", *METRICS, "commit")
SCHEDULE_CONVERGENCE_COLUMNS = ("dataset", "method", "encoder", "seed", "epoch", "val_map_readout", "loss", "commit")
TUNING_COLUMNS = ("dataset", "method", "batch_size", "setting", "seed", "metric", "value", "chosen")
PROBE_COLUMNS = ("dataset", "method", "seed", "best_epoch", "epochs", "commit")
SPLIT_SECTIONS = {"val": "val_best", "test": "test"}


# ----------------------------------------------------------------------------- reading


def run_commit(probe_dir: Path) -> str:
    """The mscl commit that made a run: probe and pretrain versions.json must agree."""
    commits = set()
    for folder in (probe_dir, probe_dir.parent / "pretrain"):
        versions = read_json(folder / "versions.json", "versions.json", "rerun this run's jobs", "rerun this run's jobs")
        commits.add(versions.get("mscl_commit") or "unknown")
    if len(commits) > 1:
        raise InputError(probe_dir, f"pretrain and probe were made by different commits {sorted(commits)}", "rerun the run's probe (delete its probe/ folder)", field="mscl_commit")
    return commits.pop()


def read_run(metrics_path: Path) -> dict[str, Any]:
    """One run's axes, commit and val/test metrics (the dataset family's macro-F1)."""
    document = read_metrics_json(metrics_path)
    spec = document.get("spec") or {}
    axes = {key: spec.get(key) for key in ("dataset", "loss", "batch_size", "seed", "encoder_name")}
    if any(value is None for value in axes.values()):
        raise InputError(metrics_path, "the recorded run spec lacks dataset, loss, batch_size, seed or encoder_name", "rerun the probe job", field="spec")
    axes["epochs"] = int((spec.get("pretrain") or {}).get("epochs", 0))
    definition = document.get("macro_f1_definition") or macro_f1_definition(axes["dataset"])
    values = {}
    for split, section_name in SPLIT_SECTIONS.items():
        section = document.get(section_name) or {}
        row = {metric: section.get(metric) for metric in METRICS}
        row["macro_f1"] = section.get(macro_f1_key(definition), row["macro_f1"])
        values[split] = {metric: math.nan if value is None else float(value) for metric, value in row.items()}
    probe = {"best_epoch": int(document.get("best_epoch", 0)), "epochs": int((spec.get("probe") or {}).get("epochs", 0))}
    return {**axes, "definition": definition, "values": values, "probe": probe, "commit": run_commit(metrics_path.parent), "probe_dir": metrics_path.parent}


def most_shared(runs: Sequence[Mapping[str, Any]], axis: str) -> dict[str, Any]:
    """Per dataset the value of `axis` most of its runs share (ties: the smallest)."""
    counts: dict[str, Counter] = {}
    for run in runs:
        counts.setdefault(run["dataset"], Counter())[run[axis]] += 1
    return {dataset: min(tally, key=lambda value: (-tally[value], value)) for dataset, tally in counts.items()}


def check_one_commit(runs: Sequence[Mapping[str, Any]], which: str, allow_mixed_commits: bool) -> list[str]:
    """The commits of a group of runs; InputError unless they are one clean commit (or mixing is allowed)."""
    commits = sorted({run["commit"] for run in runs})
    if runs and not allow_mixed_commits and (len(commits) != 1 or commits[0].endswith("+dirty") or commits[0] == "unknown"):
        raise InputError(
            None, f"the {which} runs were made by {commits}, not by one clean commit",
            "commit your changes and rerun the runs of other commits (delete their run folders), or pass --allow-mixed-commits for a draft",
            field="mscl_commit",
        )  # fmt: skip
    return commits


# ---------------------------------------------------------------------------- rows


def metric_rows(runs: Sequence[Mapping[str, Any]], with_batch: bool, with_schedule: bool = False) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        for split in SPLIT_SECTIONS:
            row = {"dataset": run["dataset"], "method": run["loss"], "seed": run["seed"], "split": split}
            if with_batch:
                row["batch_size"] = run["batch_size"]
            if with_schedule:
                row.update(encoder=run["encoder_name"], epochs=run["epochs"])
            rows.append({**row, **run["values"][split], "commit": run["commit"]})
    return rows


def bucket_rows(run: Mapping[str, Any], train_counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """Head and tail bucket metrics of one run's test scores."""
    _, y_true, scores, names = read_test_scores(run["probe_dir"])
    counts = np.array([train_counts.get(name, 0) for name in names], dtype=np.int64)
    macro = bucket_macro_f1(y_true, scores, counts, head_share=HEAD_SHARE, definition=run["definition"])
    _, average_precision = per_label_auc_and_ap(y_true, scores)
    rows = []
    for bucket, labels in zip(("head", "tail"), head_tail_split(counts, HEAD_SHARE)):
        ap = average_precision[labels]
        rows.append({
            "dataset": run["dataset"], "method": run["loss"], "seed": run["seed"], "bucket": bucket, "labels": int(labels.size),
            "macro_f1": macro[bucket], "map": float(np.nanmean(ap)) if np.isfinite(ap).any() else math.nan, "commit": run["commit"],
        })  # fmt: skip
    return rows


def convergence_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The monitor's checks in a trained run's train_log.csv (none for untrained methods)."""
    log = run["probe_dir"].parent / "pretrain" / "train_log.csv"
    if not log.is_file():
        return []
    rows = []
    with log.open(encoding="utf-8") as handle:
        for line in csv.DictReader(handle):
            if line.get("val_map_readout"):
                rows.append({
                    "dataset": run["dataset"], "method": run["loss"], "encoder": run["encoder_name"], "seed": run["seed"], "epoch": int(line["epoch"]),
                    "val_map_readout": float(line["val_map_readout"]), "loss": float(line["loss"]), "commit": run["commit"],
                })  # fmt: skip
    return rows


def tuning_rows(selection_path: Path) -> list[dict[str, Any]]:
    fix = "rerun `python -m mscl select-setting`"
    selection = read_json(selection_path, "tuning selection", fix, fix)
    rows = []
    for entry in selection["grid"]:
        for seed, value in sorted(entry["per_seed"].items(), key=lambda item: int(item[0])):
            rows.append({
                "dataset": selection["dataset"], "method": selection["method"], "batch_size": selection["batch_size"],
                "setting": entry["setting"], "seed": int(seed), "metric": selection["metric"], "value": value,
                "chosen": entry["setting"] == selection["chosen"],
            })  # fmt: skip
    return rows


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """CSV with fractions written in full precision (repr) and NaN as an empty field."""
    lines = [",".join(columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row[column]
            cells.append("" if isinstance(value, float) and math.isnan(value) else repr(value) if isinstance(value, float) else str(value))
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def sort_key(row: Mapping[str, Any]) -> tuple:
    return tuple(str(row.get(k, "")) if k not in ("seed", "epoch", "batch_size") else int(row.get(k, 0)) for k in ("dataset", "method", "encoder", "batch_size", "seed", "split", "bucket", "epoch", "setting"))


def export(metrics_paths: Sequence[Path], selections: Sequence[Path], train_stats: Mapping[str, Path], out_dir: Path, allow_mixed_commits: bool = False) -> dict[str, int]:
    """Write CLAIM_DATA_FILES (mscl.layout) into out_dir; return the row count of each."""
    every_run = [read_run(Path(path)) for path in metrics_paths]
    if not every_run:
        raise InputError(None, "no runs given", "pass every test run's probe metrics.json with --metrics", field="--metrics")
    main_encoder = most_shared(every_run, "encoder_name")
    runs = [run for run in every_run if run["encoder_name"] == main_encoder[run["dataset"]]]
    schedule = [run for run in every_run if run["encoder_name"] != main_encoder[run["dataset"]]]
    commits = check_one_commit(runs, "main", allow_mixed_commits)
    schedule_commits = check_one_commit(schedule, "schedule-check", allow_mixed_commits)
    main_batch = most_shared(runs, "batch_size")
    main = [run for run in runs if run["batch_size"] == main_batch[run["dataset"]]]
    missing = sorted({run["dataset"] for run in main} - set(train_stats))
    if missing:
        raise InputError(None, f"no --train-stats for {missing}", "pass DATASET=data/processed/DATASET/stats.json for every dataset", field="--train-stats")
    counts = {dataset: read_train_counts(path) for dataset, path in train_stats.items()}
    tables = {
        "runs.csv": (sorted(metric_rows(main, False), key=sort_key), RUNS_COLUMNS),
        "batch_size.csv": (sorted(metric_rows(runs, True), key=sort_key), BATCH_COLUMNS),
        "buckets.csv": (sorted((r for run in main for r in bucket_rows(run, counts[run["dataset"]])), key=sort_key), BUCKET_COLUMNS),
        "convergence.csv": (sorted((r for run in main for r in convergence_rows(run)), key=sort_key), CONVERGENCE_COLUMNS),
        "tuning.csv": (sorted((r for path in selections for r in tuning_rows(Path(path))), key=sort_key), TUNING_COLUMNS),
        "probes.csv": (sorted(({"dataset": r["dataset"], "method": r["loss"], "seed": r["seed"], **r["probe"], "commit": r["commit"]} for r in main), key=sort_key), PROBE_COLUMNS),
        "schedule.csv": (sorted(metric_rows(schedule, False, with_schedule=True), key=sort_key), SCHEDULE_COLUMNS),
        "schedule_convergence.csv": (sorted((r for run in schedule for r in convergence_rows(run)), key=sort_key), SCHEDULE_CONVERGENCE_COLUMNS),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in CLAIM_DATA_FILES:
        write_text(out_dir / name, csv_text(*tables[name]))
    for which, group in (("main", commits), ("schedule-check", schedule_commits)):
        if len(group) > 1:
            print(f"claim-export: WARNING: the {which} runs come from {len(group)} commits {group} (--allow-mixed-commits)", file=sys.stderr)
    return {name: len(rows) for name, (rows, _) in tables.items()}


def parse_pairs(items: Sequence[str], option: str) -> dict[str, Path]:
    pairs = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(None, f"{option} {item!r} is not DATASET=PATH", f"write {option} yeast=data/processed/yeast/stats.json", field=option)
        pairs[name] = Path(path)
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("claim-export", argv)
    counts = export(args.metrics, args.selections, parse_pairs(args.train_stats, "--train-stats"), args.out_dir, args.allow_mixed_commits)
    print("claim-export: wrote " + ", ".join(f"{name} ({rows} rows)" for name, rows in counts.items()) + f" to {args.out_dir}")
    return 0

