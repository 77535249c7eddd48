"""Data-parallel pretraining (DDP): N processes train one model on one global batch.

`python -m mscl pretrain` started by torchrun (`python -m torch.distributed.run --standalone
--nproc_per_node N -m mscl pretrain ...`, what the workflow runs for an encoder with
`resources.gpu: N > 1`) finds its rank in torchrun's environment (`Ranks.from_environment`)
and takes part in one run; started any other way it is the one process of a run, exactly as
before. What makes the N processes one run:

- **The batch.** `batch_size` stays the global batch; every rank loads a contiguous slice of
  batch_size / N samples of it (`mscl.train.data.RankSlices`), so the global batch of step s
  is the single-process batch of step s, in the same order, at any N.
- **The loss.** Every rank gathers the two-view projections of all ranks (`gather_features`,
  differentiable) and their CSR label rows (`gather_labels`, in the same rank order), and
  computes the loss of the whole global batch, as one process would on the concatenated
  batch. Gradients: the gather's backward sums, over ranks, the gradient each rank's
  (identical) loss sends to a rank's features, i.e. N times dL/dz_r; DDP then averages the
  parameter gradients over the N ranks, which gives exactly dL/dtheta of the single process.
  Loss parameters (prototypes) are inside the DDP module and averaged too.
- **Random streams.** Every rank seeds the run's seed before the model is built (identical
  initial weights) and shuffles with the same generator (identical global batches); then
  ranks 1..N-1 reseed their global RNGs (`seed_rank`), so that their colour jitter, masks and
  dropout differ from rank 0's instead of repeating them sample for sample. Image crops come
  from per-sample seeds the shared generator draws (`mscl.train.data.SeededViews`), so every
  sample is cropped as in one process.

"""

from __future__ import annotations

import os
import random
import warnings
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
from torch import Tensor

from mscl.errors import InputError
from mscl.train.launch import RANK_VARIABLES
# How long a rank waits in a collective for the others. Rank 0 alone writes checkpoints and
# runs the convergence monitor between steps (a pass over train and val), so the others may
# wait minutes; NCCL's default of 10 minutes is too short for a large model's monitor.
COLLECTIVE_TIMEOUT = timedelta(hours=1)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run: rank, number of processes, rank on this node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_environment(cls) -> "Ranks":
        """torchrun's RANK, WORLD_SIZE and LOCAL_RANK; one process when they are not set."""
        if not any(name in os.environ for name in RANK_VARIABLES):
            return cls()
        try:
            values = [int(os.environ[name]) for name in RANK_VARIABLES]
        except (KeyError, ValueError):
            shown = {name: os.environ.get(name) for name in RANK_VARIABLES}
            raise InputError(
                "environment", f"incomplete or non-integer distributed variables {shown}",
                "launch with torchrun (`python -m torch.distributed.run --nproc_per_node N -m mscl pretrain ...`), "
                "or unset RANK, WORLD_SIZE and LOCAL_RANK for one process",
            ) from None  # fmt: skip
        return cls(*values)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def main(self) -> bool:
        """Rank 0: the one that writes the run's files and its log."""
        return self.rank == 0

    def barrier(self) -> None:
        if self.distributed:
            torch.distributed.barrier()


def local_batch_size(batch_size: int, world_size: int) -> int:
    """batch_size / world_size: every rank's share of the global batch (a ValueError unless it
    divides evenly, since unequal shares would weight the ranks' gradients unequally)."""
    if batch_size % world_size:
        lower, upper = batch_size - batch_size % world_size, batch_size + world_size - batch_size % world_size
        raise ValueError(
            f"batch_size {batch_size} is the global batch and does not split evenly over {world_size} processes; "
            f"use a multiple of {world_size} (e.g. {lower or upper} or {upper}), or another number of processes"
        )
    return batch_size // world_size


def start(ranks: Ranks) -> torch.device:
    """Join the process group (NCCL on CUDA, one GPU per local rank; gloo on CPU) and return
    this rank's device."""
    if torch.cuda.is_available():
        visible = torch.cuda.device_count()
        if ranks.local_rank >= visible:
            raise InputError(
                "torchrun", f"local rank {ranks.local_rank} needs GPU {ranks.local_rank}, but this node shows {visible} GPU(s)",
                "start as many processes per node as the job has GPUs (encoders.<name>.resources.gpu sets both in the workflow)",
            )  # fmt: skip
        device = torch.device("cuda", ranks.local_rank)
        torch.cuda.set_device(device)
        torch.distributed.init_process_group("nccl", timeout=COLLECTIVE_TIMEOUT, device_id=device)
        return device
    torch.distributed.init_process_group("gloo", timeout=COLLECTIVE_TIMEOUT)
    return torch.device("cpu")


