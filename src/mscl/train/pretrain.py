"""`python -m mscl pretrain`: contrastive pretraining of encoder + projection head.

    python -m mscl pretrain --data DIR --spec JSON_OR_FILE --out DIR [--stop-after-epoch K]

One plain loop: every step draws a batch, makes two views per sample (two random image crops,
two randomly masked copies of a feature vector, or two dropout-noised passes over the same
tokenised text), projects them to L2-normalised features [B, 2, D] and minimises the spec's
multi-label contrastive loss. The learning rate follows a linear warm-up then a cosine decay
to 0, set by hand every step.

The two reference methods run through the same job: `bce` swaps the projection head for a
linear classifier and the contrastive loss for BCE on both views' logits (supervised training,
same optimiser, schedule and views); `none` trains nothing and saves the encoder as
initialised, with the same seed and therefore the same initial weights as every other method.

At the end of an epoch before the last, the full training state is checkpointed atomically when
at least CHECKPOINT_INTERVAL_S seconds (60; environment variable MSCL_CHECKPOINT_INTERVAL_S) have
passed since the last checkpoint. A finished run deletes its checkpoint once encoder.pt is
written (a grid of finished checkpoints fills a disk). A rerun of an unfinished run with the
same --out and the same spec resumes from its checkpoint and ends with weights identical (on
CPU) to an uninterrupted run. A checkpoint written by another spec or other data is discarded (the log says which keys
changed) and the run starts over. SIGTERM exits at once; the last checkpoint stays. Every
epoch adds one line to the log (stderr): loss, learning rate, throughput and elapsed time. `--stop-after-epoch K` exits with code 3 right after
checkpointing epoch K, which simulates a job killed by the cluster (tests use it to check
resuming).

Outputs in --out: resolved_spec.json, versions.json, train_log.csv, head.pt and, written last,
encoder.pt (the encoder's trainable parameters and buffers); checkpoint.pt only while the run is
unfinished; TensorBoard event files of the training curves (`mscl.train.curves`; a resumed run
continues its curve), unless $MSCL_TENSORBOARD is 0.

Started by torchrun with N > 1 processes, the same command trains one model on N devices
(DDP, `mscl.train.distributed`): every rank computes the loss of the whole global batch of
`batch_size` samples, rank 0 writes every file and the log, and every rank resumes from
rank 0's checkpoint. A rank that hangs fails the run after $MSCL_DDP_TIMEOUT_S seconds (300),
with a message naming it (`distributed.Watchdog`). The untrained methods (`none`, `logreg`)
have nothing to share: under torchrun rank 0 saves the initial encoder as the one process of
the run, and the other ranks exit at once.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor, nn
from tqdm import tqdm

from mscl import cli
from mscl.defaults import EXIT_STOPPED
from mscl.data.manifest import read_labels
from mscl.errors import InputError
from mscl.interrupt import exit_on_sigterm
from mscl.io import write_json, write_text
from mscl.losses import SupervisedBCE, build_loss, loss_options_taken
from mscl.train.augment import color_views
from mscl.train.curves import NO_CURVES, PRETRAIN_METRICS, Curves, curve_interval, open_curves, peak_memory, points_per_epoch
from mscl.train.decode import WORKERS, device_views, resolve_decode
from mscl.train.features import VIEW_KEYS, extract_features, text_inputs
from mscl.train.monitor import ridge_readout_map
from mscl.train.data import TOKEN_DROP_RATE, Split, drop_tokens, load_split, make_loader, pretrain_dataset, standardize, worker_count
from mscl.train import distributed
from mscl.train.distributed import UNWATCHED, Ranks, Unwatched, Watchdog
from mscl.provenance import code_record
from mscl.train.runtime import (
    autocast,
    capture_rng,
    finish_versions,
    load_checkpoint,
    load_trainable_state,
    pick_device,
    resolve_precision,
    restore_rng,
    save_checkpoint,
    seed_everything,
    software_versions,
    trainable_state,
)
from mscl.train.spec import FOLDER_KINDS, UNTRAINED_METHODS, RunSpec, load_spec, pretrain_view

# Seconds of training a killed job may lose. Checkpointing every epoch cost more than the
# training itself for small models: a yeast MLP run (150 epochs of 0.2 s) wrote 730 MB of
# checkpoints and spent 23 of its 37 s waiting on the disk. The cadence never changes results.
# The environment variable MSCL_CHECKPOINT_INTERVAL_S overrides it (0: every epoch).
CHECKPOINT_INTERVAL_S = 60.0
CHECKPOINT_FORMAT = 1
# val_map_readout: the convergence monitor's val mAP (mscl.train.monitor), empty in epochs it skips.
LOG_COLUMNS = ("epoch", "steps", "loss", "lr", "samples_per_second", "seconds", "val_map_readout")
PROGRESS_EVERY = 10  # steps between progress-bar loss updates (each one syncs the GPU)
# The train_log.csv columns that are also an epoch curve (`epoch/<column>`, mscl.train.curves).
EPOCH_CURVES = ("loss", "lr", "samples_per_second", "seconds", "val_map_readout")


# ------------------------------------------------------------------------ pure helpers


def warmup_steps_for(total_steps: int, warmup_fraction: float) -> int:
    """Number of warm-up steps: `warmup_fraction` of all steps, rounded."""
    return round(total_steps * warmup_fraction)


def learning_rate(step: int, total_steps: int, warmup_steps: int, base_lr: float) -> float:
    """LR of 0-based `step`: linear warm-up to base_lr over `warmup_steps`, then cosine to 0.

    Warm-up step s uses base_lr * (s + 1) / warmup_steps, so the first step already moves;
    afterwards lr = base_lr * (1 + cos(pi * t)) / 2 with t = (step - warmup) / (total - warmup),
    which is base_lr at the first post-warm-up step and reaches 0 at step == total_steps.
    """
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def steps_per_epoch_for(train_size: int, batch_size: int, max_steps: int | None) -> int:
    """Full batches per epoch (drop_last), capped by max_steps_per_epoch."""
    full_batches = train_size // batch_size
    return full_batches if max_steps is None else min(full_batches, max_steps)


# -------------------------------------------------------------------------- validation


def check_model_folder(encoder: dict[str, Any]) -> None:
    """A folder-based encoder's path must be an existing folder unless it is a hub id.

    Uses the models' own rule (`mscl.models.text.looks_local`): `name` and `org/name` are hub
    ids (for users with a hub connection); anything else must exist locally.
    """
    if encoder["kind"] not in FOLDER_KINDS:
        return
    from mscl.models.packaged import is_packaged
    from mscl.models.text import looks_local

    path = str(encoder["path"])
    if not is_packaged(path) and looks_local(path) and not Path(path).expanduser().is_dir():
        raise InputError(
            path,
            "model folder not found",
            "point encoder.path at a local model folder (`python -m mscl make-tiny-models --out DIR` writes tiny ones)",
            field="encoder.path",
        )


def check_feature_dim(spec: RunSpec, data_dir: Path, split: Split) -> None:
    """A tabular encoder's `input_dim` must be the manifest's number of features."""
    if spec.modality == "tabular" and spec.encoder.get("input_dim") != split.items.shape[1]:
        raise InputError(
            data_dir / "train.parquet",
            f"the encoder spec says input_dim {spec.encoder.get('input_dim')!r} but the manifest's "
            f"features have {split.items.shape[1]} values",
            f"set encoder.spec.input_dim to {split.items.shape[1]}",
            field="encoder.input_dim",
        )


def load_run_splits(spec: RunSpec, data_dir: Path, vocabulary: list[str], names: Sequence[str]) -> dict[str, Split]:
    """The named splits (train among them) as this run's encoder reads them: tabular features
    are checked against `input_dim` and standardised by the train split, the same way in
    pretraining and in the probe."""
    splits = {name: load_split(data_dir, name, vocabulary, spec.modality) for name in names}
    if spec.modality != "tabular":
        return splits
    check_feature_dim(spec, data_dir, splits["train"])
    return {name: standardize(split, splits["train"]) for name, split in splits.items()}


def validate_inputs(spec: RunSpec, data_dir: Path, world_size: int = 1) -> tuple[list[str], Split]:
    """Cheap checks before any model is built or any output written; returns (vocabulary, train),
    the train features standardised. `world_size` processes share each batch."""
    try:
        distributed.local_batch_size(spec.batch_size, world_size)
    except ValueError as error:
        raise InputError("--spec", str(error), "change batch_size in the run spec or the number of processes (torchrun --nproc_per_node)", field="batch_size")
    check_model_folder(spec.encoder)
    vocabulary = read_labels(data_dir)
    train = load_run_splits(spec, data_dir, vocabulary, ["train"])["train"]
    if spec.batch_size > len(train):
        raise InputError(
            data_dir / "train.parquet",
            f"batch_size {spec.batch_size} is larger than the train split ({len(train)} samples)",
            f"use a batch_size <= {len(train)}",
            field="batch_size",
        )
    return vocabulary, train


# ---------------------------------------------------------------------------- model


def build_model(spec: RunSpec, num_labels: int, device: torch.device) -> tuple[nn.Module, nn.Module, nn.Module]:
    """Encoder, projection head and loss (the loss may hold prototypes), on `device`; for the
    `bce` baseline the head is a linear classifier and the loss BCE."""
    from mscl.models import ProjectionHead

    encoder = encoder_from_spec(spec, num_labels)
    if spec.loss.name == "bce":
        return encoder.to(device), nn.Linear(encoder.output_dim, num_labels).to(device), SupervisedBCE().to(device)
    head = ProjectionHead(encoder.output_dim, spec.pretrain.projection_dim)
    try:
        # The label count and the projection dimension, for a loss that takes them (prototypes).
        run_values = {"num_labels": num_labels, "dim": spec.pretrain.projection_dim}
        run_options = {key: value for key, value in run_values.items() if key in loss_options_taken(spec.loss.name)}
        loss_fn = build_loss(spec.loss, **run_options)
    except ValueError as error:
        raise InputError("--spec", str(error), "fix loss_options", field="loss_options")
    return encoder.to(device), head.to(device), loss_fn.to(device)


def encoder_from_spec(spec: RunSpec, num_labels: int) -> nn.Module:
    """`mscl.models.build_encoder` (for method `logreg` the identity encoder over the inputs,
    `mscl.models.inputs`), its spec errors turned into an InputError."""
    from mscl.models import build_encoder

    try:
        if spec.loss.name == "logreg":
            from mscl.models.inputs import input_features

            return input_features(spec.encoder, spec.pretrain.image_size)
        return build_encoder(spec.encoder, num_labels)
    except ValueError as error:
        raise InputError("--spec", str(error), "fix the encoder spec", field="encoder")


def trainable(module: nn.Module) -> list[nn.Parameter]:
    return [p for p in module.parameters() if p.requires_grad]


def make_optimizer(spec: RunSpec, encoder: nn.Module, head: nn.Module, loss_fn: nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum (images) or AdamW without decay on bias/LayerNorm (text).

    Loss parameters (prototypes) never decay: they are L2-normalised before use, so decay
    would only shrink their norm and thereby enlarge their effective step size.
    """
    from mscl.models import parameter_groups

    cfg = spec.pretrain
    prototype_group = [{"params": trainable(loss_fn), "weight_decay": 0.0}]
    if cfg.optimizer == "sgd":
        groups = [{"params": trainable(encoder) + trainable(head), "weight_decay": cfg.weight_decay}]
        groups = [g for g in groups + prototype_group if g["params"]]
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
    groups = parameter_groups(nn.ModuleDict({"encoder": encoder, "head": head}), cfg.weight_decay)
    groups = [g for g in list(groups) + prototype_group if list(g["params"])]
    return torch.optim.AdamW(groups, lr=cfg.lr)


