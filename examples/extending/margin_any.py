"""A whole loss module of one's own, with an option, as a plugin: the config lists this file
under `plugins:`, names the loss `margin_any` in an experiment block's `losses`, and sets its
option under `training.loss_options.margin_any` (docs/extending.md).

ANY with an additive margin (CosFace's, on supervised contrastive pairs): every pair of samples
that shares a label is a positive, and a positive's cosine similarity counts `margin` less in
its softmax, so that the encoder must pull positives closer by that much before their loss
falls as far. With `margin: 0` it is the built-in ANY loss.

    L_i = -(1/N_i) sum_{p in P(i)} log( exp((z_i.z_p - m) / tau) / sum_{a != i} exp((z_i.z_a - m [a in P(i)]) / tau) )

A loss a weight function cannot express is a module like this one: `factory(temperature,
**options)` builds it, and `forward(features, labels)` gets the L2-normalised projections
[B, V, D] (V views of B samples) and the labels [B, L] (a sparse CSR tensor, or dense 0/1).
"""

import torch
from torch import nn

import mscl


class MarginAnyLoss(nn.Module):
    def __init__(self, temperature: float, margin: float = 0.0):
        super().__init__()
        if not 0.0 <= margin < 2.0:  # cosine similarities lie in [-1, 1]
            raise ValueError(f"margin must be in [0, 2), got {margin!r}")
        self.temperature, self.margin = float(temperature), float(margin)

    def forward(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        # fp32 under bf16 autocast: a softmax over the batch needs the precision.
        with torch.autocast(device_type=features.device.type, enabled=False):
            samples, views, _ = features.shape
            z = features.float().transpose(0, 1).reshape(samples * views, -1)  # anchor v * B + b
            dense = (labels.to_dense() if labels.layout != torch.strided else labels).float()
            shares = (dense @ dense.T) > 0  # [B, B]: a label in common (ANY's positives)
            itself = torch.eye(samples * views, dtype=torch.bool, device=z.device)
            positive = shares.repeat(views, views) & ~itself
            logits = (z @ z.T - self.margin * positive) / self.temperature
            log_prob = logits.masked_fill(itself, float("-inf")).log_softmax(dim=1)
            count = positive.sum(1)
            anchors = count > 0  # an anchor without a positive is skipped, as the built-in losses do
            if not anchors.any():
                return logits.sum() * 0.0  # an exact 0 that keeps the graph
            summed = torch.where(positive, log_prob, torch.zeros_like(log_prob)).sum(1)
            return (-summed[anchors] / count[anchors]).mean()


mscl.register_loss("margin_any", MarginAnyLoss, options=("margin",), display="ANY + margin")
