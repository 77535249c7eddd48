"""Fault injection over a real run: kill things at random times, rerun, compare with an undisturbed run.

    .venv/bin/python tools/fault_injection.py [--faults-per-kind 8] [--seed 0] [--workdir DIR] [--json FILE]

A small real slice of the embedded default (config.yaml, `slice_config`): COCO-demo with the
ResNet-8 stand-in (ANY and Sim-Dissim) and AAPD-demo with the MiniLM top-layer stand-in
(Sim-Dissim, through its prefix cache): demo data, preprocessing, pretrain and probe, run by
Snakemake the way the README documents (`snakemake --cores 2 --configfile ...`, the default
workflow profile). First one undisturbed run. Then rounds, each in an empty working folder, in
which the harness injects faults at random times and reruns the same command until the run
completes. The kinds of fault (`KINDS`):

- job: SIGKILL to a training job process (`python -m mscl pretrain|probe|cache-prefix`);
- worker: SIGKILL to a job-server worker (what the OOM killer does to a training job);
- server: SIGKILL to the job server;
- sigint: SIGINT to Snakemake alone (`kill -INT`; Ctrl-C reaches the whole process group);
- snakemake: SIGKILL to Snakemake. Its lock stays, so the rerun fails with "Directory cannot be
  locked" and the harness runs the documented `snakemake --unlock` before rerunning.

Each attempt of a round carries up to FAULTS_PER_ATTEMPT faults at uniformly random times
within the time the run takes (a job, worker or server fault waits for its target to exist):
first those that leave Snakemake running (job, worker, server), then at most one that ends it
(sigint, snakemake); a fault the run outran goes to the next attempt. Faulted runs checkpoint
every epoch (MSCL_CHECKPOINT_INTERVAL_S=0), so killed pretraining jobs resume mid-run; the
undisturbed run keeps the default cadence. Pass, per round:

- every run's test metrics (probe/metrics.json) and test scores equal the undisturbed run's
  exactly (same seeds);
- no process of an attempt outlives it: after Snakemake exits, every process whose working
  folder is the run's is gone within SETTLE_SECONDS (checked after every attempt);
- no temporary or partial file remains: the files under results/ are exactly the undisturbed
  run's, nothing hidden (a temporary) is left under results/, data/ or models/, and the run's
  TMPDIR holds none of mscl's temporaries (the job server's socket folders).

`--reuse-data` (the test suite's short version, tests/test_faults.py) prepares the data once,
in the undisturbed run, and starts each round by deleting the runs, so the faults land in
pretraining and probing; `--quick` trains a few steps per epoch and fewer probe epochs.
Prints a summary table; `--json` writes every attempt. The figures of a full run are in
docs/faults.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import psutil
import yaml

from mscl.bench.dag import parse_snakemake_log

REPO = Path(__file__).resolve().parents[1]
KINDS = ("job", "worker", "server", "sigint", "snakemake")  # the order faults take within an attempt
ENDING_KINDS = ("sigint", "snakemake")  # faults that end the Snakemake run
SIGNAL_OF = {"job": signal.SIGKILL, "worker": signal.SIGKILL, "server": signal.SIGKILL, "sigint": signal.SIGINT, "snakemake": signal.SIGKILL}
TRAINING_COMMANDS = ("pretrain", "probe", "cache-prefix")
STARTUP_SECONDS = 5.0  # Snakemake's start until its first job, on the slice
SETTLE_SECONDS = 30.0  # how long the processes of an attempt may take to end after Snakemake
ATTEMPT_TIMEOUT_SECONDS = 900.0
LOCKED = "Directory cannot be locked"
SNAKEMAKE_MARK = ".snakemake_timestamp"  # Snakemake's own mark in a directory() output, not a temporary
FAULTS_PER_ROUND = 5  # then the round reruns undisturbed until the run completes
FAULTS_PER_ATTEMPT = 3
EXTRA_ATTEMPTS = 4  # undisturbed reruns a round may need (one after an unlock, one to finish)
MAX_ROUNDS_PER_FAULT = 3  # rounds whose faults all came too late are retried, up to this many per fault
SERVER_DOWN = "job server did not start"  # the workflow's line when it has none (mscl.jobserver)
# The slice: (dataset, encoder, losses, batch size).
SLICE = (("coco", "resnet8", ("any", "simdissim"), 64), ("aapd", "minilm-top1", ("simdissim",), 32))
QUICK_STEPS_PER_EPOCH = 10


def slice_config(path: Path, quick: bool) -> Path:
    """config.yaml cut to SLICE; `quick`: 3 ResNet-8 epochs of QUICK_STEPS_PER_EPOCH steps (the
    text stand-in 1 epoch of as many) and 20 probe epochs, instead of 8 full epochs and 100."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = sorted({dataset for dataset, *_ in SLICE})
    config["experiments"] = {
        dataset: {"datasets": [dataset], "encoders": [encoder], "losses": list(losses), "batch_sizes": [batch]}
        for dataset, encoder, losses, batch in SLICE
    }
    if quick:
        config["encoders"]["resnet8"]["pretrain"]["epochs"] = 3
        config["training"]["pretrain"]["max_steps_per_epoch"] = QUICK_STEPS_PER_EPOCH
        config["training"]["probe"]["epochs"] = 20
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_dirs() -> list[str]:
    return [f"results/runs/{d}/{e}/{loss}/bs{b}/seed0" for d, e, losses, b in SLICE for loss in losses]


