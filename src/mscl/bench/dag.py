"""`python -m mscl bench dag`: where a finished Snakemake run spent its wall time.

    python -m mscl bench dag --log .snakemake/log/<run>.snakemake.log [--results results]

A run that was stopped and resumed has one Snakemake log per segment: pass them all (`--log A B
C`) to get each segment's table and their sum (the idle time between segments is not counted).

Splits the run's capacity (wall time x the cores Snakemake was given, in core-seconds) into:

- training compute, of test and tuning runs alike: the pretraining loops (the last `elapsed` of
  each job's per-epoch lines),
  the probes' feature extraction and linear-layer fitting, and the frozen-prefix passes of
  `cache_prefix` jobs (model compute done once instead of in every run), read from the jobs'
  own logs under `{results}/logs/`;
- training-job overhead: the rest of each pretrain/probe/cache_prefix job's wall time (its
  `benchmark:` file): interpreter, torch and transformers start-up, model and data set-up,
  writing outputs;
- other jobs: demo generation, preprocessing, tables and figures (Snakemake's job start and
  finish stamps, 1 s resolution);
- scheduling and idle cores: capacity minus every job's wall time (Snakemake's own work
  between jobs, and cores left idle while the DAG narrows).

Prints the table, the wall and CPU seconds and job count per rule, the CPU seconds of the
training jobs per dataset and encoder (the axes in their log paths), the jobs' summed CPU time as a
lower bound on the wall time on idle cores (CPU seconds barely change when other work shares
the machine; wall seconds do), and the five slowest jobs. Figures only; nothing is asserted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Sequence

import pandas as pd

from mscl import cli
from mscl.errors import InputError
from mscl.layout import benchmark_of_log
from mscl.report.cost import read_benchmark

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?rule (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
LOG = re.compile(r"^\s+log: (\S+)")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
CORES = re.compile(r"^Provided cores: (\d+)$")
ELAPSED = re.compile(r"elapsed ([\d.]+) s")
FEATURES = re.compile(r"^probe: features_\w+\.pt: \d+ samples in ([\d.]+) s")
PREFIX = re.compile(r"^cache-prefix: \w+: \d+ samples, \d+ tokens, ([\d.]+) s")
TRAINING_RULES = ("pretrain", "probe", "cache_prefix", "tuning_pretrain", "tuning_probe")
# A training job's log: {results}/logs/[tuning/]{stage}/{dataset}/{encoder}/... (mscl.layout.job_log).
RUN_AXES = re.compile(r"/logs/(?:tuning/)?(?:pretrain|probe)/(?P<dataset>[^/]+)/(?P<encoder>[^/]+)/")
PARTS = (
    "training compute",
    "training-job overhead (start-up, set-up, outputs)",
    "other jobs (data, tables, figures)",
    "scheduling and idle cores",
)


@dataclass
class Job:
    jobid: int
    rule: str
    started: datetime
    finished: datetime | None = None
    log: str | None = None

    @property
    def stamped_seconds(self) -> float:
        return (self.finished - self.started).total_seconds() if self.finished else 0.0


def parse_snakemake_log(path: Path) -> tuple[list[Job], int, float]:
    """(finished jobs, cores, wall seconds from the first to the last time stamp)."""
    if not path.is_file():
        raise InputError(path, "Snakemake log not found", "pass a file from .snakemake/log/ of a finished run")
    jobs: dict[int, Job] = {}
    stamp: datetime | None = None
    first = last = None
    cores = None
    pending: Job | None = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if match := STAMP.match(line):
            stamp = datetime.strptime(" ".join(match.group(1).split()), "%a %b %d %H:%M:%S %Y")
            first, last = first or stamp, stamp
        elif match := CORES.match(line):
            cores = int(match.group(1))
        elif (match := RULE.match(line)) and stamp is not None:
            pending = Job(-1, match.group(1), stamp)
        elif pending is not None and (match := LOG.match(line)):
            pending.log = match.group(1)
        elif pending is not None and (match := JOBID.match(line)):
            pending.jobid = int(match.group(1))
            jobs[pending.jobid] = pending
            pending = None
        elif (match := FINISHED.match(line)) and int(match.group(1)) in jobs:
            jobs[int(match.group(1))].finished = stamp
    if cores is None or first is None:
        raise InputError(path, "no 'Provided cores' line or no time stamps", "pass the log of a run that executed jobs (not a dry run)")
    return [job for job in jobs.values() if job.finished], cores, (last - first).total_seconds()


def training_seconds(log_file: Path) -> float:
    """Seconds a pretrain/probe/cache_prefix job spent computing with its model, from its log:
    the per-epoch lines, the probe's feature passes and the prefix cache's split passes."""
    if not log_file.is_file():
        return 0.0
    lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    loop = [float(m.group(1)) for line in lines if line.startswith(("pretrain epoch", "probe epoch")) and (m := ELAPSED.search(line))]
    passes = [float(m.group(1)) for line in lines if (m := FEATURES.match(line) or PREFIX.match(line))]
    return (loop[-1] if loop else 0.0) + sum(passes)


def measured(log: str | None, results: Path, workdir: Path) -> dict[str, float] | None:
    """The job's wall and CPU seconds from its benchmark file ({results}/benchmarks/<same path
    as its log>.tsv), CPU from the job server's worker where it ran the job; None without one."""
    path = benchmark_of_log(results, Path(log)) if log else None
    if path is None or not (workdir / path).is_file():
        return None
    return read_benchmark(workdir / path, workdir / log)


