"""`python -m mscl bench scale`: peak memory and wall time of every stage at the paper's sizes.

For each scale S it writes `make-synthetic DATASET --scale S` (the paper's split sizes x S,
its label count; `mscl.demo.synthetic`) and runs each stage as the workflow would, one child
process per stage: pretrain (a few steps), probe (feature extraction over every split, then
PROBE_EPOCHS epochs, test scores and metrics), the label-prior `chance` run, `collect` (which
recomputes the frequency-bucket metrics from the test scores) and the dataset's results
table. Text datasets also run the PLM-ICD probe, whose label vectors are streamed (recomputed
every epoch from the texts: `mscl.train.probe`). Encoders are small stand-ins of the paper's
kinds (a tiny RoBERTa, PLM-ICD's chunking and label attention on it, a ResNet-18 at 64 px):
what is measured is what grows with N and L, not the encoder's own cost.

Each row gives the child's wall seconds and peak RSS (`ru_maxrss` of its own rusage; a
DataLoader worker would be a process of its own). Linux carries a parent's peak RSS at the
fork into its child's, so this process stays light (no torch, numpy only for the fits) and
makes even the tiny models in a child: every figure includes a floor of about 20 MiB. With two
or more scales, a least-squares line in the number of samples per stage is extrapolated to
S = 1 (the fit is printed). Figures only, never pass/fail; docs/scale.md gives the measured
tables with their commands.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from mscl import cli
from mscl.bench.memory import run_measured

PROBE_EPOCHS = 2
PRETRAIN_STEPS = 3
# dataset key prefix -> its results table (`python -m mscl table NAME`).
TABLES = {"coco": "image", "voc": "image", "nuswide": "image", "aapd": "aapd"}


@dataclass(frozen=True)
class Row:
    dataset: str
    scale: float
    samples: int  # train + val + test
    labels: int
    stage: str
    wall_s: float
    peak_rss_mib: float


def table_of(dataset: str) -> str:
    if dataset in TABLES:
        return TABLES[dataset]
    return "mimic_full" if dataset.endswith("_full") else "mimic_50"


def encoder_specs(dataset: str, models: Path, plm_icd: bool) -> dict[str, dict]:
    """The stand-in encoders run on `dataset`: name -> (encoder spec, batch size, image size);
    PLM-ICD's on MIMIC only when `plm_icd` (its label attention makes every document cost
    seconds on a CPU: it is measured at small S, docs/scale.md)."""
    if dataset in ("coco", "voc", "nuswide"):
        return {"resnet18": {"encoder": {"kind": "resnet", "arch": "resnet18", "weights": "none"}, "batch_size": 32, "image_size": 64}}
    roberta = str(models / "roberta")
    specs = {"roberta-tiny": {"encoder": {"kind": "hf", "path": roberta, "max_length": 512, "pooling": "cls"}, "batch_size": 8}}
    if plm_icd and dataset.startswith("mimic"):
        specs["plmicd-tiny"] = {"encoder": {"kind": "plm_icd", "path": roberta, "max_length": 3072, "chunk_size": 128, "attention_dim": 32}, "batch_size": 8}
    return specs


def run_spec(dataset: str, name: str, encoder: dict) -> dict:
    """PLM-ICD's stand-in takes one pretraining step and one probe epoch: both cost seconds a document."""
    plm_icd = encoder["encoder"]["kind"] == "plm_icd"
    pretrain = {"epochs": 1, "max_steps_per_epoch": 1 if plm_icd else PRETRAIN_STEPS, "monitor_every": 0}
    if "image_size" in encoder:
        pretrain["image_size"] = encoder["image_size"]
    return {
        "dataset": dataset, "encoder_name": name, "encoder": encoder["encoder"], "loss": "simdissim",
        "batch_size": encoder["batch_size"], "pretrain": pretrain, "probe": {"epochs": 1 if plm_icd else PROBE_EPOCHS},
    }  # fmt: skip


def mscl(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "mscl", *arguments]


