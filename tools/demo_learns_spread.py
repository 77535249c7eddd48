"""How far the small-image learning check of tests/test_demo_learns.py moves between machines.

    .venv/bin/python tools/demo_learns_spread.py [--seeds 0 1 2 3 4] [--threads 1 2] [--out CSV]

A seeded run lands on different numbers on different CPUs: the kernels torch picks (oneDNN or
its own), the thread count (how reductions are split) and the instruction set all change the
rounding, and eight epochs of training amplify it. This script reruns the test's exact
pipeline (same demo data, spec and probe) for every training seed x thread count x oneDNN
on/off, and prints per setting the probe's test mAP after ALL, for the untrained encoder
("none") and for the label prior, and the loss drop over the eight epochs. The test's
thresholds are set below the smallest value measured here, with the figures in its comments.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from test_demo_learns import spec  # noqa: E402  (the test's own spec: one definition)

from mscl.__main__ import main as mscl_main  # noqa: E402


def quiet(argv: list[str]) -> None:
    """Run one mscl command with its progress output swallowed; fail loudly on a non-zero exit."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        code = mscl_main(argv)
    if code != 0:
        raise SystemExit(f"mscl {' '.join(argv[:1])} exited {code}")


def run_setting(data: Path, work: Path, seed: int) -> dict[str, float]:
    """Test mAP of ALL and of the untrained encoder for one training seed, and ALL's loss drop."""
    result: dict[str, float] = {}
    for loss in ("all", "none"):
        run_spec = json.loads(spec(loss))
        run_spec["seed"] = seed
        text = json.dumps(run_spec)
        out = work / f"{loss}-{seed}"
        quiet(["pretrain", "--data", str(data), "--spec", text, "--out", str(out / "pretrain")])
        quiet(["probe", "--data", str(data), "--spec", text, "--pretrained", str(out / "pretrain"), "--out", str(out / "probe")])
        result[f"map_{loss}"] = json.loads((out / "probe" / "metrics.json").read_text())["test"]["map"]
    losses = [float(line.split(",")[2]) for line in (work / f"all-{seed}" / "pretrain" / "train_log.csv").read_text().splitlines()[1:]]
    result["loss_drop"] = losses[0] - losses[-1]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, help="also write the table as CSV here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw, data = root / "raw", root / "coco"
        quiet(["make-demo", "coco", "--out", str(raw), "--samples", "1300", "--seed", "0"])
        quiet(["prepare-coco", "--root", str(raw), "--out", str(data), "--seed", "0"])
        quiet(["chance", "--data", str(data), "--out", str(root / "chance")])
        chance = json.loads((root / "chance" / "metrics.json").read_text())["test"]["map"]
        print(f"label prior (chance) test mAP {chance:.4f}; torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}")
        print(f"{'seed':>4} {'threads':>7} {'onednn':>6} {'mAP ALL':>8} {'mAP none':>8} {'ALL-none':>8} {'ALL-chance':>10} {'loss drop':>9} {'s':>5}")
        for threads in args.threads:
            for onednn in (True, False):
                for seed in args.seeds:
                    torch.set_num_threads(threads)
                    torch.backends.mkldnn.enabled = onednn
                    started = time.perf_counter()
                    result = run_setting(data, root / f"t{threads}-d{int(onednn)}", seed)
                    row = {"seed": seed, "threads": threads, "onednn": onednn, "chance": chance, **result}
                    rows.append(row)
                    print(
                        f"{seed:>4} {threads:>7} {str(onednn):>6} {result['map_all']:>8.4f} {result['map_none']:>8.4f} "
                        f"{result['map_all'] - result['map_none']:>+8.4f} {result['map_all'] - chance:>+10.4f} "
                        f"{result['loss_drop']:>9.3f} {time.perf_counter() - started:>5.1f}",
                        flush=True,
                    )
    gaps = [r["map_all"] - r["map_none"] for r in rows]
    above_chance = [r["map_all"] - r["chance"] for r in rows]
    drops = [r["loss_drop"] for r in rows]
    print(f"\nALL - none:   min {min(gaps):+.4f}  max {max(gaps):+.4f}  over {len(rows)} settings")
    print(f"ALL - chance: min {min(above_chance):+.4f}  max {max(above_chance):+.4f}")
    print(f"loss drop:    min {min(drops):.3f}  max {max(drops):.3f}")
    if args.out:
        import csv

        with args.out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
