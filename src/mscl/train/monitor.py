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

# Ridge penalty per train sample on standardised features: lambda = 0.01 * n. Small enough
# that the readout is close to least squares, and large enough to keep the solve well
# conditioned when the features have more dimensions than the train split has samples.
RIDGE_PENALTY = 0.01


def ridge_readout_map(train_x: Tensor, train_y: Tensor, val_x: Tensor, val_y: Tensor, penalty: float = RIDGE_PENALTY) -> float:
    """Val mAP (mean over labels with a val positive) of a ridge readout fitted on train.

    Features are standardised by the train split's statistics (a constant dimension gets std 1).
    The targets are centred, and the intercept is the train label mean. The solve runs in
    float64.
    """
    x = train_x.double()
    mean = x.mean(0)
    std = x.std(0, unbiased=False)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))
    x = (x - mean) / std
    y = train_y.double()
    y_mean = y.mean(0)
    gram = x.T @ x + penalty * len(x) * torch.eye(x.shape[1], dtype=x.dtype)
    weights = torch.linalg.solve(gram, x.T @ (y - y_mean))
    scores = ((val_x.double() - mean) / std) @ weights + y_mean
    # AP ranks within a label: a sigmoid (monotone, float64) maps the scores into [0, 1] as the
    # metric requires, leaving the value unchanged.
    _, average_precision = per_label_auc_and_ap(val_y.numpy().astype(np.float32), torch.sigmoid(scores).numpy())
    return float(np.nanmean(average_precision)) if np.isfinite(average_precision).any() else float("nan")
