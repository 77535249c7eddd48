"""Peak resident memory of this process (Linux /proc), resettable between measurements."""

from __future__ import annotations


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
