"""Compute cost of a run's training jobs from Snakemake's `benchmark:` files.

`python -m mscl table cost --metrics FILE...` takes each run's probe metrics.json and reads the
run's axes (dataset, encoder, loss, batch size, seed) from the spec recorded in it, as `collect`
does. Each of the run's training jobs (`mscl.layout.STAGES`: pretrain, probe) wrote its
benchmark file at the run's place in the layout, `{results}/benchmarks/{stage}/{RUN_NAME}.tsv`
(`mscl.layout.job_benchmark`, the function the workflow's rules name it with), {results} being
the folder that holds the run's own folder `{results}/runs/{RUN_NAME}`. The file is a TSV with
the header `s h:m:s max_rss max_vms max_uss max_pss io_in io_out mean_load cpu_time` (seconds,
MB, ...) and one row per repeat. A job counts once: its repeats are averaged. Fields Snakemake
could not measure ("-" or "NA") are NaN and left out of sums and maxima.

A job run by a worker of the job server did its work outside the process
Snakemake measured: its benchmark holds the right wall time but the thin job process's CPU
time and memory. The worker ends the job's log (`mscl.layout.job_log`) with its own CPU
seconds and peak RSS, and those replace the benchmark's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from mscl.errors import InputError
from mscl.layout import STAGES, job_benchmark, job_log, results_of_run, run_name
from mscl.report.collect import read_metrics_json, run_axes
from mscl.usage import parse_usage

REQUIRED_FIELDS = ("s", "max_rss", "cpu_time")
COST_COLUMNS = ("rule", "dataset", "encoder", "jobs", "cpu_hours", "wall_hours", "max_rss_gb")
SECONDS_PER_HOUR = 3600.0
MB_PER_GB = 1024.0  # Snakemake reports max_rss in MiB (psutil bytes / 1024**2)


def read_benchmark(path: str | Path, log: str | Path | None = None) -> dict[str, float]:
    """One job's wall seconds, CPU seconds and max RSS (MB), averaged over its repeats; CPU and
    RSS from the job server's worker when its `log` ends with the worker's usage line."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "benchmark file not found", "run the job first or drop its run from --metrics")
    frame = pd.read_csv(path, sep="\t", na_values=["-", "NA"])
    missing = [field for field in REQUIRED_FIELDS if field not in frame.columns]
    if missing or frame.empty:
        raise InputError(path, f"not a Snakemake benchmark TSV (no {missing[0] if missing else 'rows'!r})", "re-run the job", field=missing[0] if missing else None)
    values = frame[list(REQUIRED_FIELDS)].apply(pd.to_numeric, errors="coerce").mean()
    measured = {"wall_s": float(values["s"]), "cpu_s": float(values["cpu_time"]), "max_rss_mb": float(values["max_rss"])}
    worker = parse_usage(Path(log).read_text(encoding="utf-8", errors="replace")) if log is not None and Path(log).is_file() else None
    if worker is not None:
        measured.update(cpu_s=worker["cpu_s"], max_rss_mb=worker["max_rss_mib"])
    return measured


def run_jobs(metrics_path: str | Path) -> list[dict]:
    """The measured training jobs of the run whose probe wrote `metrics_path`: one row per stage
    with the rule (the stage), the run's axes and `read_benchmark`'s figures."""
    axes = run_axes(metrics_path, read_metrics_json(metrics_path))
    name = run_name(axes["dataset"], axes["encoder"], axes["loss"], axes["batch_size"], axes["seed"])
    results = results_of_run(Path(metrics_path).parent.parent, name)
    if results is None:
        raise InputError(
            metrics_path, f"the run's folder is not runs/{name}, where its recorded spec places it",
            "pass the probe metrics.json files the workflow's runs write, in their own folders", field="--metrics",
        )  # fmt: skip
    return [
        {"rule": stage, **axes, **read_benchmark(job_benchmark(str(results), stage, name), job_log(str(results), stage, name))}
        for stage in STAGES
    ]


def cost_frame(metrics_paths: Sequence[str | Path]) -> pd.DataFrame:
    """Per rule x dataset x encoder: jobs, total CPU hours, total wall hours, max RSS (GB), sorted."""
    jobs = pd.DataFrame([job for path in metrics_paths for job in run_jobs(path)])
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
