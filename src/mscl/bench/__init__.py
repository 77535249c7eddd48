"""`python -m mscl bench <name>`: benchmark scripts that print figures (never pass/fail)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "losses": "mscl.bench.losses",
    "preprocess": "mscl.bench.preprocess",
    "dag": "mscl.bench.dag",
    "plm_icd": "mscl.bench.plm_icd",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m mscl bench {{{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        return 2
    return int(importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:]) or 0)