class ContrastiveStep(nn.Module):
    """A step's forward: two views through encoder and head, then the loss of the batch.

    In a distributed run (`gather`) the loss is that of the global batch: every rank's
    projections and label rows are gathered first (`mscl.train.distributed`). One module holds
    encoder, head and loss so that DDP averages the gradients of all their parameters, the
    prototypes of the prototype losses included."""

    def __init__(self, encoder: nn.Module, head: nn.Module, loss_fn: nn.Module, spec: RunSpec, device: torch.device, gather: bool):
        super().__init__()
        self.encoder, self.head, self.loss_fn = encoder, head, loss_fn
        self.modality, self.text_views, self.device, self.gather = spec.modality, spec.pretrain.text_views, device, gather

    def forward(self, batch: dict[str, Any], labels: Tensor) -> Tensor:
        features = contrastive_features(self.encoder, self.head, batch, self.modality, self.text_views, self.device)
        if self.gather:
            features, labels = distributed.gather_features(features), distributed.gather_labels(labels)
        return self.loss_fn(features, labels)


@dataclass
class TrainingState:
    """What the loop trains, how far it has got, and what it runs under: everything a step
    reads or changes and everything a checkpoint holds."""

    spec: RunSpec
    encoder: nn.Module
    head: nn.Module  # projection head; the `bce` baseline's linear classifier
    loss_fn: nn.Module  # may hold parameters (the prototype losses' prototypes)
    optimizer: torch.optim.Optimizer
    generator: torch.Generator  # shuffles the batches; checkpointed so a resumed run draws the same ones
    device: torch.device
    precision: str  # "bf16" or "fp32", resolved for the device
    steps_per_epoch: int
    forward: nn.Module  # the ContrastiveStep over encoder, head and loss; DDP-wrapped in a distributed run
    ranks: Ranks
    epoch: int = 0  # epochs done
    step: int = 0  # optimisation steps done
    # The mscl files (path -> sha256) of the earlier segments of a resumed run, from its
    # checkpoint: versions.json names every code that trained it (mscl.provenance).
    earlier_code: list[dict[str, str] | None] = field(default_factory=list)

    @property
    def total_steps(self) -> int:
        """Optimisation steps of the whole run (the LR schedule's length)."""
        return self.steps_per_epoch * self.spec.pretrain.epochs