def targets() -> list[str]:
    return [f"{run}/probe/metrics.json" for run in run_dirs()]


def snakemake_command(workdir: Path, config: Path, *extra: str) -> list[str]:
    """`snakemake --cores 2 --configfile CONFIG TARGETS` with the repository's Snakefile and
    default workflow profile, run in `workdir` (what `cd` into a checkout would do)."""
    return [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "2", *extra, *targets(), "--configfile", str(config),
    ]


def environment(tmpdir: Path, checkpoint_every_epoch: bool) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(tmpdir))
    env.pop("MSCL_CHECKPOINT_INTERVAL_S", None)
    env.pop("MSCL_JOB_SERVER", None)
    if checkpoint_every_epoch:
        env["MSCL_CHECKPOINT_INTERVAL_S"] = "0"
    return env


# ------------------------------------------------------------------------- processes


def processes_of(workdir: Path) -> list[psutil.Process]:
    """Live processes working in `workdir` (Snakemake, its jobs, the job server, its workers)."""
    found = []
    for process in psutil.process_iter(["pid", "cwd", "status"]):
        try:
            if process.pid == os.getpid() or process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cwd = process.info["cwd"]
            if cwd and (cwd == str(workdir) or cwd.startswith(f"{workdir}{os.sep}")):
                found.append(process)
        except psutil.Error:
            continue
    return found


