"""Peak resident memory of this process (Linux /proc), resettable between measurements."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def current_rss_bytes() -> int:
    return _status_kib("VmRSS") * 1024


def peak_rss_bytes() -> int:
    return _status_kib("VmHWM") * 1024


def reset_peak_rss() -> None:
    """Reset the peak (VmHWM) to the current RSS: writing "5" to clear_refs (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


def run_measured(command: list[str], log_path: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run `command` in a child process, its output to `log_path`; return (wall seconds, the
    child's peak RSS in MiB: `ru_maxrss` of its own rusage from `os.wait4`, which counts that
    process alone, not processes it starts). RuntimeError naming the log if it fails."""
    with open(log_path, "w") as log:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed (exit {child.returncode}); see {log_path}")
    return wall_s, usage.ru_maxrss / 1024  # Linux reports ru_maxrss in KiB