def breakdown(log_path: Path, results: Path, workdir: Path) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """(the time table, every job's rule and wall and CPU seconds, slowest first, the cores)."""
    jobs, cores, wall = parse_snakemake_log(log_path)
    capacity = wall * cores
    training = overhead = other = 0.0
    rows = []
    for job in jobs:
        seconds, benchmark = job.stamped_seconds, measured(job.log, results, workdir)
        if job.rule in TRAINING_RULES and job.log:
            seconds = benchmark["wall_s"] if benchmark else seconds
            compute = min(training_seconds(workdir / job.log), seconds)
            training, overhead = training + compute, overhead + seconds - compute
        else:
            other += seconds
        cpu = benchmark["cpu_s"] if benchmark else float("nan")
        rows.append({"rule": job.rule, "job": job.log or f"jobid {job.jobid}", "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)})
    idle = capacity - training - overhead - other
    parts = (training, overhead, other, idle)
    table = time_table(parts, f"capacity ({wall:.0f} s wall x {cores} cores)", capacity)
    return table, pd.DataFrame(rows).sort_values("seconds", ascending=False), cores


def time_table(parts: Sequence[float], capacity_label: str, capacity: float) -> pd.DataFrame:
    table = pd.DataFrame([*zip(PARTS, parts), (capacity_label, capacity)], columns=["part", "core_seconds"])
    table["share_percent"] = (100 * table["core_seconds"] / capacity).round(1)
    table["core_seconds"] = table["core_seconds"].round(1)
    return table


def combined(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Several segments' tables summed part by part (their capacities too)."""
    sums = [sum(float(table["core_seconds"].iloc[row]) for table in tables) for row in range(len(PARTS) + 1)]
    return time_table(sums[:-1], f"capacity (the {len(tables)} segments)", sums[-1])


def per_rule(jobs: pd.DataFrame) -> pd.DataFrame:
    grouped = jobs.groupby("rule").agg(jobs=("seconds", "count"), wall_seconds=("seconds", "sum"), cpu_seconds=("cpu_seconds", lambda s: s.sum(min_count=1)))
    return grouped.sort_values("wall_seconds", ascending=False).reset_index()


def per_dataset(jobs: pd.DataFrame) -> pd.DataFrame:
    """CPU seconds of the pretrain and probe jobs (tuning runs apart) per dataset x encoder."""
    axes = jobs["job"].str.extract(RUN_AXES)
    training = jobs.assign(**axes, tuning=jobs["rule"].str.startswith("tuning_"))[axes["dataset"].notna()]
    table = training.pivot_table(index=["dataset", "encoder"], columns="tuning", values="cpu_seconds", aggfunc="sum", fill_value=0.0)
    table = table.reindex(columns=[True, False], fill_value=0.0).rename(columns={True: "tuning_cpu_s", False: "test_cpu_s"})
    table["jobs"] = training.groupby(["dataset", "encoder"]).size()
    table["core_minutes"] = ((table["tuning_cpu_s"] + table["test_cpu_s"]) / 60).round(1)
    table[["tuning_cpu_s", "test_cpu_s"]] = table[["tuning_cpu_s", "test_cpu_s"]].round(0)
    return table[["jobs", "tuning_cpu_s", "test_cpu_s", "core_minutes"]].reset_index()


def cpu_bound_line(jobs: pd.DataFrame, cores: int) -> str:
    """The jobs' CPU seconds summed, and the wall time they need at the least on `cores` idle
    cores: a lower bound that holds however busy the machine was when the run was measured."""
    measured_jobs = jobs["cpu_seconds"].notna()
    total = float(jobs.loc[measured_jobs, "cpu_seconds"].sum())
    return (
        f"CPU time of the {int(measured_jobs.sum())} jobs with a benchmark: {total:.0f} core-seconds; on {cores} idle cores "
        f"that is at least {total / cores / 60:.0f} min of wall time ({int((~measured_jobs).sum())} jobs without a benchmark not counted)"
    )


def print_table(table: pd.DataFrame) -> None:
    print(table.to_string(index=False))
    print(f"\nnon-training share of the wall time: {100 - float(table['share_percent'].iloc[0]):.1f}%")


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench dag", argv)
    segments = [breakdown(log, args.results, args.workdir) for log in args.log]
    for number, (log, (table, _, _)) in enumerate(zip(args.log, segments), start=1):
        if len(segments) > 1:
            print(f"segment {number}: {log.name}")
        print_table(table)
        print()
    jobs = pd.concat([rows for _, rows, _ in segments], ignore_index=True)
    if len(segments) > 1:
        print(f"all {len(segments)} segments:")
        print_table(combined([table for table, _, _ in segments]))
        print()
    print("per rule (jobs' own wall and CPU seconds, summed):")
    print(per_rule(jobs).to_string(index=False))
    print("\nper dataset and encoder (training jobs' CPU seconds, tuning runs apart):")
    print(per_dataset(jobs).to_string(index=False))
    print("\n" + cpu_bound_line(jobs, segments[0][2]))
    print("\nslowest jobs:")
    print(jobs.sort_values("seconds", ascending=False).head(5).to_string(index=False))
    return 0