def start_training(
    spec: RunSpec, num_labels: int, steps_per_epoch: int, generator: torch.Generator, device: torch.device, precision: str,
    ranks: Ranks = Ranks(),
) -> TrainingState:  # fmt: skip
    """The models and optimiser of a fresh run, at epoch 0; in a distributed run with
    SyncBatchNorm on CUDA and the step wrapped in DDP."""
    encoder, head, loss_fn = build_model(spec, num_labels, device)
    if ranks.distributed:
        encoder, head = (synchronise_batch_norm(module, device, ranks) for module in (encoder, head))
    optimizer = make_optimizer(spec, encoder, head, loss_fn)
    # The `bce` baseline's loss is a mean over samples: the mean of the ranks' equal-sized
    # local means, which DDP's gradient averaging takes, is already the global batch's.
    forward: nn.Module = ContrastiveStep(encoder, head, loss_fn, spec, device, gather=ranks.distributed and spec.loss.name != "bce")
    if ranks.distributed:
        from torch.nn.parallel import DistributedDataParallel

        # No buffer copy from rank 0 at every step: BatchNorm statistics are synchronised (CUDA)
        # or kept per rank (CPU) on purpose, and every other buffer is equal on all ranks.
        device_ids = [device.index] if device.type == "cuda" else None
        forward = DistributedDataParallel(forward, device_ids=device_ids, forward_sync_buffers=False)
    return TrainingState(spec, encoder, head, loss_fn, optimizer, generator, device, precision, steps_per_epoch, forward, ranks)


