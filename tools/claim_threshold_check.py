"""Why a method's micro-F1 and mAP disagree: the probe's fixed 0.5 threshold, checked per run.

    python tools/claim_threshold_check.py --data data/processed/yeast --runs results/claim/runs/yeast/mlp \
        --methods bce logreg --published docs/claim/runs.csv

The claim's probe predicts a label when its score is > 0.5 (docs/metrics.md) and chooses its
epoch on val mAP, which no threshold affects. For every finished test run of each method
(RUNS/METHOD/bs*/seed*/probe) this refits the probe from the run's cached features with the
run's own spec and seed (`mscl.train.probe.train_probe`, the code the probe job runs), checks
that the refit gives the run's test scores bit for bit, and then reads, from the refit's val
and test scores:

- test micro-F1, micro-precision and micro-recall at the probe's 0.5, and labels predicted
  per test sample at 0.5 against the gold labels per sample;
- the one global threshold that maximises micro-F1 on VAL (`mscl.metrics.tune_threshold`, the
  grid 0.01-0.99), and test micro-F1 at it: a threshold chosen without the test split;
- test micro-F1 with one threshold per label, each chosen on VAL the same way (that label's
  F1), to see whether the labels differ in where their threshold should be;
- test mAP (the mean of per-label AP: every label weighs the same) beside micro-AP (AP of all
  label scores pooled, sklearn's average="micro": every positive weighs the same, as in
  micro-F1); both threshold-free;
- per label, mean over seeds: test prevalence, AP, F1 at 0.5, and the share of test samples
  predicted positive at 0.5.

With --published (docs/claim/runs.csv) it also checks that each run's test micro-F1 and mAP are
the published ones. It then prints each method's mean ± sd over seeds and, for the first method
minus the others, the paired difference with its 95% CI (`mscl.report.claim.paired_statistics`)
at 0.5 and at the val-chosen threshold. Nothing is tuned for the claim: the published metrics
stay those at 0.5, and this only reads what the threshold does to them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import average_precision_score, f1_score

from mscl.data.manifest import SPLITS, read_labels
from mscl.metrics import evaluate, evaluate_edin, macro_f1_definition, per_class_f1, per_label_auc_and_ap, tune_threshold
from mscl.report.claim import paired_statistics
from mscl.report.collect import read_test_scores
from mscl.train.pretrain import load_run_splits
from mscl.train.probe import probabilities, train_probe
from mscl.train.runtime import load_checkpoint
from mscl.train.spec import load_spec

COLUMNS = (
    "micro_f1", "precision", "recall", "predicted_per_sample", "gold_per_sample", "val_threshold", "micro_f1_val_threshold",
    "micro_f1_label_thresholds", "map", "micro_ap",
)  # fmt: skip


def check_run(probe_dir: Path, data_dir: Path) -> tuple[dict[str, float], pd.DataFrame]:
    """One run's probe refit from its cached features; its threshold readings (fractions) and
    its per-label readings."""
    spec = load_spec(str(probe_dir / "resolved_spec.json"))
    definition = macro_f1_definition(spec.dataset, family=spec.dataset_family)
    vocabulary = read_labels(data_dir)
    splits = load_run_splits(spec, data_dir, vocabulary, SPLITS)
    features = {name: load_checkpoint(probe_dir / f"features_{name}.pt")["features"] for name in SPLITS}
    label_matrices = {name: splits[name].labels for name in SPLITS}
    with contextlib.redirect_stderr(io.StringIO()):  # the probe's per-epoch lines
        layer, best_epoch, _, _ = train_probe(features, label_matrices, spec.probe, spec.seed, torch.device("cpu"), definition)
    layer.eval()
    val_scores, test_scores = probabilities(layer, features["val"]), probabilities(layer, features["test"])
    if not np.array_equal(test_scores, read_test_scores(probe_dir)[2]):
        raise SystemExit(f"{probe_dir}: the refit probe does not reproduce the run's test scores")
    recorded = json.loads((probe_dir / "metrics.json").read_text())
    if best_epoch != recorded["best_epoch"]:
        raise SystemExit(f"{probe_dir}: the refit chose epoch {best_epoch}, the run {recorded['best_epoch']}")
    gold_val, gold_test = label_matrices["val"].dense().numpy(), label_matrices["test"].dense().numpy()
    at_half = evaluate(gold_test, test_scores, macro_f1_definition=definition)
    threshold = tune_threshold(gold_val, val_scores)
    per_label = np.array([tune_threshold(gold_val[:, [label]], val_scores[:, [label]]) for label in range(gold_val.shape[1])])
    _, average_precision = per_label_auc_and_ap(gold_test, test_scores)
    labels = pd.DataFrame({
        "label": vocabulary, "prevalence": gold_test.mean(0), "ap": average_precision,
        "f1": per_class_f1(gold_test, test_scores), "predicted_share": (test_scores > 0.5).mean(0),
    })  # fmt: skip
    return {
        "seed": spec.seed, "best_epoch": best_epoch, "micro_f1": at_half["micro_f1"], "precision": at_half["micro_precision"],
        "recall": at_half["micro_recall"], "predicted_per_sample": float((test_scores > 0.5).sum(1).mean()),
        "gold_per_sample": float(gold_test.sum(1).mean()), "val_threshold": threshold,
        "micro_f1_val_threshold": evaluate_edin(gold_test, test_scores, threshold)["edin_micro_f1"],
        "micro_f1_label_thresholds": float(f1_score(gold_test, test_scores > per_label, average="micro")),
        "map": at_half["map"], "micro_ap": float(average_precision_score(gold_test, test_scores, average="micro")),
    }, labels  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the dataset's prepared manifest folder")
    parser.add_argument("--runs", type=Path, required=True, help="the runs folder of one dataset and encoder (RUNS/METHOD/bs*/seed*/probe)")
    parser.add_argument("--methods", nargs="+", required=True, help="methods to read; the first is compared with the others")
    parser.add_argument("--published", type=Path, help="runs.csv to check each run's test micro-F1 and mAP against")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the probe jobs run (OMP_NUM_THREADS=1)
    rows, labels = [], []
    for method in args.methods:
        for probe_dir in sorted(args.runs.glob(f"{method}/bs*/seed*/probe"), key=lambda p: int(p.parent.name.removeprefix("seed"))):
            run, per_label = check_run(probe_dir, args.data)
            rows.append({"method": method, **run})
            labels.append(per_label.assign(method=method))
    frame = pd.DataFrame(rows)
    if args.published is not None:
        published = pd.read_csv(args.published)
        published = published[(published["split"] == "test") & (published["dataset"] == load_spec(str(probe_dir / "resolved_spec.json")).dataset)]
        both = frame.merge(published, on=["method", "seed"], suffixes=("", "_published"))
        same = (both["micro_f1"] == both["micro_f1_published"]) & (both["map"] == both["map_published"])
        largest = {m: float((both[m] - both[f"{m}_published"]).abs().max()) for m in ("micro_f1", "map")}
        print(
            f"published test micro-F1 and mAP ({args.published}) reproduced exactly by {int(same.sum())} of {len(frame)} runs; "
            f"largest |difference|: micro-F1 {largest['micro_f1']:.3g}, mAP {largest['map']:.3g}"
        )
    print("every run's test scores reproduced bit for bit by the refit probe\n")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print("\nmean ± sd over seeds (fractions; predicted/gold: labels per test sample):")
    for method, block in frame.groupby("method", sort=False):
        print(f"  {method:<8} " + ", ".join(f"{c} {block[c].mean():.4f} ± {block[c].std(ddof=1):.4f}" for c in COLUMNS))
    by_label = pd.concat(labels).groupby(["label", "method"], sort=False).mean().unstack("method")
    print("\nper label, mean over seeds (test; F1 and predicted share at 0.5), most frequent first:")
    print(by_label.sort_values(("prevalence", args.methods[0]), ascending=False).to_string(float_format=lambda v: f"{v:.3f}"))
    first = frame[frame["method"] == args.methods[0]].set_index("seed")
    for other in args.methods[1:]:
        theirs = frame[frame["method"] == other].set_index("seed")
        print(f"\n{args.methods[0]} minus {other}, paired by seed (points, 95% CI):")
        for column in ("micro_f1", "micro_f1_val_threshold", "micro_f1_label_thresholds", "map", "micro_ap"):
            s = paired_statistics((first[column] - theirs[column]).dropna().to_numpy(), 0.01)
            print(f"  {column:<24} {s['mean_diff'] * 100:+.2f} [{s['ci_low'] * 100:+.2f}, {s['ci_high'] * 100:+.2f}], t-test p {s['p']:.3g}, n {s['n']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
