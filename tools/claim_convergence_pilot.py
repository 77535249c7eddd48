"""The claim check's convergence pilot: how many epochs each dataset needs before every method's
validation metric stops improving (docs/claim-check.md, "How the schedules were fixed").

    .venv/bin/python tools/claim_convergence_pilot.py --data-root data/processed --out /tmp/claim_pilot \
        [--epochs yeast=250 fashion_mnist=40 debtags=45] [--jobs 2]

For each dataset of config/claim.yaml this script runs every trained method (ALL, ANY,
MulSupCon, Sim-Dissim, supervised BCE) once, on tuning seed 100. It uses the grid's slowest
setting: the lowest learning rate and the lowest weight decay, with the middle temperature.
The schedule is longer than the one in the config, and the convergence monitor
(`pretrain.monitor_every`: val mAP of a ridge readout) is on. It prints, per dataset and
method, the readout at every check and the first epoch within 0.005 of the run's best, and
writes the curves to --out/curves.csv. Only val is read, and only the tuning seed runs, so the
test seeds stay fresh. The schedules in config/claim.yaml were set from this output.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
METHODS = ("all", "any", "mulsupcon", "simdissim", "bce")
PILOT_SEED = 100
PLATEAU_TOLERANCE = 0.005  # val mAP: an epoch within this of the run's best counts as plateaued


def slowest_setting(grid: dict[str, list]) -> dict[str, float]:
    """The grid's lowest lr and weight decay, and its middle temperature."""
    values = {}
    for key, candidates in grid.items():
        ordered = sorted(candidates)
        values[key] = ordered[len(ordered) // 2] if key == "temperature" else ordered[0]
    return values


def pilot_specs(config: dict, epochs: dict[str, int]) -> list[tuple[str, str, dict]]:
    """(dataset, method, run spec) of every pilot run, built as the workflow builds a run spec."""
    specs = []
    for block in config["experiments"].values():
        dataset, encoder_name, batch = block["datasets"][0], block["encoders"][0], block["batch_sizes"][0]
        if dataset not in epochs or any(s[0] == dataset for s in specs):
            continue
        encoder = config["encoders"][encoder_name]
        for method in METHODS:
            family = "bce" if method == "bce" else "contrastive"
            pretrain = {**config.get("training", {}).get("pretrain", {}), **encoder.get("pretrain", {}), **slowest_setting(encoder["tune"][family])}
            pretrain.update(epochs=epochs[dataset], monitor_every=max(1, epochs[dataset] // 20))
            spec = {
                "dataset": dataset, "encoder_name": encoder_name, "encoder": encoder["spec"], "loss": method,
                "batch_size": batch, "seed": PILOT_SEED, "pretrain": pretrain,
                "probe": {**config.get("training", {}).get("probe", {}), **encoder.get("probe", {})},
            }  # fmt: skip
            specs.append((dataset, method, spec))
    return specs


def run(data_root: Path, out: Path, dataset: str, method: str, spec: dict) -> Path:
    folder = out / dataset / method
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "mscl", "pretrain", "--data", str(data_root / dataset), "--spec", json.dumps(spec), "--out", str(folder / "pretrain")]
    with open(folder / "pretrain.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)
    return folder / "pretrain" / "train_log.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "config" / "claim.yaml")
    parser.add_argument("--data-root", type=Path, default=REPO / "data" / "processed")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", nargs="+", default=["yeast=250", "fashion_mnist=40", "debtags=45"], help="DATASET=EPOCHS")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    epochs = {item.split("=")[0]: int(item.split("=")[1]) for item in args.epochs}
    config = yaml.safe_load(args.config.read_text())
    specs = pilot_specs(config, epochs)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        logs = {(d, m): pool.submit(run, args.data_root, args.out, d, m, s) for d, m, s in specs}
    rows = []
    for (dataset, method), future in logs.items():
        with open(future.result()) as handle:
            for line in csv.DictReader(handle):
                if line["val_map_readout"]:
                    rows.append({"dataset": dataset, "method": method, "epoch": int(line["epoch"]), "val_map_readout": float(line["val_map_readout"]), "loss": float(line["loss"])})
    with open(args.out / "curves.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for dataset in epochs:
        print(f"\n{dataset} (seed {PILOT_SEED}; val mAP of the ridge readout at each check)")
        for method in METHODS:
            curve = [(r["epoch"], r["val_map_readout"]) for r in rows if r["dataset"] == dataset and r["method"] == method]
            if not curve:
                continue
            best = max(value for _, value in curve)
            plateau = next(epoch for epoch, value in curve if value >= best - PLATEAU_TOLERANCE)
            points = " ".join(f"{epoch}:{value:.3f}" for epoch, value in curve)
            print(f"  {method:<10} best {best:.4f}, within {PLATEAU_TOLERANCE} of it from epoch {plateau}: {points}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