def stop(ranks: Ranks) -> None:
    if ranks.distributed and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def seed_rank(seed: int, rank: int) -> None:
    """Give rank `rank` its own python, numpy and torch streams, derived from (seed, rank).
    Rank 0 keeps the run's seed: a one-process run is rank 0 of one."""
    if rank == 0:
        return
    derived = int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])
    random.seed(derived)
    np.random.seed(derived)
    torch.manual_seed(derived)


class _GatherWithGradient(torch.autograd.Function):
    """all_gather whose backward returns to each rank the gradient of its own part, summed over
    the ranks (every rank's loss depends on every part), by an all-reduce of the whole gradient
    (a few MB: B x 2 x D), which every backend has.

    Not torch.distributed.nn.functional.all_gather: besides being deprecated, its gloo backward
    is wrong when the gradient reaching the gather is not contiguous, which the losses' view-
    major transpose makes it (torch 2.15: it allocates the receive buffers with the gradient's
    strides and scatters contiguous data into them; a 2-rank Sim-Dissim gradient was off by up
    to 3.4, where this gather matches one process to 1e-12)."""

    @staticmethod
    def forward(ctx, local: Tensor, group: object) -> Tensor:
        ctx.group, ctx.rows = group, len(local)
        parts = [torch.empty_like(local) for _ in range(torch.distributed.get_world_size(group))]
        torch.distributed.all_gather(parts, local.contiguous(), group=group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, gradient: Tensor) -> tuple[Tensor, None]:
        total = gradient.contiguous().clone()
        torch.distributed.all_reduce(total, group=ctx.group)
        start = torch.distributed.get_rank(ctx.group) * ctx.rows
        return total[start : start + ctx.rows], None


def gather_features(features: Tensor, group: object = None) -> Tensor:
    """Every rank's features [b, ...] concatenated in rank order [N*b, ...]; differentiable:
    each rank's part gets back the gradient of every rank's loss with respect to it."""
    return _GatherWithGradient.apply(features, group)


def gather_labels(labels: Tensor, group: object = None) -> Tensor:
    """Every rank's sparse CSR label rows [b, L] as one CSR [N*b, L], in rank order (the order
    of `gather_features`). Ranks hold different numbers of label ids, so the ids are padded to
    the longest rank's count for the gather and cut back after it."""
    if labels.layout != torch.sparse_csr:
        raise ValueError(f"gather_labels takes sparse CSR labels (mscl.losses.csr_labels), got layout {labels.layout}")
    world_size = torch.distributed.get_world_size(group)
    crow, columns, values = labels.crow_indices(), labels.col_indices(), labels.values()
    # Per rank: its rows' lengths and its number of ids, in one gather.
    sizes = torch.cat([crow[1:] - crow[:-1], crow[-1:]])
    gathered_sizes = torch.empty(world_size * len(sizes), dtype=sizes.dtype, device=sizes.device)
    torch.distributed.all_gather_into_tensor(gathered_sizes, sizes, group=group)
    gathered_sizes = gathered_sizes.view(world_size, -1)
    lengths, counts = gathered_sizes[:, :-1].reshape(-1), gathered_sizes[:, -1].tolist()
    longest = max(max(counts), 1)  # at least one slot: a global batch without any label still gathers
    parts = []
    for tensor in (columns, values):
        padded = torch.zeros(longest, dtype=tensor.dtype, device=tensor.device)
        padded[: len(tensor)] = tensor
        gathered = torch.empty(world_size * longest, dtype=tensor.dtype, device=tensor.device)
        torch.distributed.all_gather_into_tensor(gathered, padded, group=group)
        parts.append(torch.cat([gathered[rank * longest : rank * longest + count] for rank, count in enumerate(counts)]))
    all_crow = torch.zeros(len(lengths) + 1, dtype=crow.dtype, device=crow.device)
    all_crow[1:] = torch.cumsum(lengths, 0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")  # as in csr_labels
        return torch.sparse_csr_tensor(all_crow, parts[0], parts[1], size=(len(lengths), labels.shape[1]), check_invariants=False)


def gather_objects(value: object, ranks: Ranks) -> list[object] | None:
    """Every rank's `value`, in rank order, on rank 0 (None on the others)."""
    gathered = [None] * ranks.world_size if ranks.main else None
    torch.distributed.gather_object(value, gathered, dst=0)
    return gathered


def mean_over_ranks(value: Tensor) -> Tensor:
    """The mean of a scalar over the ranks (the same on every rank)."""
    total = value.detach().clone()
    torch.distributed.all_reduce(total)
    return total / torch.distributed.get_world_size()


def decided_by_rank0(flag: bool, device: torch.device) -> bool:
    """Rank 0's `flag` on every rank: a decision all ranks must take alike (checkpoint now?)
    made by rank 0's clock."""
    value = torch.tensor([int(flag)], device=device)
    torch.distributed.broadcast(value, src=0)
    return bool(value.item())
