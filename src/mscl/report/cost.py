"""Compute cost of a run from Snakemake's `benchmark:` files.

Each training/probe job writes `{results}/benchmarks/{rule}/{dataset}/{encoder}/{loss}/bs{batch}/seed{seed}.tsv`,
a TSV with the header `s h:m:s max_rss max_vms max_uss max_pss io_in io_out mean_load cpu_time`
(seconds, MB, ...) and one row per repeat. A job counts once: its repeats are averaged.
Fields Snakemake could not measure ("-" or "NA") are NaN and left out of sums and maxima.

A job run by a worker of the job server (mscl.jobserver) did its work outside the process
Snakemake measured: its benchmark holds the right wall time but the thin job process's CPU
time and memory. The worker ends the job's log, `{results}/logs/<same path>.log`, with its own
CPU seconds and peak RSS, and those replace the benchmark's.

Unlike `collect`, which reads a run's axes from the spec recorded in its metrics.json, this
module reads them from the benchmark file's path (`parse_benchmark_path`, the one parser of
run paths in the package): the file is Snakemake's own, holds measurements only, and has no
metrics.json beside it, so the path the rule's `benchmark:` directive writes
(`run_benchmark` in workflow/rules/common.smk) is the only record of whose cost it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import pandas as pd

from mscl.errors import InputError
from mscl.jobserver import parse_usage

BENCHMARK_PATH = re.compile(
    r"(?:^|/)(?P<rule>[^/]+)/(?P<dataset>[^/]+)/(?P<encoder>[^/]+)/(?P<loss>[^/]+)/bs(?P<batch_size>\d+)/seed(?P<seed>\d+)\.tsv$"
)
REQUIRED_FIELDS = ("s", "max_rss", "cpu_time")
COST_COLUMNS = ("rule", "dataset", "encoder", "jobs", "cpu_hours", "wall_hours", "max_rss_gb")
SECONDS_PER_HOUR = 3600.0
MB_PER_GB = 1024.0  # Snakemake reports max_rss in MiB (psutil bytes / 1024**2)


def parse_benchmark_path(path: str | Path) -> dict[str, str]:
    """(rule, dataset, encoder, loss, batch_size, seed) of a benchmark file's path (see the
    module docstring for why the path, not a spec, is read here)."""
    match = BENCHMARK_PATH.search(Path(path).as_posix())
    if match is None:
        raise InputError(
            path,
            "the path does not follow {rule}/{dataset}/{encoder}/{loss}/bs{batch}/seed{seed}.tsv",
            "pass the files the rules' benchmark: directives write",
            field="--benchmarks",
        )
    return match.groupdict()


def read_benchmark(path: str | Path) -> dict[str, float]:
    """One job's wall seconds, CPU seconds and max RSS (MB), averaged over its repeats."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "benchmark file not found", "run the job first or drop the file from --benchmarks")
    frame = pd.read_csv(path, sep="\t", na_values=["-", "NA"])
    missing = [field for field in REQUIRED_FIELDS if field not in frame.columns]
    if missing or frame.empty:
        raise InputError(path, f"not a Snakemake benchmark TSV (no {missing[0] if missing else 'rows'!r})", "re-run the job", field=missing[0] if missing else None)
    values = frame[list(REQUIRED_FIELDS)].apply(pd.to_numeric, errors="coerce").mean()
    measured = {"wall_s": float(values["s"]), "cpu_s": float(values["cpu_time"]), "max_rss_mb": float(values["max_rss"])}
    log = job_log(path)
    worker = parse_usage(log.read_text(encoding="utf-8", errors="replace")) if log is not None and log.is_file() else None
    if worker is not None:
        measured.update(cpu_s=worker["cpu_s"], max_rss_mb=worker["max_rss_mib"])
    return measured


def job_log(benchmark: Path) -> Path | None:
    """The log of the job that wrote `benchmark`: the same path under `logs/` instead of
    `benchmarks/` (run_log and run_benchmark in workflow/rules/common.smk), .log for .tsv."""
    return _sibling(benchmark, "benchmarks", "logs", ".log")


def job_benchmark(log: Path) -> Path | None:
    """The benchmark file of the job that wrote `log` (the inverse of `job_log`)."""
    return _sibling(log, "logs", "benchmarks", ".tsv")


def _sibling(path: Path, folder: str, other: str, suffix: str) -> Path | None:
    """`path` with its last `folder` component replaced by `other` and its suffix by `suffix`."""
    parts = path.parts
    if folder not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index(folder)
    return Path(*parts[:at], other, *parts[at + 1 :]).with_suffix(suffix)


def cost_frame(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Per rule x dataset x encoder: jobs, total CPU hours, total wall hours, max RSS (GB), sorted."""
    jobs = pd.DataFrame([{**parse_benchmark_path(path), **read_benchmark(path)} for path in paths])
    if jobs.empty:
        return pd.DataFrame(columns=list(COST_COLUMNS))
    grouped = jobs.groupby(["rule", "dataset", "encoder"], sort=True)
    table = grouped.agg(
        jobs=("wall_s", "size"),
        cpu_hours=("cpu_s", lambda s: s.sum(min_count=1) / SECONDS_PER_HOUR),
        wall_hours=("wall_s", lambda s: s.sum(min_count=1) / SECONDS_PER_HOUR),
        max_rss_gb=("max_rss_mb", lambda s: s.max() / MB_PER_GB),
    )
    return table.reset_index()[list(COST_COLUMNS)]
