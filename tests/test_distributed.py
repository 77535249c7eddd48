"""Distributed pretraining (DDP, `mscl.train.distributed`), on CPU processes with gloo.

- Every loss, computed on a global batch gathered over 2 and over 3 processes, equals one
  process's loss on the concatenated batch: the loss value and, after DDP's averaging, the
  gradient of every parameter (prototypes included), in float64. The batch has uneven label
  cardinality over the ranks (0 to 4 labels a sample) and anchors without a positive (empty
  label sets).
- `python -m torch.distributed.run --nproc_per_node 2 -m mscl pretrain` (the workflow's command)
  gives the weights of one process at the same global batch, and a DDP run stopped after its
  first epoch and resumed equals an uninterrupted one bit for bit.

All test names carry `distributed` or `ddp`: `pytest -k "ddp or distributed"` runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

LOSSES = ("all", "any", "mulsupcon", "jaccard", "sim", "dissim", "simdissim", "eq12", "proto", "msc", "bce")
BATCH, FEATURES, DIM, NUM_LABELS = 12, 5, 4, 7  # 12 samples split over 2 and over 3 ranks
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------ losses on a gathered batch


def global_batch() -> tuple[torch.Tensor, list[list[int]]]:
    """Two views of 12 samples (float64 inputs) and label sets of 0 to 4 labels: rank slices
    hold different numbers of label ids, and the empty sets (samples 3 and 10, on different
    ranks) are anchors without any positive."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(BATCH, 2, FEATURES, generator=generator, dtype=torch.float64)
    labels = [[0, 1, 2, 3], [0], [1, 4], [], [2, 5, 6], [0, 1], [6], [3, 4, 5, 6], [1], [0, 2], [], [5]]
    return inputs, labels


class Projection(nn.Module):
    """A linear map to unit vectors (or, for bce, to per-label logits) and the loss, as one
    module the way `mscl.train.pretrain.ContrastiveStep` holds them, so that DDP averages the
    gradients of both (the prototypes of proto and msc)."""

    def __init__(self, loss: str, group: object = None, gather: bool = False):
        super().__init__()
        from mscl.losses import SupervisedBCE, make_loss

        torch.manual_seed(1)  # the same parameters in every process
        width = NUM_LABELS if loss == "bce" else DIM
        self.linear = nn.Linear(FEATURES, width, dtype=torch.float64)
        options = {"num_labels": NUM_LABELS, "dim": DIM} if loss in ("proto", "msc") else {}
        self.loss = SupervisedBCE() if loss == "bce" else make_loss(loss, **options).double()
        self.is_bce, self.group, self.gather = loss == "bce", group, gather

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        from mscl.train.distributed import gather_features, gather_labels

        outputs = self.linear(inputs)
        features = outputs if self.is_bce else nn.functional.normalize(outputs, dim=-1)
        if self.gather:
            features, labels = gather_features(features, self.group), gather_labels(labels, self.group)
        return self.loss(features, labels)


def one_process(loss: str) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradients of one process on the whole batch."""
    from mscl.losses import csr_labels

    inputs, labels = global_batch()
    model = Projection(loss)
    value = model(inputs, csr_labels(labels, NUM_LABELS))
    value.backward()
    return value.item(), {name: parameter.grad for name, parameter in model.named_parameters()}


def check_rank(loss: str, rank: int, world_size: int, group: object) -> None:
    """This rank's slice through DDP: the loss (every rank's is the global batch's; bce's local
    means average to it) and the averaged gradients equal one process's."""
    from torch.nn.parallel import DistributedDataParallel

    from mscl.losses import csr_labels

    expected_loss, expected_gradients = one_process(loss)
    inputs, labels = global_batch()
    size = BATCH // world_size
    rows = slice(rank * size, (rank + 1) * size)
    model = Projection(loss, group, gather=loss != "bce")  # bce is not gathered, as in pretrain
    ddp = DistributedDataParallel(model, process_group=group)
    value = ddp(inputs[rows], csr_labels(labels[rows], NUM_LABELS))
    value.backward()
    if loss == "bce":
        value = value.detach().clone()
        torch.distributed.all_reduce(value, group=group)
        value /= world_size
    torch.testing.assert_close(value.item(), expected_loss, rtol=1e-12, atol=0, msg=f"{loss}, {world_size} ranks: loss")
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(parameter.grad, expected_gradients[name], rtol=1e-12, atol=1e-15, msg=lambda m: f"{loss}, {world_size} ranks, {name}: {m}")


def loss_ranks(index: int, store: str) -> None:
    """One of 3 gloo processes: every loss over all 3 ranks, then over ranks 0 and 1 (a
    subgroup, so that one set of processes checks both sizes)."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=index, world_size=3)
    try:
        pair = torch.distributed.new_group([0, 1])  # every rank takes part in creating it
        for loss in LOSSES:
            check_rank(loss, index, 3, None)
            if index < 2:
                check_rank(loss, index, 2, pair)
    finally:
        torch.distributed.destroy_process_group()


def test_distributed_losses_and_gradients_equal_one_process_on_the_concatenated_batch(tmp_path: Path) -> None:
    # Forked, not spawned: the ranks start with this process's modules, torch._dynamo (which
    # DDP's constructor imports: 2.5 s) included, instead of importing them 3 times over.
    # They only run small float64 CPU ops.
    import torch._dynamo  # noqa: F401

    torch.multiprocessing.start_processes(loss_ranks, args=(str(tmp_path / "store"),), nprocs=3, join=True, start_method="fork")
