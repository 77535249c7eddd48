"""What the claim check would cost on 2 idle cores under other protocols, priced from the CPU
seconds its jobs actually used (docs/claim-check.md, "Cost").

    .venv/bin/python tools/claim_budget_options.py [--results results/claim]

Every pretrain and probe job's CPU time is read as `python -m mscl bench dag` reads it (the
job-server worker's usage line in its log, else its benchmark file); it barely depends on what
else ran. This script sums them per dataset, for tuning and test
runs apart, and re-prices the main DAG: with one tuning seed instead of two (half the tuning
runs), and with Fashion-MNIST at 50 epochs in tuning and test (every trained run at the mean
cost of a 50-epoch run of the schedule check, `resnet8-2x`). The bound is CPU time / 2 cores:
scheduling and start-up come on top (bench dag measured 5.7% for the final run).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import mean

from mscl.bench.dag import measured

MAIN = {"yeast": "mlp", "fashion_mnist": "resnet8", "debtags": "mlp-minilm"}
LONGER = {"fashion_mnist": "resnet8-2x", "debtags": "mlp-minilm-2x"}
FASHION_TRAINED = ("all", "any", "mulsupcon", "simdissim", "bce")
CORES = 2


def cpu_seconds(logs: Path, pattern: str) -> list[float]:
    """Each matching job's CPU seconds (jobs without a benchmark file are skipped)."""
    found = (measured(str(path), logs.parent, Path(".")) for path in sorted(logs.glob(pattern)))
    return [usage["cpu_s"] for usage in found if usage]


def run_cost(logs: Path, tuning: bool, dataset: str, encoder: str, method: str = "*") -> list[float]:
    """CPU seconds of the pretrain and probe jobs of one dataset x encoder (x method)."""
    prefix = "tuning/" if tuning else ""
    return [c for stage in ("pretrain", "probe") for c in cpu_seconds(logs, f"{prefix}{stage}/{dataset}/{encoder}/{method}/**/*.log")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/claim"), help="the claim run's results folder")
    parser.add_argument("--embed-seconds", type=float, default=618.4, help="CPU seconds of embed_debtags (its benchmark file; bench dag's per-rule table)")
    args = parser.parse_args()
    logs = args.results / "logs"

    tuning = {dataset: sum(run_cost(logs, True, dataset, encoder)) for dataset, encoder in MAIN.items()}
    test = {dataset: sum(run_cost(logs, False, dataset, encoder)) for dataset, encoder in MAIN.items()}
    schedule = sum(sum(run_cost(logs, False, dataset, encoder)) for dataset, encoder in LONGER.items())
    main_dag = sum(tuning.values()) + sum(test.values()) + args.embed_seconds

    # Fashion-MNIST at 50 epochs: each trained run (pretrain + probe) costs a schedule-check run.
    long_pretrains = cpu_seconds(logs, "pretrain/fashion_mnist/resnet8-2x/**/*.log")
    long_probes = cpu_seconds(logs, "probe/fashion_mnist/resnet8-2x/**/*.log")
    if not (long_pretrains and long_probes):
        raise SystemExit(f"{logs}: no finished 50-epoch Fashion-MNIST run (resnet8-2x) to price a longer schedule with; run the schedule check first")
    long_run = mean(long_pretrains) + mean(long_probes)
    fm_tuning_runs = len(cpu_seconds(logs, "tuning/pretrain/fashion_mnist/resnet8/**/*.log"))
    fm_trained_runs = sum(len(cpu_seconds(logs, f"pretrain/fashion_mnist/resnet8/{m}/**/*.log")) for m in FASHION_TRAINED)
    fm_trained_cost = sum(sum(run_cost(logs, False, "fashion_mnist", "resnet8", m)) for m in FASHION_TRAINED)
    fm_at_50 = (fm_tuning_runs + fm_trained_runs) * long_run + test["fashion_mnist"] - fm_trained_cost
    main_fm50 = main_dag - tuning["fashion_mnist"] - test["fashion_mnist"] + fm_at_50
    half_tuning = sum(tuning.values()) / 2
    half_tuning_fm50 = half_tuning - tuning["fashion_mnist"] / 2 + fm_tuning_runs * long_run / 2

    print("CPU seconds by dataset (main DAG): " + "; ".join(f"{d} tuning {tuning[d]:.0f}, test {test[d]:.0f}" for d in MAIN) + f"; debtags embedding {args.embed_seconds:.0f}")
    print(f"a 50-epoch Fashion-MNIST run (pretrain + probe, means over {len(long_pretrains)} runs): {long_run:.1f} CPU s; {fm_tuning_runs} tuning and {fm_trained_runs} trained test runs at 25 epochs")
    options = [
        ("main DAG as run (2 tuning seeds, Fashion-MNIST 25 epochs)", main_dag),
        ("  + the schedule check (Amendment 2), as run", main_dag + schedule),
        ("main DAG with one tuning seed instead of two", main_dag - half_tuning),
        ("Fashion-MNIST at 50 epochs in tuning and test, 2 tuning seeds", main_fm50),
        ("Fashion-MNIST at 50 epochs, one tuning seed", main_fm50 - half_tuning_fm50),
    ]
    print(f"\n{'option':64s} {'core-min':>9s} {f'min on {CORES} idle cores, at least':>30s}")
    for name, seconds in options:
        print(f"{name:64s} {seconds / 60:9.0f} {seconds / 60 / CORES:30.0f}")


if __name__ == "__main__":
    main()
