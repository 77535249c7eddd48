"""What the claim check would cost on 2 idle cores under other protocols, priced from the CPU
seconds its jobs actually used (docs/claim-check.md, "Cost").

    .venv/bin/python tools/claim_budget_options.py [--results results/claim] [--config config/claim.yaml]

Every pretrain and probe job's CPU time is read as `python -m mscl bench dag` reads it (the
job-server worker's usage line in its log, else its benchmark file); it barely depends on what
else ran. The script sums them per dataset (the encoder of the config's experiment block named
after the dataset), tuning and test runs apart, adds a schedule check's runs (a block whose
encoder is not its dataset's: Amendments 2 and 4) and the preprocessing jobs' benchmark files,
and re-prices the DAG: with one tuning seed instead of two (half the tuning runs), without the
batch-size sweep, without the schedule check, and with all three. The bound is CPU time / 2 cores: scheduling and start-up
come on top (bench dag's "non-training share").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from mscl.bench.dag import measured
from mscl.report.cost import read_benchmark

CORES = 2


def cpu_seconds(logs: Path, pattern: str) -> list[float]:
    """Each matching job's CPU seconds (jobs without a benchmark file are skipped)."""
    found = (measured(str(path), logs.parent, Path(".")) for path in sorted(logs.glob(pattern)))
    return [usage["cpu_s"] for usage in found if usage]


def run_cost(logs: Path, tuning: bool, dataset: str, encoder: str, batch: str = "*") -> float:
    """CPU seconds of the pretrain and probe jobs of one dataset x encoder (x batch folder)."""
    prefix = "tuning/" if tuning else ""
    return sum(c for stage in ("pretrain", "probe") for c in cpu_seconds(logs, f"{prefix}{stage}/{dataset}/{encoder}/*/{batch}/**/*.log"))


def preprocessing_seconds(results: Path) -> float:
    """CPU seconds in the preprocessing jobs' benchmark files (the embedding, mainly)."""
    return sum(read_benchmark(path)["cpu_s"] for path in sorted((results / "benchmarks" / "preprocess").glob("*.tsv")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/claim"), help="the claim run's results folder")
    parser.add_argument("--config", type=Path, default=Path("config/claim.yaml"), help="the claim config that made it")
    args = parser.parse_args()
    logs = args.results / "logs"
    blocks = yaml.safe_load(args.config.read_text(encoding="utf-8"))["experiments"]
    main_encoder = {name: block["encoders"][0] for name, block in blocks.items() if block["datasets"] == [name]}
    # The other blocks of those datasets and encoders (the batch-size sweep): their test runs
    # are among the dataset's, in their own batch folders.
    sweeps = [
        (block["datasets"][0], block["encoders"][0], f"bs{size}")
        for name, block in blocks.items() if name not in main_encoder and main_encoder.get(block["datasets"][0]) == block["encoders"][0]
        for size in block["batch_sizes"]
    ]  # fmt: skip
    # Blocks of another encoder of the same dataset: a schedule check's longer schedules.
    longer = [
        (block["datasets"][0], encoder)
        for name, block in blocks.items() if name not in main_encoder
        for encoder in block["encoders"] if encoder != main_encoder.get(block["datasets"][0], encoder)
    ]  # fmt: skip

    tuning = {dataset: run_cost(logs, True, dataset, encoder) for dataset, encoder in main_encoder.items()}
    test = {dataset: run_cost(logs, False, dataset, encoder) for dataset, encoder in main_encoder.items()}
    sweep = sum(run_cost(logs, False, dataset, encoder, batch) for dataset, encoder, batch in sweeps)
    schedule = sum(run_cost(logs, False, dataset, encoder) for dataset, encoder in longer)
    preprocessing = preprocessing_seconds(args.results)
    whole = sum(tuning.values()) + sum(test.values()) + schedule + preprocessing
    half_tuning = sum(tuning.values()) / 2

    by_dataset = "; ".join(f"{d} tuning {tuning[d]:.0f}, test {test[d]:.0f}" for d in main_encoder)
    checked = f"; the schedule check {schedule:.0f}" if longer else ""
    print(f"CPU seconds by dataset: {by_dataset}; the batch-size sweep (among the test runs) {sweep:.0f}{checked}; preprocessing {preprocessing:.0f}")
    options = [
        ("the DAG as run (2 tuning seeds)", whole),
        ("with one tuning seed instead of two", whole - half_tuning),
        ("without the batch-size sweep", whole - sweep),
        ("with one tuning seed and without the batch-size sweep", whole - half_tuning - sweep),
    ]
    if longer:
        options += [
            ("without the schedule check", whole - schedule),
            ("one tuning seed, no batch-size sweep, no schedule check", whole - half_tuning - sweep - schedule),
        ]
    print(f"\n{'option':56s} {'core-min':>9s} {f'min on {CORES} idle cores, at least':>30s}")
    for name, seconds in options:
        print(f"{name:56s} {seconds / 60:9.0f} {seconds / 60 / CORES:30.0f}")


if __name__ == "__main__":
    main()