def measure_scale(dataset: str, scale: float, workdir: Path, models: Path, skip: Sequence[str], threads: int, plm_icd: bool) -> list[Row]:
    """Every stage on `dataset` at `scale`; the data and runs are removed afterwards."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    env.pop("MSCL_JOB_SERVER", None)  # each stage in a process of its own, measured
    data = workdir / f"{dataset}_x{scale:g}"
    runs = workdir / f"runs_x{scale:g}"
    rows: list[Row] = []

    def stage(name: str, command: list[str], **extra_env: str) -> None:
        wall_s, peak = run_measured(command, workdir / f"{name}_x{scale:g}.log", {**env, **extra_env})
        stats = json.loads((data / "stats.json").read_text())
        rows.append(Row(dataset, scale, stats["total"], stats["num_labels"], name, wall_s, peak))
        print(f"bench scale: {dataset} x {scale:g}: {name}: {wall_s:.1f} s, {peak:.0f} MiB", file=sys.stderr, flush=True)

    stage("make-synthetic", mscl("make-synthetic", dataset, "--scale", str(scale), "--out", str(data)))
    metrics = []
    encoders = encoder_specs(dataset, models, plm_icd)
    for name, encoder in encoders.items():
        run = runs / dataset / name / "simdissim" / f"bs{encoder['batch_size']}" / "seed0"
        spec = json.dumps(run_spec(dataset, name, encoder))
        if "pretrain" not in skip:
            stage(f"pretrain {name}", mscl("pretrain", "--data", str(data), "--out", str(run / "pretrain"), "--spec", spec))
        if "probe" not in skip:
            # PLM-ICD's label vectors are streamed, as at the paper's sizes (their cache would be
            # N x L x d float16: 357 GB for the 64-wide stand-in on MIMIC-IV-ICD10-Full, 4.3 TB at d 768).
            streamed = {"MSCL_LABEL_VECTOR_BUDGET_MB": "0"} if encoder["encoder"]["kind"] == "plm_icd" else {}
            stage(f"probe {name}", mscl("probe", "--data", str(data), "--pretrained", str(run / "pretrain"), "--out", str(run / "probe"), "--spec", spec), **streamed)
            metrics.append(run / "probe" / "metrics.json")
    chance = runs / dataset / "chance" / "chance" / "bs0" / "seed0" / "probe"
    stage("chance", mscl("chance", "--data", str(data), "--out", str(chance), "--dataset", dataset))
    all_runs = runs / "all_runs.csv"
    roles = [f"{name}={'plm_icd' if name.startswith('plm') else 'resnet' if name.startswith('resnet') else 'roberta'}" for name in encoders]
    stage("collect", mscl("collect", "--metrics", *map(str, metrics), str(chance / "metrics.json"), "--roles", *roles, "chance=reference",
                          "--train-counts", f"{dataset}={data / 'stats.json'}", "--out", str(all_runs)))  # fmt: skip
    stage("table", mscl("table", table_of(dataset), "--runs", str(all_runs), "--out-prefix", str(runs / "table")))
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(runs, ignore_errors=True)
    return rows


def fit_lines(rows: Sequence[Row], full_samples: int) -> list[str]:
    """Per stage measured at two or more sizes: least-squares lines of peak RSS and wall time in
    the number of samples, and their values at `full_samples` (S = 1)."""
    import numpy as np

    lines = []
    for stage in dict.fromkeys(row.stage for row in rows):
        points = [row for row in rows if row.stage == stage]
        if len({row.samples for row in points}) < 2:
            continue
        n = np.array([row.samples for row in points], dtype=float)
        rss_slope, rss_base = np.polyfit(n, [row.peak_rss_mib for row in points], 1)
        time_slope, time_base = np.polyfit(n, [row.wall_s for row in points], 1)
        lines.append(
            f"{stage:<24} RSS = {rss_base:8.0f} MiB + {rss_slope * 1024:8.1f} KiB/sample -> {rss_base + rss_slope * full_samples:8.0f} MiB at S = 1; "
            f"time = {time_base:7.1f} s + {time_slope * 1000:7.2f} ms/sample -> {time_base + time_slope * full_samples:8.0f} s at S = 1"
        )
    return lines


def format_rows(rows: Sequence[Row]) -> list[str]:
    header = f"{'dataset':<18} {'scale':>6} {'samples':>8} {'labels':>7} {'stage':<24} {'wall s':>8} {'peak RSS MiB':>13}"
    return [header] + [
        f"{row.dataset:<18} {row.scale:>6g} {row.samples:>8,} {row.labels:>7,} {row.stage:<24} {row.wall_s:>8.1f} {row.peak_rss_mib:>13.0f}" for row in rows
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench scale", argv)
    if "pretrain" in args.skip and "probe" not in args.skip:
        cli.build_parser("bench scale").error("--skip pretrain needs --skip probe too: the probe reads the encoder that pretrain writes")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mscl-bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        models = workdir / "models"
        if not {"pretrain", "probe"} <= set(args.skip):
            run_measured(mscl("make-tiny-models", "--out", str(models)), workdir / "models.log")
        rows = [row for scale in args.scales for row in measure_scale(args.dataset, scale, workdir, models, args.skip, args.threads, args.plm_icd)]
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"bench scale: {args.dataset}, {args.threads} thread(s) per stage, stand-in encoders (module docstring)")
    print("\n".join(format_rows(rows)))
    from mscl.demo.synthetic import paper_shape

    fits = fit_lines(rows, sum(paper_shape(args.dataset).sizes.values()))
    if fits:
        print("\nfitted to the scales above, extrapolated to the paper's size:")
        print("\n".join(fits))
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
            writer.writeheader()
            writer.writerows(asdict(row) for row in rows)
    return 0