def synchronise_batch_norm(module: nn.Module, device: torch.device, ranks: Ranks) -> nn.Module:
    """`module` with SyncBatchNorm for BatchNorm on CUDA: each step's statistics over the global
    batch's 2B views, as one process computes them. Per-rank statistics would also let the
    loss tell a rank's own samples from the others' by their normalisation (the shortcut
    SimCLR's global BatchNorm closes). SyncBatchNorm runs on CUDA only: on CPU the statistics
    stay per rank, and rank 0 says so."""
    if not any(isinstance(layer, nn.modules.batchnorm._BatchNorm) for layer in module.modules()):
        return module
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(module)
    if ranks.main:
        print("pretrain: BatchNorm statistics are per process (SyncBatchNorm needs CUDA), so they differ from one process's", file=sys.stderr)
    return module


def contrastive_features(
    encoder: nn.Module, head: nn.Module, batch: dict[str, Any], modality: str, text_views: str, device: torch.device
) -> Tensor:
    """Two views per sample through encoder and head: [B, 2, D] (L2-normalised projections,
    or the `bce` baseline's logits)."""
    if modality in VIEW_KEYS:
        key = VIEW_KEYS[modality]
        # [B, 2, ...]; images the loader left encoded (pretrain.decode) are decoded and cut here.
        views = device_views(batch, device) if "encoded" in batch else batch[key].to(device, non_blocking=True)
        # One pass over both views (view-major), so BatchNorm statistics see both.
        flat = torch.cat(views.unbind(1))
        if modality == "image":
            flat = color_views(flat)  # uint8 crops -> flipped, jittered, normalised floats
        projected = head(encoder({key: flat}))
        return projected.view(2, len(views), -1).transpose(0, 1)
    tokens = {key: value.to(device, non_blocking=True) for key, value in text_inputs(encoder, batch).items()}
    if text_views == "token_dropout":
        passes = [drop_tokens(tokens, TOKEN_DROP_RATE) for _ in range(2)]
    else:
        passes = [tokens, tokens]  # two passes in train mode: different dropout masks (SimCSE)
    return torch.stack([head(encoder(view)) for view in passes], dim=1)


