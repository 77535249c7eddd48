"""A process's own resource usage as one log line, and reading it back (standard library only).

A job-server worker does a served job's work outside the process that Snakemake's `benchmark:`
measures, so the worker writes this line into the job's log as it ends, and the cost table
(mscl.report.cost) takes CPU time and peak memory from it instead of from the benchmark. The
line's text is kept as it was first written so that older run logs still read.
"""

from __future__ import annotations

import resource

USAGE_LINE = "mscl job-server worker usage: cpu_s={cpu_s:.2f} max_rss_mib={max_rss_mib:.1f}"
KIB_PER_MIB = 1024.0  # ru_maxrss is in KiB on Linux


def usage_line() -> str:
    """This process's CPU seconds (user + system, itself and its reaped children) and peak
    resident memory (MiB, `peak_rss_mib`), as a USAGE_LINE."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return USAGE_LINE.format(cpu_s=cpu, max_rss_mib=peak_rss_mib())


def peak_rss_mib() -> float:
    """The peak resident memory (MiB) of this process or of the largest of its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return max(own.ru_maxrss, children.ru_maxrss) / KIB_PER_MIB


def parse_usage(text: str) -> dict[str, float] | None:
    """(cpu_s, max_rss_mib) from the last usage line in a job's log, or None."""
    prefix = USAGE_LINE.split(":", 1)[0] + ":"
    for line in reversed(text.splitlines()):
        if line.startswith(prefix):
            fields = dict(part.split("=", 1) for part in line[len(prefix):].split())
            return {key: float(value) for key, value in fields.items()}
    return None
