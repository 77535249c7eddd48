"""`python -m mscl probe`: a linear classifier on the frozen pretrained encoder.

    python -m mscl probe --data DIR --pretrained DIR --spec JSON_OR_FILE --out DIR

The encoder is rebuilt from the spec, loaded from `--pretrained/encoder.pt` and frozen; the
projection head is dropped (paper appendix). Features of every split are extracted once, in
eval mode (images: resize + centre crop; text: one pass without dropout; tabular: the
standardised features, unmasked), and cached in
`--out/features_{split}.pt`; a cache is reused while it is newer than encoder.pt and was
made by the same encoder spec, image size and sample ids.

A linear layer is then trained on the cached train features with BCE-with-logits (Adam,
seeded mini-batches). After every epoch it is evaluated on val; the epoch with the best
`probe.select_metric` (ties: the earlier epoch) is evaluated once on test. Every evaluation
returns both macro-F1 definitions (`macro_f1_caml`, `macro_f1_per_class`); `macro_f1` is the
one of the spec's dataset family (`mscl.metrics.macro_f1_definition`: the spec's
`dataset_family` when given, else the dataset's own), which metrics.json records as
`macro_f1_definition`. A dataset without a family is refused before any work.

PLM-ICD (`plm_icd` encoders) keeps its label-wise information: the probe is PLM-ICD's own
output layer, logit_l = <W3_l, V_l> + b_l, on the label-attention vectors V [N, L, d] of the
frozen encoder (transformer and label attention W1/W2 fixed; only W3 and b train;
`mscl.models.heads.LabelWiseLinear`). V is L times larger than h, so where it is kept is a
memory rule: when V of all three splits takes at most LABEL_VECTOR_BUDGET_MB as float16
(default 4 GiB; environment variable MSCL_LABEL_VECTOR_BUDGET_MB) it is extracted once and
cached in `features_{split}.pt` as float16 like any feature; otherwise it is *streamed*: never
stored, recomputed under no_grad by the frozen encoder for every probe batch (and every val
pass) from the split's cached prefix states (`--prefix-cache`: k = 0 makes that the label
attention alone, k > 0 adds the top k layers) or, without a prefix cache, from the texts
through the whole encoder, `batch_size` (the run's pretraining batch) documents at a time. Both
paths give the same V (to float tolerance) and the same outputs.

Outputs in --out: test_scores.parquet (columns id, labels = gold label names, scores = one
float32 probability per label in labels.txt order, which the file's metadata also holds as
`mscl.label_names`), metrics.json, probe_log.csv, resolved_spec.json, versions.json and
the feature caches (none when V is streamed). metrics.json writes NaN (a metric with nothing
to average) as null; its `feature_dim` is the width of one feature vector (d for PLM-ICD).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch import Tensor, nn

from mscl import cli
from mscl.data.manifest import SPLITS, read_labels
from mscl.errors import InputError
from mscl.interrupt import exit_on_sigterm
from mscl.io import atomic_path, write_json, write_text
from mscl.metrics import evaluate, macro_f1_definition
from mscl.train.data import Split
from mscl.train.features import extract_features
from mscl.train.labels import LabelMatrix
from mscl.train.pretrain import encoder_from_spec, load_run_splits
from mscl.train.runtime import (
    autocast,
    check_checkpoint,
    finish_versions,
    load_checkpoint,
    load_trainable_state,
    pick_device,
    resolve_precision,
    save_checkpoint,
    seed_everything,
    software_versions,
)
from mscl.train.spec import ProbeSpec, RunSpec, load_spec

LOG_COLUMNS = ("epoch", "train_loss", "val_selected", "val_micro_f1", "val_macro_f1", "val_map", "seconds")
# PLM-ICD's label vectors V of all three splits are cached (memory and features_{split}.pt) when
# they take at most this many bytes as float16, and streamed otherwise (module docstring). 4 GiB
# holds MIMIC-III top-50 at d = 768 (11,368 documents x 50 labels: 0.9 GB) and every embedded
# demo setting, in host and GPU memory beside the model; the full label spaces (MIMIC-III Full:
# ~0.7 TB) and MIMIC-IV's top-50 sets (over 100k documents) stream.
# The environment variable MSCL_LABEL_VECTOR_BUDGET_MB overrides it.
LABEL_VECTOR_BUDGET_MB = 4096.0
# Cached label vectors are scored this many samples at a time (bounds the float32 copy).
EVAL_CHUNK = 256
# The probe's starting bias is logit(prevalence) with the prevalence kept in [1e-4, 1 - 1e-4], so
# that a label with no (or only) positives in train starts at a finite logit of about -+9.2.
PRIOR_CLAMP = 1e-4


# ------------------------------------------------------------------------- features


def check_same_encoder(pretrained: Path, spec: RunSpec) -> None:
    """The pretraining run's resolved spec (when present) must name the same encoder."""
    recorded = pretrained / "resolved_spec.json"
    if recorded.is_file() and json.loads(recorded.read_text(encoding="utf-8")).get("encoder") != spec.encoder:
        raise InputError(
            recorded,
            "the pretrained encoder was built from a different encoder spec",
            "probe with the spec that pretrained it",
            field="encoder",
        )