def training_loader(
    spec: RunSpec, train: Split, prefix_cache: Path | None, generator: torch.Generator, device: torch.device, ranks: Ranks = Ranks()
) -> torch.utils.data.DataLoader:
    """Shuffled two-view batches of the train split (in a distributed run this rank's slice of
    each global batch); a top-layer text encoder with a prefix cache reads the cached states
    instead of the texts."""
    cfg = spec.pretrain
    options = dict(
        shuffle=True, drop_last=True, generator=generator, num_workers=worker_count(cfg.num_workers, spec.modality, cfg.image_size), device=device,
        rank=ranks.rank, world_size=ranks.world_size,
    )  # fmt: skip
    if prefix_cache is not None:
        from mscl.train.prefix import PrefixDataset, collate_prefix, load_prefix_cache

        cached = load_prefix_cache(prefix_cache, spec.encoder, {"train": train})["train"]
        return make_loader(PrefixDataset(train, cached), spec.batch_size, collate_fn=collate_prefix, **options)
    decode = resolve_decode(cfg.decode, device) if spec.modality == "image" else WORKERS
    dataset = pretrain_dataset(train, spec.modality, cfg.image_size, cfg.crop_scale_min, cfg.feature_mask_rate, decode)
    return make_loader(dataset, spec.batch_size, **options)


# ------------------------------------------------------------------------ bookkeeping


def log_epoch(path: Path, row: dict[str, Any], curves: Curves, state: TrainingState, elapsed_s: float) -> None:
    """An epoch's log (rank 0): its train_log.csv row, its curves' epoch scalars at the epoch's
    last step with the peak memory so far, and its line on stderr."""
    append_log_row(path, row)
    curves.scalars(state.step, {f"epoch/{key}": float(row[key]) for key in EPOCH_CURVES if row[key]} | peak_memory(state.device))
    print(
        f"pretrain epoch {row['epoch']}/{state.spec.pretrain.epochs}: loss {row['loss']}, lr {row['lr']}, "
        f"{row['samples_per_second']} samples/s, epoch {row['seconds']} s, elapsed {elapsed_s:.1f} s"
        + (f", val mAP (ridge readout) {row['val_map_readout']}" if row["val_map_readout"] else ""),
        file=sys.stderr,
        flush=True,
    )


def append_log_row(path: Path, row: dict[str, Any]) -> None:
    """Rewrite train_log.csv atomically with the rows of earlier epochs plus `row`.

    Rows of this epoch or later (left by a run killed between logging and checkpointing)
    are replaced, so a resumed run never duplicates an epoch.
    """
    lines = path.read_text(encoding="utf-8").splitlines()[1:] if path.exists() else []
    kept = [line for line in lines if line and int(line.split(",")[0]) < row["epoch"]]
    new = ",".join(str(row[column]) for column in LOG_COLUMNS)
    write_text(path, "\n".join([",".join(LOG_COLUMNS), *kept, new]) + "\n")


def checkpoint_state(state: TrainingState) -> dict[str, Any] | None:
    """Everything a resumed run needs, as weights_only-loadable values, on rank 0 (None on the
    other ranks). Called by every rank: the model and optimiser are the same on all of them,
    their random streams are not, so a distributed run's checkpoint holds those of ranks
    1..N-1 too (`rank_rng`)."""
    rng = capture_rng(state.generator)
    saved = {"world_size": state.ranks.world_size}
    if state.ranks.distributed:
        every_rank = distributed.gather_objects(rng, state.ranks)
        if not state.ranks.main:
            return None
        rng, saved["rank_rng"] = every_rank[0], every_rank[1:]
    return {
        "format": CHECKPOINT_FORMAT,
        "epoch": state.epoch,
        "step": state.step,
        "steps_per_epoch": state.steps_per_epoch,
        "spec": pretrain_view(state.spec.to_dict()),
        "encoder": trainable_state(state.encoder),
        "head": state.head.state_dict(),
        "loss": state.loss_fn.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "rng": rng,
        # This segment's code and the earlier segments' (plain strings: weights_only-loadable).
        "code": {"earlier": state.earlier_code, "now": code_record()["files"]},
        **saved,
    }


def spec_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two spec mappings (for the log)."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed = []
        for key in sorted(set(old) | set(new), key=str):
            changed += spec_changes(old.get(key), new.get(key), f"{prefix}{key}.")
        return changed
    return [] if old == new else [prefix.rstrip(".")]


def stale_checkpoint_reason(saved: dict[str, Any], spec: RunSpec, steps_per_epoch: int, world_size: int = 1) -> str | None:
    """Why a checkpoint cannot be resumed by this run (None: it can)."""
    if saved.get("format") != CHECKPOINT_FORMAT:
        return f"it has checkpoint format {saved.get('format')!r}, this code writes {CHECKPOINT_FORMAT}"
    # Probe settings are no part of pretraining (checkpoints from before this rule hold them too).
    old, new = pretrain_view(saved.get("spec") or {}), pretrain_view(spec.to_dict())
    if old != new:
        return f"the run spec changed ({', '.join(spec_changes(old, new)) or 'format'})"
    if saved["steps_per_epoch"] != steps_per_epoch:
        return f"it has {saved['steps_per_epoch']} steps per epoch, this data gives {steps_per_epoch} (the data changed)"
    # Each process has its own random streams (crops, masks, dropout): they resume only onto
    # as many processes. (Checkpoints from before distributed runs have no world_size: one.)
    if saved.get("world_size", 1) != world_size:
        return f"it was written by a run of {saved.get('world_size', 1)} process(es), this run has {world_size}"
    return None


