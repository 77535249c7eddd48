"""Interrupt handling: process trees stopped by SIGTERM, SIGTERM turned into a clean exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil

from mscl.interrupt import EXIT_TERMINATED, terminate_process_trees


def test_terminate_process_trees_stops_a_shell_and_its_children() -> None:
    # A shell that waits on two children, like a Snakemake job running `python -m mscl ...`.
    shell = subprocess.Popen(["bash", "-c", "sleep 300 & sleep 300 & wait"])
    deadline = time.monotonic() + 10
    while len(psutil.Process(shell.pid).children()) < 2:
        assert time.monotonic() < deadline, "the shell never started its children"
        time.sleep(0.05)
    children = psutil.Process(shell.pid).children(recursive=True)
    assert terminate_process_trees([shell.pid, 999_999_999], grace_seconds=5) == 3
    shell.wait(timeout=5)
    assert not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE for child in children)


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"
    started = time.monotonic()
    terminate_process_trees([stubborn.pid], grace_seconds=0.5)
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_sigterm_during_an_atomic_write_exits_143_and_leaves_nothing_half_written(tmp_path) -> None:
    """What a pretrain job killed while saving a checkpoint leaves: the old file, no temporary."""
    dest = tmp_path / "checkpoint.pt"
    dest.write_text("epoch 1")
    code = (
        "import os, signal, sys, time\n"
        "from mscl.interrupt import exit_on_sigterm\n"
        "from mscl.io import atomic_path\n"
        "exit_on_sigterm('pretrain: stopped by SIGTERM')\n"
        f"with atomic_path({str(dest)!r}) as tmp:\n"
        "    tmp.write_text('epoch 2, half written')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert result.returncode == EXIT_TERMINATED
    assert "pretrain: stopped by SIGTERM" in result.stderr
    assert dest.read_text() == "epoch 1" and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]
