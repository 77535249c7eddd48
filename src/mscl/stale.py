"""`python -m mscl stale`: the finished runs that today's code, packages or plugins would not make
the same way, and the command that reruns exactly them.

Run where `snakemake` runs, with the same `--configfile` arguments. Editing `src/mscl` reruns
nothing by itself (docs/reruns.md: a refactor must not requeue a GPU grid), so every job records
what made it in its versions.json as it ends (mscl.provenance): the mscl files it ran, the
distributions it imported, its plugins with their helpers and distributions. This command
compares each record with today's files and installed distributions:

- a job is stale when a file it ran changed or is gone, a distribution it imported is at
  another version or gone, Python is another version, a plugin file or helper it used changed,
  or it has no record (made before runs recorded what made them); a resumed pretraining also
  when an earlier segment ran other code;
- a change to comments and docstrings only does not count: when a file's hash differs and the
  record names a clean git commit, the file as it was is read from git and both are compared
  as syntax trees without docstrings (reported, not counted);
- a job that reads a stale job's output is stale too: a probe its pretraining, every run its
  prepared dataset (data/processed/<dataset>/versions.json) and frozen-prefix cache, a run of a
  tuned method its selection (stale when one of its tuning runs is).

It prints one line per stale run (its folder and why), `N of M runs stale`, and the command that
reruns exactly them: `snakemake --forcerun` with the outputs of the jobs that are stale by
themselves (what reads them follows). Nothing reruns by itself. Exit status 0 when no run is
stale, 1 when some are, 2 on a usage error (as `git diff --exit-code`). It only reads files: it
is safe while Snakemake runs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from mscl import cli
from mscl.errors import InputError
from mscl.io import read_json
from mscl.layout import RUN_NAME, STAGES
from mscl.provenance import SOURCE_ROOT, file_sha256, installed_distributions
from mscl.workflow_config import ConfigError, load_config

# The file whose presence means a job finished (what --forcerun names), by the job's folder.
FINAL_FILE = {"pretrain": "encoder.pt", "probe": "metrics.json"}
# How many changed files a line names before "and N more".
SHOWN_FILES = 3


@dataclass
class Job:
    """One finished job: its output, its record, the jobs whose outputs it reads."""

    label: str  # how a line names it: "pretrain", "probe", "prepared dataset coco", ...
    output: Path  # the file whose presence means done, and what --forcerun names
    record: Path | None  # its versions.json; None: a job judged by what it reads alone
    upstream: list["Job"] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why it is stale by itself
    cosmetic: list[str] = field(default_factory=list)  # files changed in comments/docstrings only

    # Read once every job's own reasons are in (`judge`): a tuned run's selection reads every
    # tuning run, which a grid has by the hundred.
    @functools.cached_property
    def stale_upstream(self) -> list["Job"]:
        return [job for job in self.upstream if job.stale]

    @functools.cached_property
    def stale(self) -> bool:
        return bool(self.reasons or self.stale_upstream)


# --------------------------------------------------------------------------- today's state


@functools.cache
def today_sha256(relative: str) -> str | None:
    path = SOURCE_ROOT / relative
    return file_sha256(path) if path.is_file() else None


@functools.cache
def file_then(commit: str, relative: str) -> bytes | None:
    """An mscl file at a commit of this checkout, or None (no git, unknown commit)."""
    try:
        done = subprocess.run(["git", "-C", str(SOURCE_ROOT), "show", f"{commit}:./{relative}"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def without_docstrings(source: bytes) -> str | None:
    """The syntax tree of Python source without docstrings, as text (None: not Python)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def cosmetic_change(relative: str, recorded: str, commit: str | None) -> bool:
    """Whether mscl file `relative`, recorded with hash `recorded` by a run of `commit`, differs
    from today's only in comments, docstrings and layout."""
    if not commit or commit.endswith("+dirty"):
        return False
    then = file_then(commit, relative)
    if then is None or hashlib.sha256(then).hexdigest() != recorded:
        return False
    tree = without_docstrings(then)
    return tree is not None and tree == without_docstrings((SOURCE_ROOT / relative).read_bytes())


# ------------------------------------------------------------------------ one record's reasons


def named_files(files: Sequence[str], what: str) -> str:
    shown = ", ".join(files[:SHOWN_FILES]) + (f" and {len(files) - SHOWN_FILES} more" if len(files) > SHOWN_FILES else "")
    return f"{shown} {what}"