def resume(state: TrainingState, path: Path) -> None:
    """Restore into `state` the checkpoint at `path` if this spec wrote it (every rank reads it;
    each restores its own random streams).

    A checkpoint of another spec, other data or another number of processes (a config edited
    between runs) is stale: it is deleted by rank 0, with the training log beside it, once
    every rank has read it, and `state` stays at epoch 0.
    """
    saved = load_checkpoint(path)
    reason = stale_checkpoint_reason(saved, state.spec, state.steps_per_epoch, state.ranks.world_size)
    if reason is not None:
        state.ranks.barrier()
        if state.ranks.main:
            print(f"pretrain: discarding {path.name}: {reason}; starting over from epoch 1", file=sys.stderr)
            path.unlink()
            (path.parent / "train_log.csv").unlink(missing_ok=True)
        return
    load_trainable_state(state.encoder, saved["encoder"], path)
    state.head.load_state_dict(saved["head"])
    state.loss_fn.load_state_dict(saved["loss"])
    state.optimizer.load_state_dict(saved["optimizer"])
    restore_rng(saved["rank_rng"][state.ranks.rank - 1] if state.ranks.rank else saved["rng"], state.generator)
    state.epoch, state.step = int(saved["epoch"]), int(saved["step"])
    # None: a segment whose code is unknown (a checkpoint of an mscl that did not record it)
    code = saved.get("code", {"earlier": [], "now": None})
    state.earlier_code = [*code["earlier"], code["now"]]
    if state.ranks.main:
        print(f"pretrain: resumed from {path.name} after epoch {state.epoch}", file=sys.stderr)


# ------------------------------------------------------------------------------ loop


def train_epoch(
    state: TrainingState, loader: torch.utils.data.DataLoader, watchdog: Watchdog | Unwatched = UNWATCHED, curves: Curves = NO_CURVES
) -> dict[str, Any]:
    """Train the next epoch (steps_per_epoch optimisation steps), count it in `state`, and
    return its train_log.csv row. Each step, and the epoch's end, tells `watchdog` (a
    distributed run's) that this rank reached it; every `curve_interval` steps the mean loss
    since the last point goes to `curves` (mscl.train.curves)."""
    spec, cfg, device = state.spec, state.spec.pretrain, state.device
    epoch, steps = state.epoch + 1, state.steps_per_epoch
    every = curve_interval(steps, points_per_epoch()) if curves.on else 0
    warmup = warmup_steps_for(state.total_steps, cfg.warmup_fraction)
    parameters = [p for group in state.optimizer.param_groups for p in group["params"]]
    for module in (state.encoder, state.head, state.loss_fn):
        module.train()
    loss_sum = torch.zeros((), device=device)
    curve_mark = torch.zeros((), device=device)  # loss_sum at the last curve point
    lr = 0.0
    started = time.perf_counter()
    progress = tqdm(total=steps, desc=f"pretrain epoch {epoch}/{cfg.epochs}", disable=None if state.ranks.main else True, file=sys.stderr)
    for index, batch in zip(range(steps), loader):
        watchdog.stepped(epoch, state.step + index + 1)
        lr = learning_rate(state.step + index, state.total_steps, warmup, cfg.lr)
        for group in state.optimizer.param_groups:
            group["lr"] = lr
        labels = batch["labels"].to(device, non_blocking=True)
        with autocast(device, state.precision):
            loss = state.forward(batch, labels)
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip is not None:
            nn.utils.clip_grad_norm_(parameters, cfg.grad_clip)
        state.optimizer.step()
        loss_sum += loss.detach()
        if every and (index + 1) % every == 0:
            curves.loss(state.step + index + 1, (loss_sum - curve_mark) / every, lr)
            curve_mark = loss_sum.clone()
        progress.update()
        if (index + 1) % PROGRESS_EVERY == 0:
            progress.set_postfix(loss=f"{loss_sum.item() / (index + 1):.4f}")
    progress.close()
    seconds = time.perf_counter() - started
    watchdog.reached(f"the end of epoch {epoch}")
    if state.ranks.distributed:  # every rank's loss is the global batch's, except bce's local mean
        loss_sum = distributed.mean_over_ranks(loss_sum)
    mean_loss = loss_sum.item() / steps
    if not math.isfinite(mean_loss):
        raise RuntimeError(f"pretraining loss is {mean_loss} in epoch {epoch}; lower pretrain.lr or use fp32")
    state.epoch, state.step = epoch, state.step + steps
    return {
        "epoch": epoch,
        "steps": steps,
        "loss": f"{mean_loss:.6f}",
        "lr": f"{lr:.6g}",
        "samples_per_second": f"{steps * spec.batch_size / seconds:.2f}",
        "seconds": f"{seconds:.2f}",
    }


