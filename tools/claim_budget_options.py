"""What the claim check would cost on 2 idle cores under other protocols, priced from the CPU
and wall seconds its jobs actually used (docs/claim-check.md, "Cost").

    .venv/bin/python tools/claim_budget_options.py [--results results/claim] [--config config/claim.yaml]

Every pretrain and probe job's CPU and wall time is read as `python -m mscl bench dag` reads
it (CPU from the job-server worker's usage line in its log, else its benchmark file; wall from
its benchmark file). The script sums them per dataset (the encoder of the config's experiment
block named after the dataset), tuning and test runs apart, adds a schedule check's runs (a
block whose encoder is not its dataset's: Amendments 2 and 4) and the preprocessing jobs'
benchmark files, and re-prices the DAG: with one tuning seed instead of two (half the tuning
runs), without the batch-size sweep, without the schedule check, and with all three.

One more option asks whether the plateau requirement and the budget can hold together: the
longer schedule as the dataset's only one, without the batch-size sweep. The schedule check's
runs replace the same methods' runs at the main schedule; the pretraining of the dataset's
other trained methods (supervised BCE) is priced at the epochs' ratio times its cost at the
main schedule, an estimate, since they never ran at the longer one. Their probe jobs stay as
they are: a probe's cost does not depend on how long its encoder trained. Tuning stays at the
main schedule, as in the schedule check.

Two prices per option, in minutes on 2 cores:
- CPU time / 2 cores, a lower bound: start-up, set-up and scheduling come on top;
- the jobs' own wall time / 2 cores, an estimate that includes each job's start-up and
  outputs; it is only as good as the run was idle (a job sharing its core with other work
  takes longer), and it leaves out scheduling gaps (bench dag's "scheduling and idle cores").
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from mscl.bench.dag import measured
from mscl.report.cost import read_benchmark
from mscl.tuning import UNTRAINED_METHODS

CORES = 2
STAGES = ("pretrain", "probe")  # the jobs of one run


@dataclass(frozen=True)
class Cost:
    """Summed seconds of some jobs: their CPU time and their own wall time."""

    cpu: float = 0.0
    wall: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.cpu + other.cpu, self.wall + other.wall)

    def __sub__(self, other: Cost) -> Cost:
        return Cost(self.cpu - other.cpu, self.wall - other.wall)

    def __truediv__(self, divisor: float) -> Cost:
        return Cost(self.cpu / divisor, self.wall / divisor)

    def __mul__(self, factor: float) -> Cost:
        return Cost(self.cpu * factor, self.wall * factor)

    @classmethod
    def of(cls, usage: dict[str, float]) -> Cost:
        """One job's, from `read_benchmark`'s (or `measured`'s) figures."""
        return cls(usage["cpu_s"], usage["wall_s"])


def total(costs: Iterable[Cost]) -> Cost:
    return sum(costs, Cost())


def job_costs(logs: Path, pattern: str) -> Cost:
    """The matching jobs' summed CPU and wall seconds (jobs without a benchmark file are skipped)."""
    found = (measured(str(path), logs.parent, Path(".")) for path in sorted(logs.glob(pattern)))
    return total(Cost.of(usage) for usage in found if usage)


def run_cost(
    logs: Path, tuning: bool, dataset: str, encoder: str, batch: str = "*", method: str = "*", stages: Iterable[str] = STAGES
) -> Cost:
    """Seconds of the pretrain and probe jobs (or `stages`) of one dataset x encoder (x batch folder, x method)."""
    prefix = "tuning/" if tuning else ""
    return total(job_costs(logs, f"{prefix}{stage}/{dataset}/{encoder}/{method}/{batch}/**/*.log") for stage in stages)


def longer_schedule_only(logs: Path, config: dict, dataset: str, main: str, longer: str) -> Cost:
    """How much the dataset's test runs would cost more if the longer schedule were its only
    one: the main schedule's runs of the methods the longer block reran drop out (the longer
    runs are in the DAG's price already), and every other trained method of the main block
    (its batch sizes only, not a sweep's) has its pretraining priced at the epochs' ratio, an
    estimate; probes and untrained references cost the same either way."""
    epochs = {name: config["encoders"][name]["pretrain"]["epochs"] for name in (main, longer)}
    batches = [f"bs{size}" for size in config["experiments"][dataset]["batch_sizes"]]
    rerun = {path.name for path in (logs / "pretrain" / dataset / longer).iterdir()}
    trained = {path.name for path in (logs / "pretrain" / dataset / main).iterdir()} - set(UNTRAINED_METHODS)

    def cost(methods: set[str], stages: Iterable[str] = STAGES) -> Cost:
        return total(run_cost(logs, False, dataset, main, batch, method, stages) for method in sorted(methods) for batch in batches)

    return cost(trained - rerun, ["pretrain"]) * (epochs[longer] / epochs[main] - 1) - cost(rerun)


def preprocessing_cost(results: Path) -> Cost:
    """Seconds in the preprocessing jobs' benchmark files (the embedding, mainly)."""
    found = (read_benchmark(path) for path in sorted((results / "benchmarks" / "preprocess").glob("*.tsv")))
    return total(Cost.of(usage) for usage in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/claim"), help="the claim run's results folder")
    parser.add_argument("--config", type=Path, default=Path("config/claim.yaml"), help="the claim config that made it")
    args = parser.parse_args()
    logs = args.results / "logs"
    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    blocks = config["experiments"]
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
        (block["datasets"][0], main_encoder[block["datasets"][0]], encoder)
        for name, block in blocks.items() if name not in main_encoder
        for encoder in block["encoders"] if encoder != main_encoder.get(block["datasets"][0], encoder)
    ]  # fmt: skip

    tuning = {dataset: run_cost(logs, True, dataset, encoder) for dataset, encoder in main_encoder.items()}
    test = {dataset: run_cost(logs, False, dataset, encoder) for dataset, encoder in main_encoder.items()}
    sweep = total(run_cost(logs, False, dataset, encoder, batch) for dataset, encoder, batch in sweeps)
    schedule = total(run_cost(logs, False, dataset, encoder) for dataset, _, encoder in longer)
    preprocessing = preprocessing_cost(args.results)
    whole = total(tuning.values()) + total(test.values()) + schedule + preprocessing
    half_tuning = total(tuning.values()) / 2

    by_dataset = "; ".join(f"{d} tuning {tuning[d].cpu:.0f}, test {test[d].cpu:.0f}" for d in main_encoder)
    checked = f"; the schedule check {schedule.cpu:.0f}" if longer else ""
    print(f"CPU seconds by dataset: {by_dataset}; the batch-size sweep (among the test runs) {sweep.cpu:.0f}{checked}; preprocessing {preprocessing.cpu:.0f}")
    options = [
        ("the DAG as run (2 tuning seeds)", whole),
        ("with one tuning seed instead of two", whole - half_tuning),
        ("without the batch-size sweep", whole - sweep),
        ("with one tuning seed and without the batch-size sweep", whole - half_tuning - sweep),
    ]
    if longer:
        options += [
            ("without the schedule check", whole - schedule),
            ("without the batch-size sweep and the schedule check", whole - sweep - schedule),  # keeps 2 tuning seeds
            ("one tuning seed, no batch-size sweep, no schedule check", whole - half_tuning - sweep - schedule),
            ("only the longer schedule, no batch-size sweep (estimate)", whole - sweep + total(longer_schedule_only(logs, config, *run) for run in longer)),
        ]
    print(f"\n{'option':56s} {'core-min':>9s} {f'CPU min / {CORES} cores (at least)':>30s} {f'job wall min / {CORES} cores':>24s}")
    for name, cost in options:
        print(f"{name:56s} {cost.cpu / 60:9.0f} {cost.cpu / 60 / CORES:30.0f} {cost.wall / 60 / CORES:24.0f}")


if __name__ == "__main__":
    main()