def command_line(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def parent_pid(process: psutil.Process) -> int | None:
    """Its parent's pid, or None once it has ended (processes come and go while the run runs)."""
    try:
        return process.ppid()
    except psutil.Error:
        return None


def find_targets(kind: str, snakemake: psutil.Process, workdir: Path) -> list[psutil.Process]:
    """The processes a fault of `kind` may hit now."""
    if kind in ("sigint", "snakemake"):
        return [snakemake]
    running = processes_of(workdir)
    servers = [p for p in running if "job-server" in command_line(p) and str(snakemake.pid) in command_line(p) and parent_pid(p) == snakemake.pid]
    if kind == "server":
        return servers
    if kind == "worker":
        return [p for p in running if parent_pid(p) in {server.pid for server in servers}]
    jobs = []
    for process in running:
        words = command_line(process)
        if "mscl" in words and any(command in words for command in TRAINING_COMMANDS) and "job-server" not in words:
            jobs.append(process)
    return jobs


def settle(workdir: Path, timeout: float = SETTLE_SECONDS) -> tuple[float, list[str]]:
    """Wait for the processes of a finished attempt to end: (seconds it took, survivors'
    command lines). Survivors are then killed so that the next attempt starts clean."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not processes_of(workdir):
            return time.monotonic() - started, []
        time.sleep(0.2)
    survivors = processes_of(workdir)
    described = [" ".join(command_line(p))[:200] for p in survivors]
    for process in survivors:
        try:
            process.kill()
        except psutil.Error:
            pass
    return time.monotonic() - started, described


# --------------------------------------------------------------------------- attempts


@dataclass
class Attempt:
    round: int
    attempt: int
    faults: list[str]  # planned, in order; a Snakemake-ending one (sigint, snakemake) only last
    injected: list[dict] = field(default_factory=list)  # {kind, after_s, target}
    exit: int | None = None
    unlocked: bool = False
    seconds: float = 0.0
    settle_s: float = 0.0
    survivors: list[str] = field(default_factory=list)


def run_attempt(attempt: Attempt, workdir: Path, config: Path, env: dict[str, str], log: Path, rng: random.Random, horizon_s: float) -> Attempt:
    """One Snakemake run, with the attempt's faults injected in order at random times."""
    started = time.monotonic()
    with log.open("w") as output:
        process = subprocess.Popen(snakemake_command(workdir, config), stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        times = sorted(rng.uniform(1.0, horizon_s) for _ in attempt.faults)
        for kind, at in zip(attempt.faults, times):
            if not inject(attempt, kind, at, process, workdir, rng, started):
                break  # Snakemake ended first: this fault and the rest go back to the plan
        try:
            process.wait(timeout=ATTEMPT_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    attempt.exit = process.returncode
    attempt.seconds = time.monotonic() - started
    attempt.settle_s, attempt.survivors = settle(workdir)
    if LOCKED in log.read_text():
        # The documented way out of a lock left by a killed Snakemake (README, "Interrupting").
        subprocess.run(snakemake_command(workdir, config, "--unlock"), env=env, capture_output=True, check=True)
        attempt.unlocked = True
    return attempt


def inject(attempt: Attempt, kind: str, at: float, process: subprocess.Popen, workdir: Path, rng: random.Random, started: float) -> bool:
    """Wait until `at` seconds into the attempt, then for a target of `kind`, and signal it.
    False if Snakemake ended first."""
    while process.poll() is None and time.monotonic() - started < at:
        time.sleep(0.05)
    try:
        snakemake = psutil.Process(process.pid)
    except psutil.NoSuchProcess:
        return False
    while process.poll() is None:
        candidates = find_targets(kind, snakemake, workdir)
        if candidates:
            target = rng.choice(candidates)
            try:
                described = " ".join(command_line(target)[2:5]) or str(target.pid)
                os.kill(target.pid, SIGNAL_OF[kind])
            except (ProcessLookupError, psutil.Error):
                continue
            attempt.injected.append({"kind": kind, "after_s": round(time.monotonic() - started, 2), "target": described})
            return True
        time.sleep(0.05)
    return False


def attempt_plan(plan: list[str], per_attempt: int) -> tuple[list[str], list[str]]:
    """The next attempt's faults from the front of `plan`, and the rest of the plan: up to
    `per_attempt` faults that leave Snakemake running (job, worker, then server: once the
    server is gone there are no workers), ended by at most one that stops Snakemake."""
    faults, rest = [], list(plan)
    while rest and len(faults) < per_attempt:
        kind = rest.pop(0)
        faults.append(kind)
        if kind in ENDING_KINDS:
            break
    order = {kind: index for index, kind in enumerate(KINDS)}
    return sorted(faults, key=order.__getitem__), rest


# ---------------------------------------------------------------------------- checks


# TensorBoard's event files are named by the moment, host and process that wrote them, and a
# resumed job continues its curve in a new one (mscl.train.curves): compared by the folder only.
EVENT_FILE = "events.out.tfevents."


def outputs(workdir: Path) -> dict:
    """Test metrics and scores of every run, and the files under results/ (each folder's event
    files as one name)."""
    metrics, scores = {}, {}
    for run in run_dirs():
        metrics[run] = json.loads((workdir / run / "probe" / "metrics.json").read_text())["test"]
        scores[run] = pd.read_parquet(workdir / run / "probe" / "test_scores.parquet")
    files = sorted({
        str(p.relative_to(workdir).with_name(EVENT_FILE + "*") if p.name.startswith(EVENT_FILE) else p.relative_to(workdir))
        for p in (workdir / "results").rglob("*") if p.is_file()
    })  # fmt: skip
    return {"metrics": metrics, "scores": scores, "files": files}


def forget_training(workdir: Path) -> None:
    """Delete the runs: the next Snakemake run trains and probes again on the prepared data
    (and the prefix caches, which take half a minute and are built from scratch in full rounds)."""
    shutil.rmtree(workdir / "results" / "runs")


def training_span(workdir: Path) -> float:
    """Seconds from the first pretrain job's start to the last probe's end in the run's Snakemake log."""
    log = max((workdir / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda path: path.stat().st_mtime)
    jobs = [job for job in parse_snakemake_log(log)[0] if job.rule in ("pretrain", "probe")]
    return (max(job.finished for job in jobs) - min(job.started for job in jobs)).total_seconds()


def leftovers(workdir: Path, tmpdir: Path) -> list[str]:
    """Hidden (temporary) entries under results/, data/ and models/, and mscl's own temporaries
    (the job server's socket folders) in the run's TMPDIR."""
    found = []
    for top in ("results", "data", "models"):
        for path in (workdir / top).rglob("*") if (workdir / top).exists() else []:
            if path.name != SNAKEMAKE_MARK and any(part.startswith(".") for part in path.relative_to(workdir).parts):
                found.append(str(path.relative_to(workdir)))
    found += [f"TMPDIR/{p.name}" for p in tmpdir.iterdir() if p.name.startswith(("mscl", "."))] if tmpdir.exists() else []
    return sorted(found)


def compare(clean: dict, faulted: dict) -> dict:
    metrics_equal = all(faulted["metrics"][run] == clean["metrics"][run] for run in run_dirs())
    scores_equal = all(faulted["scores"][run].equals(clean["scores"][run]) for run in run_dirs())
    missing = sorted(set(clean["files"]) - set(faulted["files"]))
    extra = sorted(set(faulted["files"]) - set(clean["files"]))
    return {"metrics_equal": metrics_equal, "scores_equal": scores_equal, "missing_files": missing, "extra_files": extra}


# ------------------------------------------------------------------------------ main


@dataclass
class Outcome:
    clean_seconds: float
    faults_per_kind: int
    rounds: list[dict] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)

    def injected(self) -> dict[str, int]:
        return {kind: sum(fault["kind"] == kind for a in self.attempts for fault in a.injected) for kind in KINDS}

    def passed(self) -> bool:
        return (
            bool(self.rounds)
            and all(count >= self.faults_per_kind for count in self.injected().values())
            and all(r["metrics_equal"] and r["scores_equal"] and not r["missing_files"] and not r["extra_files"] and not r["leftovers"] and r["completed"] for r in self.rounds)
            and not any(a.survivors for a in self.attempts)
        )

    def summary(self) -> dict:
        return {
            "passed": self.passed(),
            "faults_injected": self.injected(),
            "rounds": len(self.rounds),
            "snakemake_runs": len(self.attempts),
            "reruns": len(self.attempts) - len(self.rounds),
            "unlocks": sum(a.unlocked for a in self.attempts),
            "metrics_equal_every_round": all(r["metrics_equal"] for r in self.rounds),
            "scores_equal_every_round": all(r["scores_equal"] for r in self.rounds),
            "processes_outliving_their_run": sum(len(a.survivors) for a in self.attempts),
            "slowest_settle_s": round(max((a.settle_s for a in self.attempts), default=0.0), 2),
            "leftover_files": sum(len(r["leftovers"]) + len(r["extra_files"]) for r in self.rounds),
            "clean_run_s": round(self.clean_seconds, 1),
        }


def fault_injection(workdir: Path, faults_per_kind: int, seed: int, quick: bool, reuse_data: bool) -> Outcome:
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    config = slice_config(workdir / "slice.yaml", quick)
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)

    clean_dir, clean_tmp = workdir / "clean", workdir / "clean-tmp"
    clean_tmp.mkdir(exist_ok=True)
    started = time.monotonic()
    result = subprocess.run(snakemake_command(clean_dir, config), capture_output=True, text=True, env=environment(clean_tmp, False))
    if result.returncode != 0:
        raise SystemExit(f"the undisturbed run failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    if SERVER_DOWN in result.stdout + result.stderr:
        # Worker and server faults would wait for targets that never come.
        raise SystemExit(f"the undisturbed run had no job server; see {clean_dir / '.snakemake' / 'log' / 'mscl-job-server.log'}")
    outcome = Outcome(time.monotonic() - started, faults_per_kind)
    clean = outputs(clean_dir)
    clean_leftovers = leftovers(clean_dir, clean_tmp)
    if clean_leftovers:
        raise SystemExit(f"the undisturbed run left temporaries: {clean_leftovers}")
    # A fault lands uniformly within the time a run from the round's starting state takes: the
    # whole clean run, or with the data reused, Snakemake's start plus the training jobs' span.
    horizon = outcome.clean_seconds
    if reuse_data:
        horizon = STARTUP_SECONDS + training_span(clean_dir)

    plan = [kind for _ in range(faults_per_kind) for kind in KINDS]
    rng.shuffle(plan)
    round_number, max_rounds = 0, MAX_ROUNDS_PER_FAULT * len(plan)
    while plan and round_number < max_rounds:
        round_number += 1
        if reuse_data:
            round_dir, round_tmp = clean_dir, clean_tmp
            forget_training(round_dir)
        else:
            round_dir, round_tmp = workdir / f"round{round_number}", workdir / f"round{round_number}-tmp"
            round_tmp.mkdir()
        env = environment(round_tmp, checkpoint_every_epoch=True)
        # Faults of this round, a few per attempt; a fault the run outran moves to the next round.
        faults, plan = plan[:FAULTS_PER_ROUND], plan[FAULTS_PER_ROUND:]
        completed = False
        for number in range(1, FAULTS_PER_ROUND + EXTRA_ATTEMPTS + 1):
            planned, faults = attempt_plan(faults, FAULTS_PER_ATTEMPT)
            attempt = run_attempt(Attempt(round_number, number, planned), round_dir, config, env, logs / f"round{round_number}-{number}.log", rng, horizon)
            outcome.attempts.append(attempt)
            injected = [fault["kind"] for fault in attempt.injected]
            faults = planned[len(injected):] + faults
            print(
                f"round {round_number} attempt {number}: "
                + (", ".join(f"{f['kind']} at {f['after_s']} s ({f['target']})" for f in attempt.injected) or "no fault")
                + f"; exit {attempt.exit}, {attempt.seconds:.0f} s{'; unlocked' if attempt.unlocked else ''}"
                + (f"; SURVIVORS {attempt.survivors}" if attempt.survivors else ""),
                flush=True,
            )
            if attempt.exit == 0 and not injected:
                completed = True
                break
        plan = faults + plan
        if completed:
            checks = compare(clean, outputs(round_dir))
        else:
            checks = {"metrics_equal": False, "scores_equal": False, "missing_files": ["(the run did not complete)"], "extra_files": []}
        outcome.rounds.append({"round": round_number, "completed": completed, **checks, "leftovers": leftovers(round_dir, round_tmp)})
        print(f"round {round_number}: {json.dumps(outcome.rounds[-1])}", flush=True)
        if not completed:
            break
    return outcome


def table(summary: dict) -> str:
    rows = [("faults injected", ", ".join(f"{kind} {count}" for kind, count in summary["faults_injected"].items()))]
    rows += [(key.replace("_", " "), str(value)) for key, value in summary.items() if key != "faults_injected"]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults-per-kind", type=int, default=8, help="faults of each kind to inject (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault order and times (default 0)")
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new one under $TMPDIR, kept)")
    parser.add_argument("--quick", action="store_true", help="3 ResNet-8 epochs and 20 probe epochs (the test suite's)")
    parser.add_argument("--reuse-data", action="store_true", help="prepare the data once; rounds rerun training only")
    parser.add_argument("--json", type=Path, help="write the summary, the rounds and every attempt here")
    args = parser.parse_args()
    import tempfile

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="mscl-faults-"))).resolve()
    print(f"working in {workdir}", flush=True)
    outcome = fault_injection(workdir, args.faults_per_kind, args.seed, args.quick, args.reuse_data)
    summary = outcome.summary()
    print(table(summary))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rounds": outcome.rounds, "attempts": [asdict(a) for a in outcome.attempts]}, indent=2) + "\n")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