def code_reasons(record: dict[str, Any], job: Job) -> list[str]:
    code = record.get("code")
    if not isinstance(code, dict) or not isinstance(code.get("files"), dict):
        commit = record.get("mscl_commit")
        return [f"no record of its code (made before runs recorded it{f', commit {commit[:12]}' if commit else ''})"]
    changed, removed = [], []
    for relative, recorded in sorted(code["files"].items()):
        now = today_sha256(relative)
        if now is None:
            removed.append(relative)
        elif now != recorded:
            if cosmetic_change(relative, recorded, record.get("mscl_commit")):
                job.cosmetic.append(relative)
            else:
                changed.append(relative)
    reasons = []
    if changed:
        reasons.append(named_files(changed, "changed"))
    if removed:
        reasons.append(named_files(removed, "removed"))
    for segment in code.get("earlier_segments") or []:
        if not isinstance(segment, dict):
            reasons.append("resumed from a checkpoint that did not record its code")
            continue
        older = sorted(relative for relative, recorded in segment.items() if today_sha256(relative) != recorded)
        if older:
            reasons.append(named_files(older, "differed in an earlier segment (resumed)"))
    return reasons


def version_changes(recorded: dict[str, str], installed: dict[str, str], whose: str = "") -> list[str]:
    return [
        f"{name} {version} -> {installed.get(name, 'not installed')}{whose}"
        for name, version in sorted(recorded.items())
        if installed.get(name) != version
    ]


def plugin_reasons(plugins: Iterable[dict[str, Any]], installed: dict[str, str]) -> list[str]:
    reasons = []
    for plugin in plugins:
        path = Path(plugin.get("path", ""))
        if not path.is_file():
            reasons.append(f"plugin {plugin.get('plugin')} is gone ({path})")
            continue
        if file_sha256(path) != plugin.get("sha256"):
            reasons.append(f"plugin {plugin.get('plugin')} changed")
        helpers = [
            name for name, recorded in sorted((plugin.get("local_modules") or {}).items())
            if not (path.parent / name).is_file() or file_sha256(path.parent / name) != recorded
        ]  # fmt: skip
        if helpers:
            reasons.append(named_files(helpers, f"(helpers of plugin {plugin.get('plugin')}) changed"))
        reasons += version_changes(plugin.get("distributions") or {}, installed, f" (imported by plugin {plugin.get('plugin')})")
    return reasons


def record_reasons(job: Job) -> list[str]:
    """Why `job`'s record says today's software would not make it the same way."""
    if not job.record.is_file():
        return ["no record of what made it (made before jobs recorded it)"]
    try:
        record = read_json(job.record, "versions.json", "rerun the job", "rerun the job")
    except InputError:
        return ["its versions.json is missing or unreadable"]
    installed = installed_distributions()
    reasons = code_reasons(record, job)
    if "code" in record:
        if record.get("python") not in (None, sys.version.split()[0]):
            reasons.append(f"python {record['python']} -> {sys.version.split()[0]}")
        reasons += version_changes(record.get("imported_distributions") or {}, installed)
        reasons += plugin_reasons(record.get("plugins") or [], installed)
    return reasons


# ------------------------------------------------------------------------------ the graph


@dataclass
class Run:
    folder: Path
    jobs: list[Job]  # its finished jobs, pretrain before probe


