"""What recording versions.json costs a training job (docs/reproducibility.md): the time of
`mscl.provenance.provenance()` in a fresh process that imported a pretraining's and a probe's
modules, once as a job in its own process (it reads every installed distribution's file list
itself) and once after `warm_caches()`, which the job server runs before it forks its workers.

    python tools/provenance_cost.py [--processes 5]

Prints the median and every process's seconds for each; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

JOB = """
import sys, time
import mscl.train.pretrain, mscl.train.probe
from mscl import provenance
if sys.argv[1] == "served":
    provenance.warm_caches()
start = time.perf_counter()
provenance.provenance()
print(time.perf_counter() - start)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=5, help="fresh processes per case (default 5)")
    args = parser.parse_args()
    for case, label in (("own", "a job in its own process"), ("served", "a job served by the job server")):
        seconds = [float(subprocess.run([sys.executable, "-c", JOB, case], capture_output=True, text=True, check=True).stdout) for _ in range(args.processes)]
        print(f"{label:32s} median {statistics.median(seconds):.3f} s  ({', '.join(f'{s:.3f}' for s in seconds)})")


if __name__ == "__main__":
    main()