class ReadoutMonitor:
    """The convergence monitor (`pretrain.monitor_every`): val mAP of a ridge readout on the
    encoder's eval-mode train and val features (`mscl.train.monitor`).

    It runs under a forked RNG, and its loaders draw nothing from the training generator, so
    the trained weights do not depend on whether or how often it runs."""

    def __init__(self, spec: RunSpec, data_dir: Path, vocabulary: list[str], prefix_cache: Path | None, device: torch.device, precision: str):
        self.spec, self.device, self.precision = spec, device, precision
        self.splits = load_run_splits(spec, data_dir, vocabulary, ["train", "val"])
        self.cached = None
        if prefix_cache is not None:
            from mscl.train.prefix import load_prefix_cache

            self.cached = load_prefix_cache(prefix_cache, spec.encoder, self.splits)

    def due(self, epoch: int) -> bool:
        every = self.spec.pretrain.monitor_every
        return every > 0 and (epoch % every == 0 or epoch == self.spec.pretrain.epochs)

    def value(self, encoder: nn.Module) -> float:
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            encoder.eval()
            features = {
                name: extract_features(encoder, split, self.spec, self.device, self.precision, f"readout {name}", self.cached and self.cached[name])
                for name, split in self.splits.items()
            }
            encoder.train()
        return ridge_readout_map(features["train"], self.splits["train"].labels, features["val"], self.splits["val"].labels)


