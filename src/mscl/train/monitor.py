"""Pretraining's convergence monitor: how well the labels can be read linearly from the
encoder's features on val, every `pretrain.monitor_every` epochs (docs/training.md).

The readout is a closed-form ridge regression, not the probe. Train and val features are
taken in eval mode and standardised by the train split's mean and std. The multi-hot labels
are regressed on the train features with penalty `RIDGE_PENALTY` per train sample, and the
readout's val scores give the val mAP. It is deterministic, costs seconds on the claim
check's data, and is the same for every method: the `bce` baseline's classifier head is not
used. Its value tracks the probe's val mAP but is not equal to it. It answers "has the
representation stopped improving?", not "what is the result?".
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from mscl.metrics import per_label_auc_and_ap
from mscl.train.labels import LabelMatrix

# Ridge penalty per train sample on standardised features: lambda = 0.01 * n. Small enough
# that the readout is close to least squares, and large enough to keep the solve well
# conditioned when the features have more dimensions than the train split has samples.
RIDGE_PENALTY = 0.01
# Labels are regressed this many matrix cells at a time (block width x the larger split's
# samples; 2**24 float64 cells = 128 MiB): every claim-check dataset fits in one block.
RIDGE_BLOCK_CELLS = 1 << 24


def ridge_readout_map(
    train_x: Tensor, train_labels: LabelMatrix, val_x: Tensor, val_labels: LabelMatrix, penalty: float = RIDGE_PENALTY
) -> float:
    """Val mAP (mean over labels with a val positive) of a ridge readout fitted on train.

    Features are standardised by the train split's statistics (a constant dimension gets std 1).
    The targets are centred, and the intercept is the train label mean. The solve runs in
    float64, once factorised; labels are regressed and scored a block of columns at a time
    (`RIDGE_BLOCK_CELLS`), so neither the targets nor the val scores are ever whole [N, L]
    matrices. A label's readout does not depend on the others, so the blocks change nothing.
    """
    x = train_x.double()
    mean = x.mean(0)
    std = x.std(0, unbiased=False)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))
    x = (x - mean) / std
    val = (val_x.double() - mean) / std
    y_mean = train_labels.column_counts().double() / len(x)  # the float64 mean of each 0/1 column
    gram = x.T @ x + penalty * len(x) * torch.eye(x.shape[1], dtype=x.dtype)
    factors = torch.linalg.lu_factor(gram)
    val_y = val_labels.to_scipy()
    block = max(1, RIDGE_BLOCK_CELLS // max(len(x), len(val)))
    average_precision = []
    for start in range(0, train_labels.num_labels, block):
        stop = min(start + block, train_labels.num_labels)
        y = train_labels.column_block(start, stop).double()
        weights = torch.linalg.lu_solve(*factors, x.T @ (y - y_mean[start:stop]))
        scores = val @ weights + y_mean[start:stop]
        # AP ranks within a label: a sigmoid (monotone, float64) maps the scores into [0, 1] as
        # the metric requires, leaving the value unchanged.
        average_precision.append(per_label_auc_and_ap(val_y[:, start:stop], torch.sigmoid(scores).numpy())[1])
    per_label = np.concatenate(average_precision)
    return float(np.nanmean(per_label)) if np.isfinite(per_label).any() else float("nan")
