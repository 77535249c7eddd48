"""`python -m mscl progress`: where a grid stands (done, running, failed, to go), the device
hours spent and an estimate of what is left.

    python -m mscl progress [--configfile FILE ...] [--jobs N] [--snakefile FILE]

Run it where `snakemake` runs, with the same `--configfile` arguments, while a run goes on
(locally or on SLURM) or after it. It only reads: it never starts, stops or locks a run.

**The grid** comes from Snakemake itself: `snakemake --summary --dry-run --nolock` lists every
output file of the workflow's DAG with its rule, whether it exists and whether Snakemake would
make it (again). That is exactly the grid the config plans, tuning runs included, with nothing
here re-expanding it; `--nolock` takes no lock (safe beside a running Snakemake) and
`--dry-run` writes no log. It costs a parse of the workflow: about 2 s on one core for the
embedded default and for the paper's grid (docs/watching.md).

**What is running** comes from what Snakemake leaves in its working folder (`.snakemake/`, the
default file-based metadata): it marks every output of a job it starts as incomplete (one file
per output under `incomplete/`, named by the output's path in URL-safe base64, holding the
cluster job id of a SLURM job) and unmarks it when the job ends, done or failed; a job it
was running when it was stopped (Ctrl-C) or killed stays marked. A running Snakemake holds
`locks/`. So a training job is

- done: its outputs exist and Snakemake plans nothing for it;
- running: marked incomplete while a Snakemake holds the folder (on a cluster: queued or
  running, with its job id); its run time so far is the mark's age, and a pretraining's epoch
  comes from its train_log.csv;
- interrupted: marked incomplete with no Snakemake running (stopped or killed): the next run
  reruns it, and pretraining resumes from its checkpoint;
- failed: not made and not marked, but its log exists (it ran and ended without its outputs):
  the log to read is named (on SLURM, SLURM's own log of the job is under the profile's
  `slurm-logdir`, logs/slurm/rule_<rule>/<wildcards>/);
- to go: the rest, finished jobs Snakemake would run again included (a changed param).

**Device hours spent**: every finished training job's Snakemake benchmark file (wall seconds,
CPU seconds; the job server's worker usage line in the job's log replaces the latter, as in
the cost table, `mscl.report.cost`), on the device its versions.json records: wall hours x
GPUs for a job on CUDA (a pretraining's `world_size` processes, one GPU each), CPU hours (CPU
time) for a job on the CPU. Failed attempts have no benchmark and are not counted.

**The estimate**: a job left counts the mean wall time and device hours of the finished jobs of
the same rule (a tuning run's rule counts as its test run's), encoder and dataset, else of the
same rule and encoder on other datasets (marked `~`), else it is unknown (named); a running job
counts what is left of that mean. Wall time left is the sum over jobs left divided by the
number of jobs at once (`--jobs`, by default the number running now, at least 1); jobs that
wait on others are counted as if they could start now.

Exit status 0, or 2 when the config or Snakemake's answer cannot be read.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from mscl import cli
from mscl.errors import InputError
from mscl.layout import CHANCE, STAGES, job_benchmark, job_log
from mscl.provenance import CHECKOUT
from mscl.workflow_config import ConfigError, load_config

SNAKEMAKE_TIMEOUT_S = 600.0
SUMMARY_HEADER = ("output_file", "date", "rule", "log-file(s)", "status", "plan")
# What the summary's plan column says of a job Snakemake would run.
PLANNED = "update pending"
# A tuning run's rule (workflow/rules/train.smk: `use rule pretrain as tuning_pretrain`) is its
# test run's for the estimate.
TUNING_RULE_PREFIX = "tuning_"
SECONDS_PER_HOUR = 3600.0
STATES = ("done", "running", "interrupted", "failed", "to go")


# ------------------------------------------------------------------ what Snakemake says


@dataclass(frozen=True)
class Output:
    """One row of `snakemake --summary`."""

    path: str  # as the workflow names it (relative to the working folder)
    rule: str
    exists: bool
    status: str  # "ok", "missing", "params changed", ...
    planned: bool  # Snakemake would run its job


def parse_summary(text: str) -> list[Output]:
    """The rows of `snakemake --summary` output (lines before its header are Snakemake's messages)."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if tuple(line.split("\t")) == SUMMARY_HEADER)
    except StopIteration:
        raise ValueError("no summary table in Snakemake's output") from None
    rows = []
    for line in lines[start + 1 :]:
        fields = line.split("\t")
        if len(fields) != len(SUMMARY_HEADER):
            continue
        path, date, rule, _, status, plan = fields
        rows.append(Output(path, rule, exists=date != "-", status=status, planned=plan == PLANNED))
    return rows


def default_snakefile(workdir: Path) -> Path:
    """The Snakefile snakemake finds in `workdir`, else this checkout's."""
    for name in ("Snakefile", "snakefile", "workflow/Snakefile", "workflow/snakefile"):
        if (workdir / name).is_file():
            return workdir / name
    return CHECKOUT / "Snakefile"


def ask_snakemake(configfiles: Sequence[str], snakefile: Path) -> list[Output]:
    """Every output of the workflow's DAG, from `snakemake --summary --dry-run --nolock` run
    in this folder with these config files."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--summary", "--dry-run", "--nolock", "--cores", "1"]
    if configfiles:
        command += ["--configfile", *configfiles]
    done = subprocess.run(command, capture_output=True, text=True, timeout=SNAKEMAKE_TIMEOUT_S, check=False)
    try:
        if done.returncode != 0:
            raise ValueError(f"it exited with {done.returncode}")
        return parse_summary(done.stdout)
    except ValueError as error:
        tail = "\n".join((done.stderr + done.stdout).strip().splitlines()[-15:])
        raise InputError(" ".join(command[2:]), f"Snakemake did not list the workflow's outputs ({error}):\n{tail}",
                         "run it where snakemake runs, with the same --configfile arguments; fix what Snakemake reports") from None  # fmt: skip


@dataclass(frozen=True)
class Mark:
    """An output Snakemake marked incomplete: its job started and has not ended."""

    since: float  # when the job started (the mark's mtime), seconds since the epoch
    cluster_job: str | None  # the SLURM (or other cluster) job id, for a job submitted to one


@dataclass
class Bookkeeping:
    """What Snakemake's working folder says of its jobs (the default file-based metadata)."""

    marks: dict[str, Mark] = field(default_factory=dict)  # output path -> its incomplete mark
    locked: bool = False  # a Snakemake process holds the folder

    @classmethod
    def read(cls, folder: Path) -> "Bookkeeping":
        """From `folder` (the working folder's .snakemake)."""
        marks = {}
        for path, key in encoded_paths(folder / "incomplete"):
            try:
                since, text = path.stat().st_mtime, path.read_text(encoding="utf-8")
            except OSError:
                continue  # unmarked meanwhile: the job ended
            try:
                cluster_job = json.loads(text).get("external_jobid")
            except (ValueError, AttributeError):
                cluster_job = None
            marks[key] = Mark(since, cluster_job)
        return cls(marks, locked=any((folder / "locks").glob("*.output.lock")))


def encoded_paths(folder: Path) -> Iterable[tuple[Path, str]]:
    """(file, the output path it stands for) for every record under `folder`: Snakemake names a
    record by the output's path in URL-safe base64, cut into name-length pieces, each piece but
    the last a folder prefixed with "@"."""
    if not folder.is_dir():
        return
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        pieces = path.relative_to(folder).parts
        encoded = "".join(piece[1:] for piece in pieces[:-1]) + pieces[-1]
        try:
            yield path, base64.urlsafe_b64decode(encoded).decode()
        except (ValueError, UnicodeDecodeError):
            continue  # not a record (Snakemake's migration flag)


# ----------------------------------------------------------------------- training jobs


@dataclass
class TrainingJob:
    """One pretrain or probe job of the grid (a tuning run's too), with what is known of it."""

    rule: str
    folder: Path  # <results>/runs/<run>/<stage> (tuning runs: <results>/tuning/<run>/<stage>)
    stage: str  # "pretrain" or "probe"
    name: str  # the run's place, mscl.layout.RUN_NAME (TUNE_RUN_NAME for a tuning run)
    tuning: bool
    outputs: list[Output] = field(default_factory=list)
    state: str = "to go"  # done, running, interrupted, failed, to go
    mark: Mark | None = None  # while running or interrupted

    @property
    def dataset(self) -> str:
        return self.name.split("/")[0]

    @property
    def encoder(self) -> str:
        return self.name.split("/")[1]

    @property
    def comparable(self) -> str:
        """The rule whose finished jobs estimate this one (a tuning rule counts as its test run's)."""
        return self.rule.removeprefix(TUNING_RULE_PREFIX)

    def log(self, results: Path) -> Path:
        return Path(job_log(str(results), self.stage, self.name, self.tuning))

    def benchmark(self, results: Path) -> Path:
        return Path(job_benchmark(str(results), self.stage, self.name, self.tuning))


def training_jobs(outputs: Iterable[Output], results: Path) -> tuple[list[TrainingJob], list[Output]]:
    """The training jobs among the DAG's outputs (those in a run's stage folder under
    <results>/runs or <results>/tuning; the label prior's are no training job), and every
    other output."""
    jobs: dict[Path, TrainingJob] = {}
    others = []
    for output in outputs:
        folder = Path(output.path).parent
        job = jobs.get(folder) or job_of(output.rule, folder, results)
        if job is None:
            others.append(output)
            continue
        jobs[folder] = job
        job.outputs.append(output)
    return list(jobs.values()), others


def job_of(rule: str, folder: Path, results: Path) -> TrainingJob | None:
    for tree, tuning in (("runs", False), ("tuning", True)):
        base = results / tree
        if folder.name in STAGES and folder.is_relative_to(base):
            name = folder.parent.relative_to(base).as_posix()
            if name.split("/")[1] != CHANCE:
                return TrainingJob(rule, folder, folder.name, name, tuning)
    return None


def judge(job: TrainingJob, bookkeeping: Bookkeeping, results: Path) -> None:
    """Set the job's state from Snakemake's summary and bookkeeping (the module docstring)."""
    marks = [bookkeeping.marks[output.path] for output in job.outputs if output.path in bookkeeping.marks]
    if marks:
        job.mark = marks[0]
        job.state = "running" if bookkeeping.locked else "interrupted"
    elif all(output.exists for output in job.outputs) and not any(output.planned for output in job.outputs):
        job.state = "done"
    elif not any(output.exists for output in job.outputs) and job.log(results).is_file():
        job.state = "failed"
    else:
        job.state = "to go"


# ------------------------------------------------------------------------------- costs


@dataclass(frozen=True)
class Cost:
    """One finished job's wall seconds and device hours (GPU hours on CUDA, CPU hours on the CPU)."""

    wall_s: float
    gpu_hours: float
    cpu_hours: float


def job_cost(job: TrainingJob, results: Path) -> Cost | None:
    """What a finished job cost, from its benchmark file and versions.json; None when either is
    missing or unreadable."""
    from mscl.report.cost import read_benchmark

    try:
        measured = read_benchmark(job.benchmark(results), job.log(results))
        versions = json.loads((job.folder / "versions.json").read_text(encoding="utf-8"))
    except (InputError, OSError, ValueError):
        return None
    wall_s = measured["wall_s"]
    if versions.get("device") == "cuda":
        return Cost(wall_s, wall_s * int(versions.get("world_size") or 1) / SECONDS_PER_HOUR, 0.0)
    return Cost(wall_s, 0.0, measured["cpu_s"] / SECONDS_PER_HOUR)


@dataclass
class Estimate:
    """What the jobs left will take, by the means of comparable finished jobs."""

    wall_s: float = 0.0  # one after the other
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    from_other_datasets: list[TrainingJob] = field(default_factory=list)
    unknown: list[TrainingJob] = field(default_factory=list)


def mean_cost(costs: Sequence[Cost]) -> Cost:
    count = len(costs)
    return Cost(sum(c.wall_s for c in costs) / count, sum(c.gpu_hours for c in costs) / count, sum(c.cpu_hours for c in costs) / count)


def estimate(left: Iterable[TrainingJob], finished: Sequence[tuple[TrainingJob, Cost]], now: float) -> Estimate:
    """The module docstring's estimate; `finished`: every finished job with its cost."""
    by_dataset: dict[tuple[str, str, str], list[Cost]] = {}
    by_encoder: dict[tuple[str, str], list[Cost]] = {}
    for job, cost in finished:
        by_dataset.setdefault((job.comparable, job.encoder, job.dataset), []).append(cost)
        by_encoder.setdefault((job.comparable, job.encoder), []).append(cost)
    result = Estimate()
    for job in left:
        costs = by_dataset.get((job.comparable, job.encoder, job.dataset))
        if costs is None:
            costs = by_encoder.get((job.comparable, job.encoder))
            if costs is None:
                result.unknown.append(job)
                continue
            result.from_other_datasets.append(job)
        mean = mean_cost(costs)
        share = 1.0
        if job.state == "running" and job.mark is not None and mean.wall_s > 0:
            share = max(0.0, mean.wall_s - (now - job.mark.since)) / mean.wall_s
        result.wall_s += mean.wall_s * share
        result.gpu_hours += mean.gpu_hours * share
        result.cpu_hours += mean.cpu_hours * share
    return result


# ------------------------------------------------------------------------------ output


def count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def last_error(log: Path) -> str:
    """The last line of a job's log that names an error (an mscl error or a traceback's end), cut short."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip()[:200] for line in reversed(lines) if "error" in line.lower()), "")


def hours(value: float) -> str:
    """Device hours with two decimals, or three significant digits below one hour."""
    return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def epoch_progress(job: TrainingJob) -> str:
    """ "epoch K of N, " for a pretraining that has logged K of its N epochs (its train_log.csv), else ""."""
    if job.stage != "pretrain":
        return ""
    try:
        epochs = json.loads((job.folder / "resolved_spec.json").read_text(encoding="utf-8"))["pretrain"]["epochs"]
        logged = len((job.folder / "train_log.csv").read_text(encoding="utf-8").splitlines()) - 1
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return f"epoch {max(0, logged)} of {epochs}, "


def table(jobs: Sequence[TrainingJob]) -> list[str]:
    """Per dataset x encoder x stage: the jobs in each state, and in all."""
    counts: dict[tuple[str, str, str], Counter] = {}
    for job in jobs:
        stage = f"tuning {job.stage}" if job.tuning else job.stage
        counts.setdefault((job.dataset, job.encoder, stage), Counter())[job.state] += 1
    header = ("dataset", "encoder", "stage", *STATES, "of")
    rows = [(*key, *(str(count[state]) for state in STATES), str(sum(count.values()))) for key, count in sorted(counts.items())]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) if i < 3 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in [header, *rows]]


def report(jobs: Sequence[TrainingJob], others: Sequence[Output], results: Path, jobs_at_once: int | None, now: float, out=sys.stdout) -> None:
    def say(line: str = "") -> None:
        print(line, file=out)

    runs = {job.folder.parent for job in jobs if not job.tuning}
    tuning = {job.folder.parent for job in jobs if job.tuning}
    say(f"{count(len(runs), 'run')}" + (f" and {count(len(tuning), 'tuning run')}" if tuning else "") + f" in {results} (the workflow's grid, from snakemake --summary)")
    say()
    for line in table(jobs):
        say(line)
    other_left = Counter(output.rule for output in others if not output.exists or output.planned)
    say(f"other outputs: {sum(not o.exists or o.planned for o in others)} of {len(others)} to make"
        + (f" ({', '.join(f'{rule} {count}' for rule, count in sorted(other_left.items()))})" if other_left else ""))  # fmt: skip

    running = [job for job in jobs if job.state == "running"]
    if running:
        say()
        say(f"Running ({len(running)}):")
        for job in running:
            where = f", cluster job {job.mark.cluster_job}" if job.mark.cluster_job else ""
            say(f"  {job.name} {job.stage}: {epoch_progress(job)}{duration(now - job.mark.since)} so far{where} (log: {job.log(results)})")
    for state, title in (("failed", "Failed, read the log"), ("interrupted", "Interrupted (no Snakemake runs; the next run reruns them, pretraining resumes from its checkpoint)")):
        stuck = [job for job in jobs if job.state == state]
        if stuck:
            say()
            say(f"{title} ({len(stuck)}):")
            for job in stuck:
                say(f"  {job.name} {job.stage}: {epoch_progress(job)}log {job.log(results)}")
                if state == "failed" and (error := last_error(job.log(results))):
                    say(f"    {error}")
    rerun = [job for job in jobs if job.state == "to go" and all(o.exists for o in job.outputs)]
    if rerun:
        reasons = Counter(next(o.status for o in job.outputs if o.planned) for job in rerun)
        say()
        say(f"To go includes {len(rerun)} finished job(s) Snakemake would run again: " + ", ".join(f"{reason} ({count})" for reason, count in reasons.items()))

    finished = [(job, cost) for job in jobs if job.state == "done" and (cost := job_cost(job, results)) is not None]
    done = sum(job.state == "done" for job in jobs)
    say()
    spent_gpu = sum(cost.gpu_hours for _, cost in finished)
    spent_cpu = sum(cost.cpu_hours for _, cost in finished)
    unmeasured = f" ({done - len(finished)} finished jobs without a benchmark or versions.json not counted)" if done > len(finished) else ""
    say(f"Spent: {hours(spent_gpu)} GPU-hours, {hours(spent_cpu)} CPU-hours by {count(len(finished), 'finished training job')}{unmeasured}")
    left = [job for job in jobs if job.state != "done"]
    if not left:
        say("Left: nothing, every training job of the grid is done")
        return
    guess = estimate(left, finished, now)
    at_once = jobs_at_once or max(1, len(running))
    whose = "--jobs" if jobs_at_once else ("the number running now" if running else "none running now")
    known = len(left) - len(guess.unknown)
    if known:
        approximate = f" (~ {len(guess.from_other_datasets)} of them from other datasets' jobs)" if guess.from_other_datasets else ""
        say(f"Left: {count(len(left), 'training job')}; for {known} of them about {hours(guess.gpu_hours)} GPU-hours and {hours(guess.cpu_hours)} CPU-hours, "
            f"{duration(guess.wall_s / at_once)} of wall time at {at_once} job(s) at once ({whose}; --jobs N for another){approximate}")  # fmt: skip
    if guess.unknown:
        kinds = Counter(f"{job.dataset}/{job.encoder}" for job in guess.unknown)
        say(f"Unknown for {count(len(guess.unknown), 'job')}, nothing comparable has finished (dataset/encoder: jobs): "
            + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())))  # fmt: skip
    say("How: each job left counts the mean wall time and device hours of the finished jobs of its rule, encoder and dataset "
        "(else of its rule and encoder on other datasets); a running job what is left of that mean.")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("progress", argv)
    try:
        config, _ = load_config(args.configfile)
        snakefile = args.snakefile or default_snakefile(Path.cwd())
        results = Path(config["paths"]["results"])
        outputs = ask_snakemake(args.configfile or [], snakefile)
    except (InputError, ConfigError) as error:
        print(f"mscl progress: error: {error}", file=sys.stderr)
        return 2
    if not results.is_dir():
        print(f"mscl progress: nothing has run in {Path.cwd()} yet (no {results}, config paths.results): "
              "if the grid ran elsewhere, run this where snakemake runs", file=sys.stderr)  # fmt: skip
    jobs, others = training_jobs(outputs, results)
    bookkeeping = Bookkeeping.read(Path(".snakemake"))
    for job in jobs:
        judge(job, bookkeeping, results)
    report(jobs, others, results, args.jobs, time.time())
    return 0