def find_runs(results: Path, processed: Path) -> tuple[list[Run], list[Job]]:
    """Every run folder under `results` with a finished job, with its jobs wired to what they
    read, and every job found (the shared ones too: prepared datasets, prefix caches,
    selections)."""
    shared: dict[Path, Job] = {}

    def dataset_job(dataset: str) -> list[Job]:
        stats = processed / dataset / "stats.json"
        if stats.is_file() and stats not in shared:
            shared[stats] = Job(f"prepared dataset {dataset}", stats, stats.with_name("versions.json"))
        return [shared[stats]] if stats in shared else []

    def prefix_job(dataset: str, encoder: str) -> list[Job]:
        cache = processed / dataset / "prefix" / f"{encoder}.pt"
        if cache.is_file() and cache not in shared:
            shared[cache] = Job(f"prefix cache {encoder}", cache, cache.with_name(f"{encoder}.versions.json"), dataset_job(dataset))
        return [shared[cache]] if cache in shared else []

    def run_of(folder: Path, dataset: str, encoder: str, selection: list[Job]) -> Run:
        inputs = [*dataset_job(dataset), *prefix_job(dataset, encoder), *selection]
        jobs: list[Job] = []
        for stage in STAGES:
            job = Job(stage, folder / stage / FINAL_FILE[stage], folder / stage / "versions.json", [*inputs, *jobs])
            if job.output.is_file():
                jobs.append(job)
        return Run(folder, jobs)

    runs: list[Run] = []
    # Tuning runs, grouped under the selection they decide (dataset/encoder/loss/bs<batch>).
    tuning_of: dict[Path, list[Job]] = {}
    for folder in sorted({record.parent.parent for record in (results / "tuning").glob("*/*/*/*/*/seed*/*/versions.json")}):
        dataset, encoder = folder.relative_to(results / "tuning").parts[:2]
        run = run_of(folder, dataset, encoder, [])
        if run.jobs:
            runs.append(run)
            tuning_of.setdefault(folder.parent.parent.relative_to(results / "tuning"), []).extend(run.jobs)
    selections = {
        group: Job("selected setting", results / "tuning" / group / "selected.json", None, jobs)
        for group, jobs in tuning_of.items()
        if (results / "tuning" / group / "selected.json").is_file()
    }
    depth = len(Path(RUN_NAME).parts)  # dataset/encoder/loss/bs<batch>/seed<seed>
    for folder in sorted({record.parent.parent for record in (results / "runs").glob("/".join(["*"] * (depth + 1)) + "/versions.json")}):
        dataset, encoder, loss, batch = folder.relative_to(results / "runs").parts[:4]
        selection = selections.get(Path(dataset, encoder, loss, batch))
        run = run_of(folder, dataset, encoder, [selection] if selection else [])
        if run.jobs:
            runs.append(run)
    return runs, [*shared.values(), *selections.values(), *(job for run in runs for job in run.jobs)]


def judge(jobs: Iterable[Job]) -> None:
    """Fill every recorded job's own reasons."""
    for job in jobs:
        if job.record is not None:
            job.reasons = record_reasons(job)


# ------------------------------------------------------------------------------ the output


def why(job: Job) -> str:
    parts = list(job.reasons)
    for upstream in job.stale_upstream:
        parts.append(f"reads the stale {upstream.label}" + ("" if upstream.label in STAGES else f" ({upstream.output.parent})"))
    return "; ".join(parts)


def rerun_command(configfiles: Sequence[str], outputs: Sequence[Path]) -> str:
    """The snakemake command that reruns the jobs of `outputs` and what reads them (--forcerun
    last: it takes every word after it)."""
    words = ["snakemake"]
    if configfiles:
        words += ["--configfile", *configfiles]
    words += ["--forcerun", *map(str, outputs)]
    return shlex.join(words)


def report(runs: Sequence[Run], jobs: Sequence[Job], configfiles: Sequence[str]) -> int:
    """Print the stale runs, the count and the rerun command; the exit status."""
    stale_runs = [run for run in runs if any(job.stale for job in run.jobs)]
    for run in stale_runs:
        print(f"{run.folder}: " + "; ".join(f"{job.label}: {why(job)}" for job in run.jobs if job.stale))
    cosmetic = sorted({name for job in jobs for name in job.cosmetic})
    if cosmetic:
        print(named_files(cosmetic, "changed in comments, docstrings or layout only (not counted)"))
    print(f"{len(stale_runs)} of {len(runs)} runs stale")
    # The jobs stale by themselves and reading nothing stale: what reads them reruns after them.
    roots = [job.output for job in jobs if job.reasons and not job.stale_upstream]
    if roots:
        print("Rerun them (what reads these outputs reruns after them):")
        print("  " + rerun_command(configfiles, roots))
    return 1 if stale_runs else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("stale", argv)
    try:
        config, _ = load_config(args.configfile)
    except (InputError, ConfigError) as error:
        print(f"mscl stale: error: {error}", file=sys.stderr)
        return 2
    results, processed = Path(config["paths"]["results"]), Path(config["paths"]["processed"])
    if not results.is_dir():
        print(f"mscl stale: error: no results folder {results} (config paths.results) in {Path.cwd()}. "
              "Fix: run it where snakemake runs, with the same --configfile arguments", file=sys.stderr)  # fmt: skip
        return 2
    runs, jobs = find_runs(results, processed)
    judge(jobs)
    return report(runs, jobs, args.configfile or [])
