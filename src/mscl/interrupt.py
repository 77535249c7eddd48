"""Interrupts that stop running jobs promptly and leave them resumable.

Two sides:

- Snakemake's side (`stop_jobs_on_sigint`, installed by the workflow). Ctrl-C in a terminal
  reaches every process of the foreground group, jobs included. `kill -INT <snakemake pid>`
  (a script, tmux, a process manager) reaches Snakemake alone, and its local executor then
  waits for the running jobs to end by themselves: a training job would run to its last
  epoch. The handler first terminates the process tree of every running job, then raises
  KeyboardInterrupt so that Snakemake takes its usual way out (failed jobs' outputs removed).
- The job's side (`exit_on_sigterm`, called by the training commands). SIGTERM (from the
  handler above, `scancel`, a cluster's time limit) becomes SystemExit, so atomic writes in
  progress clean up their temporary files and the last epoch checkpoint stays the newest
  complete state: the rerun resumes from it.

- Snakemake killed outright (SIGKILL, a crashed terminal): its local jobs would run on as
  orphans and race the rerun for the same files. `tie_jobs_to_this_process` (the workflow's
  onstart, local runs only) names the Snakemake process in $MSCL_RUN_OWNER, and every
  `python -m mscl` job process watches it (`stop_when_owner_ends`) and stops itself by SIGTERM
  within POLL_SECONDS of its end. A job-server worker is stopped by its server instead.

Standard library only, plus psutil (a Snakemake dependency) where process trees are walked.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable, Iterable

GRACE_SECONDS = 10.0  # SIGTERM first; whatever still runs after this long gets SIGKILL
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process ended by SIGTERM
OWNER_ENV = "MSCL_RUN_OWNER"
POLL_SECONDS = 1.0  # how often a job checks that the Snakemake process that started it is alive


def terminate_process_trees(pids: Iterable[int], grace_seconds: float = GRACE_SECONDS) -> int:
    """SIGTERM each pid and all its descendants, SIGKILL what outlives the grace period.

    Returns how many processes were signalled. Processes that are already gone are skipped.
    """
    import psutil

    processes = []
    for pid in pids:
        try:
            parent = psutil.Process(pid)
            # Children first in the list, collected before the parent dies and orphans them.
            processes += parent.children(recursive=True) + [parent]
        except psutil.NoSuchProcess:
            continue
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=grace_seconds)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    return len(processes)


def child_processes() -> list[int]:
    """The pids of this process's children: in the Snakemake process, the shells of its running
    local jobs (and the job server, which stops its workers when terminated)."""
    import psutil

    return [child.pid for child in psutil.Process().children()]


def stop_jobs_on_sigint(running_job_pids: Callable[[], Iterable[int]] = child_processes) -> bool:
    """Install a SIGINT handler that terminates the running jobs (by default every child of
    this process), then raises KeyboardInterrupt.

    Returns False (and installs nothing) outside the main thread, where Python cannot set
    signal handlers.
    """

    def handler(signum: int, frame: object) -> None:
        pids = list(running_job_pids())
        if pids:
            print(f"Interrupted: stopping {len(pids)} running job(s); rerun to resume.", file=sys.stderr)
            terminate_process_trees(pids)
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:
        return False
    return True


def exit_on_sigterm(message: str) -> None:
    """Turn SIGTERM into SystemExit(143) after printing `message` to stderr."""

    def handler(signum: int, frame: object) -> None:
        print(message, file=sys.stderr, flush=True)
        sys.exit(EXIT_TERMINATED)

    signal.signal(signal.SIGTERM, handler)


def tie_jobs_to_this_process(local: bool) -> None:
    """The workflow's onstart: jobs that run on this machine (`local`) stop when this process
    ends, however it ends. Not on a cluster, where jobs outlive the submitting Snakemake."""
    if local:
        os.environ[OWNER_ENV] = str(os.getpid())


def stop_when_owner_ends() -> None:
    """In a job process: SIGTERM to itself once the process named by $MSCL_RUN_OWNER is gone
    (a daemon thread that polls every POLL_SECONDS). Nothing when the variable is unset."""
    owner = os.environ.get(OWNER_ENV, "")
    if not owner.isdigit():
        return

    def watch() -> None:
        while alive(int(owner)):
            time.sleep(POLL_SECONDS)
        print(f"mscl: the Snakemake process {owner} that started this job is gone; stopping", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="mscl-owner-watch", daemon=True).start()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