def save_initial_encoder(spec: RunSpec, num_labels: int, out: Path, versions: dict[str, Any]) -> int:
    """The `none` baseline: the encoder as the seed initialises it, saved untrained (`logreg`:
    the identity encoder, which has nothing to save but the empty state the probe checks)."""
    encoder = encoder_from_spec(spec, num_labels)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "resolved_spec.json", pretrain_view(spec.to_dict()))
    open_curves(out, pretrain_view(spec.to_dict()), "pretrain", ()).close()  # no curve: its spec and settings (HPARAMS table)
    finish_versions(out / "versions.json", versions)
    save_checkpoint(out / "encoder.pt", trainable_state(encoder))
    print(f"pretrain: method {spec.loss.name!r}: saved the encoder as initialised (no training)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("pretrain", argv)
    checkpoint_interval_s = float(os.environ.get("MSCL_CHECKPOINT_INTERVAL_S", CHECKPOINT_INTERVAL_S))
    exit_on_sigterm("pretrain: stopped by SIGTERM; the last epoch checkpoint stays and a rerun resumes from it")
    ranks = Ranks.from_environment()
    spec = load_spec(args.spec, args.selected)
    if spec.loss.name in UNTRAINED_METHODS and ranks.distributed:
        # Nothing to train, so nothing to share (the workflow starts these methods without
        # torchrun): rank 0 is the one process of the run, without a process group or GPUs of
        # the others, and the other ranks leave at once.
        if not ranks.main:
            return 0
        print(f"pretrain: method {spec.loss.name!r} trains nothing: rank 0 saves the encoder alone, the other {ranks.world_size - 1} rank(s) exit", file=sys.stderr)
        ranks = Ranks()
    limits = distributed.Limits.from_environment() if ranks.distributed else distributed.Limits()
    vocabulary, train = validate_inputs(spec, args.data, ranks.world_size)
    if train.ignored_labels and ranks.main:
        print(f"pretrain: ignored {train.ignored_labels} train label(s) outside labels.txt", file=sys.stderr)
    device = distributed.start(ranks, limits) if ranks.distributed else pick_device()
    try:
        with distributed.watch(ranks, limits) as watchdog:
            return run(args, spec, vocabulary, train, device, ranks, checkpoint_interval_s, watchdog)
    finally:
        distributed.stop(ranks)


def run(
    args: argparse.Namespace, spec: RunSpec, vocabulary: list[str], train: Split, device: torch.device, ranks: Ranks,
    checkpoint_interval_s: float, watchdog: Watchdog | Unwatched = UNWATCHED,
) -> int:  # fmt: skip
    """Pretrain as rank `ranks.rank` of `ranks.world_size` processes (one: the usual run).

    In a distributed run, rank 0's work alone (files, TensorBoard curves, the convergence monitor)
    sits in `watchdog.rank0_alone` blocks: the other ranks wait for it there, not in a collective."""
    cfg = spec.pretrain
    precision = resolve_precision(cfg.precision, device)
    versions = {**software_versions(device, precision), "world_size": ranks.world_size}
    generator = seed_everything(spec.seed)
    if spec.loss.name in UNTRAINED_METHODS:  # nothing to train (always one process: main)
        return save_initial_encoder(spec, len(vocabulary), args.out, versions)
    steps_per_epoch = steps_per_epoch_for(len(train), spec.batch_size, cfg.max_steps_per_epoch)
    state = start_training(spec, len(vocabulary), steps_per_epoch, generator, device, precision, ranks)
    distributed.seed_rank(spec.seed, ranks.rank)  # after the model: every rank starts from the same weights
    loader = training_loader(spec, train, args.prefix_cache, generator, device, ranks)

    out: Path = args.out
    checkpoint = out / "checkpoint.pt"
    if checkpoint.exists():
        resume(state, checkpoint)
        watchdog.resumed(state.epoch, state.step)
    # Rank 0's work alone sits in rank0_alone blocks: the other ranks wait for it in the store,
    # as long as rank 0 responds (up to $MSCL_DDP_RANK0_TIMEOUT_S, 3600 s), not in a collective,
    # whose timeout ($MSCL_DDP_TIMEOUT_S + 60 s) is sized for a step, not for a monitor's pass.
    # Where the training images were decoded: views differ slightly between the two (docs/gpu.md).
    versions["image_decode"] = getattr(loader.dataset, "decode", None)
    monitor = None
    with watchdog.rank0_alone("the outputs' set-up"):
        if ranks.main:
            out.mkdir(parents=True, exist_ok=True)
            write_json(out / "resolved_spec.json", pretrain_view(spec.to_dict()))
            write_json(out / "versions.json", versions)
            monitor = ReadoutMonitor(spec, args.data, vocabulary, args.prefix_cache, device, precision) if cfg.monitor_every else None

    started = last_checkpoint = time.perf_counter()
    with open_curves(out, pretrain_view(spec.to_dict()), "pretrain", PRETRAIN_METRICS, resumed_step=state.step if state.epoch else None) if ranks.main else NO_CURVES as curves:
        while state.epoch < cfg.epochs:
            row = train_epoch(state, loader, watchdog, curves)
            epoch = state.epoch
            with watchdog.rank0_alone(f"epoch {epoch}'s log and convergence monitor"):
                if ranks.main:
                    row["val_map_readout"] = f"{monitor.value(state.encoder):.6f}" if monitor and monitor.due(epoch) else ""
                    log_epoch(out / "train_log.csv", row, curves, state, time.perf_counter() - started)
            stopping = args.stop_after_epoch == epoch
            # No checkpoint after the last epoch (unless asked to stop there): the final files follow.
            # Rank 0's clock decides for every rank: all of them take part in writing one.
            checkpointing = stopping or (epoch < cfg.epochs and time.perf_counter() - last_checkpoint >= checkpoint_interval_s)
            if ranks.distributed:
                checkpointing = distributed.decided_by_rank0(checkpointing, device)
            if checkpointing:
                saved = checkpoint_state(state)
                with watchdog.rank0_alone(f"epoch {epoch}'s checkpoint"):
                    if ranks.main:
                        save_checkpoint(checkpoint, saved)
                last_checkpoint = time.perf_counter()
            if stopping:
                if ranks.main:
                    print(f"pretrain: stopped after epoch {epoch} as asked (exit {EXIT_STOPPED})", file=sys.stderr)
                return EXIT_STOPPED

    if not ranks.main:  # leaves the run: rank 0's final files below keep no rank waiting
        return 0
    save_checkpoint(out / "head.pt", {k: v.detach().cpu() for k, v in state.head.state_dict().items()})
    finish_versions(out / "versions.json", versions, state.earlier_code)
    save_checkpoint(out / "encoder.pt", trainable_state(state.encoder))  # last: its presence means done
    # A finished run never resumes, and its checkpoint (weights + optimiser state: 1.1 GB for a
    # RoBERTa-base PLM-ICD run) would fill the disk over a grid: the paper's smoke grid hit 47 GB
    # after 35 of its 117 runs. It goes once the run's own outputs are in place.
    checkpoint.unlink(missing_ok=True)
    return 0
