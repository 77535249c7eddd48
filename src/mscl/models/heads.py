"""The projection head of the contrastive phase (removed before the linear probe) and the
label-wise linear probe of PLM-ICD encoders."""

from __future__ import annotations

import math

import torch
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


class LabelWiseLinear(nn.Module):
    """PLM-ICD's output layer as the linear probe of a `plm_icd` encoder: one weight vector and
    one bias per label, logit_l = <W3_l, V_l> + b_l for label vectors V [B, L, d] -> [B, L].

    It is L independent `nn.Linear(d, 1)` classifiers, each on its own label's vector, and is
    initialised as they would be: weight and bias uniform in +-1/sqrt(d) (the `nn.Linear` the
    probe uses for every other encoder draws the same way).
    """

    def __init__(self, num_labels: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_labels, dim))
        self.bias = nn.Parameter(torch.empty(num_labels))
        bound = 1.0 / math.sqrt(dim)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, vectors: Tensor) -> Tensor:
        """[B, L, d] label vectors -> [B, L] logits."""
        return torch.einsum("bld,ld->bl", vectors, self.weight) + self.bias
