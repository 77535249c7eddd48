"""`python -m mscl bench <name>`: benchmark scripts that print figures (never pass/fail)."""

from __future__ import annotations

import importlib
import sys

from mscl.cli import parse_args

BENCHMARKS = {
    "losses": "mscl.bench.losses",
    "preprocess": "mscl.bench.preprocess",
    "dag": "mscl.bench.dag",
    "plm_icd": "mscl.bench.plm_icd",
    "scale": "mscl.bench.scale",
    "loader": "mscl.bench.loader",
    "gpu": "mscl.bench.gpu",
    "images": "mscl.bench.images",
    "curves": "mscl.bench.curves",
}
USAGE = f"usage: python -m mscl bench {{{','.join(BENCHMARKS)}}} [options]"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in {"-h", "--help"}:
        print(USAGE)
        return 0
    if not argv or argv[0] not in BENCHMARKS:
        print(USAGE, file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    parse_args(f"bench {name}", rest)  # --help and usage errors exit before the benchmark's imports
    return int(importlib.import_module(BENCHMARKS[name]).main(rest) or 0)
