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

Standard library only, plus psutil (a Snakemake dependency) where process trees are walked.
"""

from __future__ import annotations

import signal
import sys
from typing import Callable, Iterable

GRACE_SECONDS = 10.0  # SIGTERM first; whatever still runs after this long gets SIGKILL
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process ended by SIGTERM


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


def stop_jobs_on_sigint(running_job_pids: Callable[[], Iterable[int]]) -> bool:
    """Install a SIGINT handler that terminates the running jobs, then raises KeyboardInterrupt.

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
