"""`python -m mscl chance`: the label-prior ("chance") reference row of every results table.

    python -m mscl chance --data DIR --out DIR [--dataset NAME] [--dataset-family FAMILY]

The label-prior predictor ignores its input: every sample gets, for every label, that label's
frequency in the TRAIN split (the fraction of train samples carrying it, labels.txt order).
Its val and test metrics come from the same `mscl.metrics.evaluate` as the probes' (threshold
0.5, strictly greater), so each metric's floor sits next to the methods in the tables:

* micro-/macro-F1: label j is predicted for every sample when its train frequency exceeds
  0.5, and for none otherwise. Without such a label both are 0; with one, its recall is 1
  and its precision its test prevalence. `macro_f1` is the dataset family's definition
  (`mscl.metrics.macro_f1_definition`, recorded as `macro_f1_definition`), as the probe's. This is the floor of a score-based predictor at the
  probe's threshold, not the best F1 a constant predictor could reach (predicting every label
  would give micro-F1 2p/(1+p), p the share of positive cells).
* AUC: within a label every sample has the same score, so each label's AUC is exactly 0.5
  (all ties count one half) and macro-AUC is 0.5. Micro-AUC ranks the flattened cells by
  their label's train frequency: it is the "frequent labels first" baseline, usually well
  above 0.5 when the label distribution is skewed.
* mAP: with every score of a label tied, a label's AP is its test prevalence, so mAP is the
  mean test prevalence over labels with a test positive.
* P@k: every sample gets the same top k, the k most frequent train labels (ties: lower label
  index, as `evaluate`), so P@k is the mean over samples of how many of those k it carries / k.

Only the manifest's `id` and `labels` columns are read (never images, texts or features).
Outputs in --out, each written atomically and in the probe's format (`mscl.train.probe`), so
that `collect` reads them like any run: metrics.json (test, val_best = the val metrics,
best_epoch 0, select_metric, macro_f1_definition, num_labels, feature_dim 0,
ignored_label_occurrences and a small spec of the run axes collect reads: dataset, loss "chance",
encoder_name "chance", batch_size 0, seed 0, and dataset_family when --dataset-family gives
one: the family of a dataset of one's own, as a run spec's) and
test_scores.parquet (`mscl.train.probe.write_test_scores`). The Snakemake rule writes them
to `{results}/runs/{dataset}/chance/chance/bs0/seed0/probe/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mscl import cli
from mscl.data.manifest import SPLITS, read_labels, read_split
from mscl.errors import InputError
from mscl.io import write_json
from mscl.layout import CHANCE  # the label prior's method key and encoder name
from mscl.metrics import evaluate, macro_f1_definition

SELECT_METRIC = "micro_f1"  # nothing is selected (no epochs); recorded as the probe's default


def read_label_split(data_dir: Path, split: str, vocabulary: Sequence[str]):
    """A `mscl.train.data.Split` of the ids and (sparse) labels only (no content column read)."""
    from mscl.train.data import Split
    from mscl.train.labels import LabelMatrix

    frame = read_split(data_dir, split, columns=["id", "labels"])
    labels, ignored = LabelMatrix.from_label_lists(frame["labels"].tolist(), vocabulary)
    if len(labels) == 0:
        raise InputError(data_dir / f"{split}.parquet", f"split {split!r} is empty", "re-run the preprocessing rule for this dataset", field=split)
    return Split(frame["id"].astype(str).tolist(), [], labels, ignored)


def label_prior(train_labels) -> np.ndarray:
    """Each label's train frequency: the fraction of train samples carrying it, float64 [L],
    from a `mscl.train.labels.LabelMatrix` (exact counts, then one division)."""
    return train_labels.column_counts().numpy().astype(np.float64) / len(train_labels)


def prior_scores(prior: np.ndarray, num_samples: int) -> np.ndarray:
    """The label prior as every sample's scores, float32 [N, L] (what the probe's scores are)."""
    return np.broadcast_to(prior.astype(np.float32), (num_samples, prior.size)).copy()


def chance_metrics(data_dir: Path, dataset: str | None = None, family: str | None = None) -> tuple[dict[str, Any], Any, np.ndarray, list[str]]:
    """(metrics.json document, test Split, test scores, vocabulary) of the label prior; `family`
    is the dataset's family when its name has none (`mscl.metrics.dataset_family`)."""
    from mscl.train.probe import json_safe

    setting = dataset or data_dir.name
    macro_f1 = macro_f1_definition(setting, None if dataset else data_dir, family)
    vocabulary = read_labels(data_dir)
    splits = {name: read_label_split(data_dir, name, vocabulary) for name in SPLITS}
    prior = label_prior(splits["train"].labels)
    scores = {name: prior_scores(prior, len(splits[name])) for name in ("val", "test")}
    results = {split: evaluate(splits[split].labels.to_scipy(), scores[split], macro_f1_definition=macro_f1) for split in ("val", "test")}
    document = {
        "test": json_safe(results["test"]),
        "val_best": json_safe(results["val"]),
        "best_epoch": 0,
        "select_metric": SELECT_METRIC,
        "macro_f1_definition": macro_f1,
        "num_labels": len(vocabulary),
        "feature_dim": 0,
        "ignored_label_occurrences": {name: splits[name].ignored_labels for name in SPLITS},
        "spec": {"dataset": setting, "loss": CHANCE, "encoder_name": CHANCE, "batch_size": 0, "seed": 0, **({"dataset_family": family} if family else {})},
    }
    return document, splits["test"], scores["test"], vocabulary


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("chance", argv)
    from mscl.train.probe import write_test_scores
    from mscl.train.runtime import finish_versions

    document, test_split, test_scores, vocabulary = chance_metrics(args.data, args.dataset, args.dataset_family)
    write_test_scores(args.out / "test_scores.parquet", test_split, test_scores, vocabulary)
    finish_versions(args.out / "versions.json", {})
    write_json(args.out / "metrics.json", document)
    test = document["test"]
    shown = ", ".join(f"{name} {test[name]:.4f}" if test[name] is not None else f"{name} NaN" for name in ("micro_f1", "macro_f1", "map", "micro_auc"))
    print(f"chance: {document['spec']['dataset']}: label prior of {len(test_split)} test samples x {len(vocabulary)} labels: {shown}")
    return 0
