"""The projection head of the contrastive phase (removed before the linear probe)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class ProjectionHead(nn.Module):
    """z = normalize(W2 relu(W1 h + b1) + b2): a 2-layer MLP with ReLU, output L2-normalised.

    The paper's head has two layers with ReLU and output size D_P = 256. The hidden width is not
    given; the default `hidden_dim = in_dim` follows Khosla et al.'s SupCon head.
    """

    def __init__(self, in_dim: int, out_dim: int = 256, hidden_dim: int | None = None):
        super().__init__()
        hidden_dim = in_dim if hidden_dim is None else hidden_dim
        self.in_dim, self.hidden_dim, self.out_dim = in_dim, hidden_dim, out_dim
        self.layers = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(inplace=True), nn.Linear(hidden_dim, out_dim))

    def forward(self, h: Tensor) -> Tensor:
        """[..., in_dim] representations -> [..., out_dim] unit vectors."""
        return F.normalize(self.layers(h), dim=-1)