def load_frozen_encoder(spec: RunSpec, num_labels: int, weights: Path, device: torch.device) -> nn.Module:
    """The spec's encoder with the pretrained weights, frozen, in eval mode (no dropout)."""
    encoder = encoder_from_spec(spec, num_labels)
    load_trainable_state(encoder, load_checkpoint(weights), weights)
    encoder.requires_grad_(False)
    return encoder.to(device).eval()


def cache_fingerprint(spec: RunSpec, split: Split) -> dict[str, Any]:
    """What the cached features depend on besides the weights (whose age is checked apart);
    PLM-ICD's label vectors say so, so that a cache of h [N, d] is never taken for them."""
    image_size = spec.pretrain.image_size if spec.modality == "image" else None
    fingerprint = {"encoder": spec.encoder, "image_size": image_size, "ids": split.ids}
    if is_label_wise(spec):
        fingerprint["representation"] = "label_vectors"
    return fingerprint


def cached_features(
    path: Path, weights: Path, split: Split, spec: RunSpec, compute: Callable[[], Tensor]
) -> Tensor:
    """Features from `path` when it is newer than `weights` and fits the spec, else computed and saved."""
    fingerprint = cache_fingerprint(spec, split)
    if path.exists() and path.stat().st_mtime_ns >= weights.stat().st_mtime_ns:
        cached = load_checkpoint(path)
        if cached.get("fingerprint") == fingerprint:
            print(f"probe: {path.name} reused from the cache", file=sys.stderr)
            return cached["features"]
    started = time.perf_counter()
    features = compute()
    save_checkpoint(path, {"fingerprint": fingerprint, "features": features})
    print(f"probe: {path.name}: {len(features)} samples in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return features


# ---------------------------------------------------------------------------- probe


def better(value: float, best: float | None) -> bool:
    """Strictly better (ties keep the earlier epoch); NaN is never better."""
    return not math.isnan(value) and (best is None or value > best)


def is_label_wise(spec: RunSpec) -> bool:
    """PLM-ICD encoders are probed label-wise on V (`LabelWiseLinear`), the others on h."""
    return spec.encoder.get("kind") == "plm_icd"


def label_vector_bytes(sizes: Sequence[int], num_labels: int, dim: int) -> int:
    """Bytes of V [N, L, d] as float16 for splits of `sizes` samples."""
    return sum(sizes) * num_labels * dim * 2


class CachedInputs:
    """Probe inputs held on the device: features h [N, F] or PLM-ICD's label vectors V
    [N, L, d] (float16, handed out as float32)."""

    def __init__(self, tensor: Tensor, device: torch.device):
        self.tensor = tensor.to(device)
        self.label_wise = tensor.dim() == 3
        self.dim = int(tensor.shape[-1])

    def __len__(self) -> int:
        return len(self.tensor)

    def take(self, index: Tensor) -> Tensor:
        """The inputs of samples `index`, float32."""
        return self.tensor[index.to(self.tensor.device)].float()

    def parts(self, index: Tensor) -> list[Tensor]:
        """How a training batch is fed: whole (cached inputs fit, by the label-vector budget)."""
        return [index]

    def batches(self) -> Iterator[Tensor]:
        """Every sample in order: h in one piece, V EVAL_CHUNK samples at a time."""
        if not self.label_wise:
            yield self.tensor.float()
            return
        for start in range(0, len(self.tensor), EVAL_CHUNK):
            yield self.tensor[start : start + EVAL_CHUNK].float()


class StreamedLabelVectors:
    """PLM-ICD's V [B, L, d] of one split, computed on request by the frozen encoder (eval
    mode, no_grad), `micro_batch` documents at a time, from the split's cached prefix states
    (`cached`: load_prefix_cache(...)[name]) or else its texts. Nothing is kept."""

    label_wise = True

    def __init__(
        self, encoder: nn.Module, split: Split, cached: Mapping[str, Tensor] | None, micro_batch: int,
        device: torch.device, precision: str,
    ):  # fmt: skip
        from mscl.train.prefix import PrefixDataset

        self.encoder, self.split, self.micro_batch, self.device, self.precision = encoder, split, micro_batch, device, precision
        self.prefix = PrefixDataset(split, cached) if cached is not None else None
        self.dim = int(encoder.output_dim)

    def __len__(self) -> int:
        return len(self.split)

    def encoder_inputs(self, rows: list[int]) -> dict[str, Tensor]:
        if self.prefix is None:
            batch = self.encoder.tokenize([self.split.items[row] for row in rows])
        else:
            from mscl.train.prefix import collate_prefix

            collated = collate_prefix([self.prefix[row] for row in rows], self.split.num_labels)
            batch = {"hidden": collated["hidden"], "attention_mask": collated["attention_mask"]}
        return {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}

    def parts(self, index: Tensor) -> list[Tensor]:
        """How a training batch is fed: `micro_batch` documents at a time, whose gradients
        accumulate. A whole probe batch of V is batch x L x d float32: 20 GB for 256
        MIMIC-IV-ICD10 notes at d = 768, where 8 at a time take 0.6 GB (docs/scale.md)."""
        return list(index.split(self.micro_batch))

    @torch.no_grad()
    def take(self, index: Tensor) -> Tensor:
        """V of samples `index` [len(index), L, d], float32."""
        parts = []
        for rows in index.cpu().split(self.micro_batch):
            with autocast(self.device, self.precision):
                parts.append(self.encoder.label_vectors(self.encoder_inputs(rows.tolist())).float())
        return torch.cat(parts)

    def batches(self) -> Iterator[Tensor]:
        """V of every sample in order, micro_batch documents at a time."""
        for start in range(0, len(self), self.micro_batch):
            yield self.take(torch.arange(start, min(start + self.micro_batch, len(self))))


ProbeInputs = Union[CachedInputs, StreamedLabelVectors]


def as_inputs(features: Tensor | ProbeInputs, device: torch.device) -> ProbeInputs:
    """A feature tensor (h [N, F] or V [N, L, d]) on the device, or probe inputs as given."""
    return CachedInputs(features, device) if isinstance(features, Tensor) else features


def probabilities(layer: nn.Module, inputs: Tensor | ProbeInputs) -> np.ndarray:
    """Sigmoid scores [N, L] of every sample, in order."""
    device = next(layer.parameters()).device
    with torch.no_grad():
        return torch.cat([torch.sigmoid(layer(batch)) for batch in as_inputs(inputs, device).batches()]).cpu().numpy()


class Standardize(nn.Module):
    """(x - mean) / std over the last (feature) dimension, with fixed statistics."""

    def __init__(self, mean: Tensor, std: Tensor):
        super().__init__()
        self.register_buffer("mean", mean.float())
        self.register_buffer("std", std.float())

    def forward(self, features: Tensor) -> Tensor:
        return (features - self.mean) / self.std


@torch.no_grad()
def feature_statistics(inputs: ProbeInputs) -> tuple[Tensor, Tensor]:
    """Mean and population std [d] of every feature dimension over the train inputs (for V,
    over samples and labels), accumulated in float64; a constant dimension gets std 1."""
    total = squares = None
    count = 0
    for batch in inputs.batches():
        flat = batch.reshape(-1, batch.shape[-1]).double()
        total = flat.sum(0) if total is None else total + flat.sum(0)
        squares = flat.square().sum(0) if squares is None else squares + flat.square().sum(0)
        count += len(flat)
    mean = total / count
    std = (squares / count - mean.square()).clamp_min(0).sqrt()
    return mean, torch.where(std > 1e-12, std, torch.ones_like(std))


def probe_layer(inputs: ProbeInputs, num_labels: int) -> nn.Module:
    """nn.Linear(F, L) on h; PLM-ICD's output layer (W3, b: `LabelWiseLinear`) on V."""
    if inputs.label_wise:
        from mscl.models.heads import LabelWiseLinear

        return LabelWiseLinear(num_labels, inputs.dim)
    return nn.Linear(inputs.dim, num_labels)


@torch.no_grad()
def start_at_label_prior(layer: nn.Module, train_labels: LabelMatrix) -> None:
    """Zero weights and bias_l = logit(train prevalence of label l): the probe starts as the
    label prior, calibrated, and the convex BCE problem has the same optimum from any start.

    Why: on standardised (zero-mean) features only the bias can express a label's base rate,
    and Adam moves it by about lr per step. On yeast (1,200 samples, 5 steps an epoch at batch
    256, prevalences 1.5%-75%, log-odds -4..+1) 100 epochs at 1e-3 left every bias within 0.5 of
    its random start, so probabilities stayed pulled towards 0.5: the BCE encoder's val micro-F1
    at the 0.5 threshold was still climbing at epoch 100 (0.576) while val mAP had peaked at
    epoch ~15, and its test micro-F1 fell from 0.643 (raw features) to 0.577 (docs/training.md).
    """
    # count / N in float32 is the float32 mean of the 0/1 column (the counts are exact integers).
    prevalence = (train_labels.column_counts().float() / len(train_labels)).clamp(PRIOR_CLAMP, 1 - PRIOR_CLAMP)
    layer.weight.zero_()
    layer.bias.copy_(torch.logit(prevalence).to(layer.bias.dtype))


def train_probe(
    features: Mapping[str, Tensor | ProbeInputs],
    labels: Mapping[str, LabelMatrix],
    cfg: ProbeSpec,
    seed: int,
    device: torch.device,
    macro_f1: str,
) -> tuple[nn.Module, int, dict[str, Any], list[dict[str, Any]]]:
    """Fit the probe layer on features["train"] (tensors, cached or streamed inputs), select the
    epoch on features["val"]; return (best layer, best epoch, its val metrics, log rows).

    `macro_f1` is the macro-F1 definition the val metrics' `macro_f1` (and so a select_metric of
    macro_f1) uses: the dataset's `mscl.metrics.macro_f1_definition`.
    """
    torch.manual_seed(seed)
    order_generator = torch.Generator().manual_seed(seed)
    train, val = as_inputs(features["train"], device), as_inputs(features["val"], device)
    # The train labels go to the device as CSR; each batch's rows are made dense there.
    train_y, val_y = labels["train"].to(device), labels["val"].to_scipy()
    # layer[0] standardises the features (or passes them through), layer[1] is the linear probe.
    standardize = Standardize(*feature_statistics(train)) if cfg.standardize else nn.Identity()
    linear = probe_layer(train, train_y.num_labels).to(device)
    start_at_label_prior(linear, train_y)
    layer = nn.Sequential(standardize, linear).to(device)
    optimizer = torch.optim.Adam(layer.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    criterion = nn.BCEWithLogitsLoss()
    best_layer, best_epoch, best_metrics, best_value, rows = layer, 0, {}, None, []
    fit_started = time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        started = time.perf_counter()
        layer.train()
        loss_sum, batches = 0.0, 0
        for index in torch.randperm(len(train), generator=order_generator).split(cfg.batch_size):
            optimizer.zero_grad(set_to_none=True)
            for part in train.parts(index):
                # Each part's mean BCE weighted by its share of the batch: the gradients add up
                # to the batch mean's (one part: the factor is exactly 1).
                loss = criterion(layer(train.take(part)), train_y.dense(part)) * (len(part) / len(index))
                loss.backward()
                loss_sum += loss.item()
            optimizer.step()
            batches += 1
        layer.eval()
        metrics = evaluate(val_y, probabilities(layer, val), macro_f1_definition=macro_f1)
        value = float(metrics[cfg.select_metric])
        if better(value, best_value):
            best_layer, best_epoch, best_metrics, best_value = copy.deepcopy(layer), epoch, metrics, value
        seconds = time.perf_counter() - started
        print(
            f"probe epoch {epoch}/{cfg.epochs}: train BCE {loss_sum / batches:.4f}, lr {cfg.lr:g}, "
            f"{len(train) / seconds:.0f} samples/s, val {cfg.select_metric} {value:.4f}, elapsed "
            f"{time.perf_counter() - fit_started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        rows.append(
            {
                "epoch": epoch,
                "train_loss": f"{loss_sum / batches:.6f}",
                "val_selected": f"{value:.6f}",
                "val_micro_f1": f"{metrics['micro_f1']:.6f}",
                "val_macro_f1": f"{metrics['macro_f1']:.6f}",
                "val_map": f"{metrics['map']:.6f}",
                "seconds": f"{seconds:.3f}",
            }
        )
    if best_epoch == 0:  # every epoch's metric was NaN: keep the last layer, say so in the log
        print(f"probe: val {cfg.select_metric} was NaN in every epoch; keeping the last epoch", file=sys.stderr)
        best_layer, best_epoch, best_metrics = layer, cfg.epochs, metrics
    print(f"probe: selected epoch {best_epoch} (val {cfg.select_metric} {best_metrics[cfg.select_metric]:.4f})", file=sys.stderr)
    return best_layer, best_epoch, best_metrics, rows


# --------------------------------------------------------------------------- outputs


def json_safe(metrics: dict[str, Any]) -> dict[str, Any]:
    """NaN -> None so that metrics.json is strict JSON."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}


def write_test_scores(path: Path, split: Split, scores: np.ndarray, vocabulary: Sequence[str]) -> None:
    """test_scores.parquet: id, gold label names, float32 scores per label (labels.txt order)."""
    names = np.asarray(vocabulary, dtype=object)
    gold = [names[split.labels.ids(row).cpu().numpy()].tolist() for row in range(len(split))]
    flat = pa.array(scores.astype(np.float32, copy=False).ravel(), type=pa.float32())  # no copy of a float32 [N, L]
    table = pa.table(
        {
            "id": pa.array(split.ids, type=pa.string()),
            "labels": pa.array(gold, type=pa.list_(pa.string())),
            "scores": pa.FixedSizeListArray.from_arrays(flat, len(vocabulary)),
        }
    )
    table = table.replace_schema_metadata({"mscl.label_names": json.dumps(list(vocabulary))})
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp)


def write_log(path: Path, rows: list[dict[str, Any]]) -> None:
    lines = [",".join(LOG_COLUMNS)] + [",".join(str(row[c]) for c in LOG_COLUMNS) for row in rows]
    write_text(path, "\n".join(lines) + "\n")


def stream_label_vectors(spec: RunSpec, splits: Mapping[str, Split], num_labels: int, budget_mb: float) -> bool:
    """Whether PLM-ICD's V of all splits exceeds the label-vector budget (then it streams);
    d comes from the model's config, so a run with cached features never loads the model."""
    from mscl.models.plm_icd import hidden_size

    try:
        dim = hidden_size(spec.encoder)
    except ValueError as error:
        raise InputError("--spec", str(error), "fix the encoder spec", field="encoder") from error
    needed = label_vector_bytes([len(split) for split in splits.values()], num_labels, dim)
    budget = int(budget_mb * 2**20)
    streamed = needed > budget
    print(
        f"probe: PLM-ICD output layer on the label vectors V ({num_labels} labels x {dim}): "
        f"{needed / 2**20:.0f} MiB as float16, budget {budget / 2**20:.0f} MiB "
        f"(MSCL_LABEL_VECTOR_BUDGET_MB): {'streamed from the encoder per batch' if streamed else 'cached'}",
        file=sys.stderr,
    )
    return streamed


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("probe", argv)
    budget_mb = float(os.environ.get("MSCL_LABEL_VECTOR_BUDGET_MB", LABEL_VECTOR_BUDGET_MB))
    exit_on_sigterm("probe: stopped by SIGTERM; cached features stay and a rerun reuses them")
    spec = load_spec(args.spec, args.selected)
    macro_f1 = macro_f1_definition(spec.dataset, None if args.spec.lstrip().startswith("{") else args.spec, spec.dataset_family)
    weights = args.pretrained / "encoder.pt"
    if not weights.is_file():
        raise InputError(weights, "pretrained encoder not found", "run `python -m mscl pretrain` for this spec first")
    check_same_encoder(args.pretrained, spec)
    check_checkpoint(weights, f"rerun the pretrain job that writes it (delete {args.pretrained} and rerun Snakemake)")
    vocabulary = read_labels(args.data)
    splits = load_run_splits(spec, args.data, vocabulary, SPLITS)
    device = pick_device()
    precision = resolve_precision(spec.pretrain.precision, device)
    seed_everything(spec.seed)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "resolved_spec.json", spec.to_dict())
    versions = software_versions(device, precision)
    write_json(out / "versions.json", versions)

    @functools.cache
    def frozen_encoder() -> nn.Module:
        """Built on the first cache miss only: fully cached runs never load the model."""
        return load_frozen_encoder(spec, len(vocabulary), weights, device)

    @functools.cache
    def prefix_states() -> dict[str, dict[str, Tensor]] | None:
        """The frozen-prefix cache, read on the first feature-cache miss only."""
        if args.prefix_cache is None:
            return None
        from mscl.train.prefix import load_prefix_cache

        return load_prefix_cache(args.prefix_cache, spec.encoder, splits)

    def prefix_of(name: str) -> dict[str, Tensor] | None:
        cached = prefix_states()
        return cached and cached[name]

    def compute(name: str) -> Tensor:
        return extract_features(frozen_encoder(), splits[name], spec, device, precision, name, prefix_of(name), label_wise)

    label_wise = is_label_wise(spec)
    if label_wise and stream_label_vectors(spec, splits, len(vocabulary), budget_mb):
        micro_batch = spec.batch_size  # fits with gradients for two views in pretraining
        features: dict[str, Any] = {
            name: StreamedLabelVectors(frozen_encoder(), splits[name], prefix_of(name), micro_batch, device, precision)
            for name in SPLITS
        }
    else:
        features = {
            name: cached_features(out / f"features_{name}.pt", weights, splits[name], spec, lambda n=name: compute(n))
            for name in SPLITS
        }
    labels = {name: splits[name].labels for name in SPLITS}
    layer, best_epoch, val_best, rows = train_probe(features, labels, spec.probe, spec.seed, device, macro_f1)
    write_log(out / "probe_log.csv", rows)
    test_scores = probabilities(layer.eval(), as_inputs(features["test"], device))
    write_test_scores(out / "test_scores.parquet", splits["test"], test_scores, vocabulary)
    test_metrics = evaluate(labels["test"].to_scipy(), test_scores, macro_f1_definition=macro_f1)
    print(
        "probe: test " + ", ".join(f"{name} {test_metrics[name]:.4f}" for name in ("micro_f1", "macro_f1", "map")),
        file=sys.stderr,
    )
    metrics = {
        "test": json_safe(test_metrics),
        "val_best": json_safe(val_best),
        "best_epoch": best_epoch,
        "select_metric": spec.probe.select_metric,
        "macro_f1_definition": macro_f1,
        "num_labels": len(vocabulary),
        "feature_dim": int(features["train"].shape[-1] if isinstance(features["train"], Tensor) else features["train"].dim),
        "ignored_label_occurrences": {name: splits[name].ignored_labels for name in SPLITS},
        "spec": spec.to_dict(),
    }
    finish_versions(out / "versions.json", versions)
    write_json(out / "metrics.json", metrics)  # last: its presence means done
    return 0
