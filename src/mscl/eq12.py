"""`python -m mscl eq12`: show that the paper's Eq. 12, as printed, trains exactly like ANY.

Eq. 12 puts the Sim-Dissim weight inside the log: log(w exp(s_ip) / sum_a exp(s_ia)) =
log w + log p_ip. log w depends on the labels only, so its gradient is zero and the loss
only shifts by a constant. This command computes, on a random multi-label batch, the
largest gradient difference between the literal form and ANY (exactly 0) and between the
weighted form (the default: w multiplies log p) and ANY (not 0).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mscl import cli
from mscl.losses import make_loss


def gradient_and_value(loss_name: str, features: torch.Tensor, labels: torch.Tensor, **options) -> tuple[torch.Tensor, float]:
    features = features.detach().requires_grad_()
    loss = make_loss(loss_name, **options)(features, labels)
    (grad,) = torch.autograd.grad(loss, features)
    return grad, loss.item()


def compare(batch: int, num_labels: int, dim: int, seed: int) -> dict[str, float]:
    generator = torch.Generator().manual_seed(seed)
    features = F.normalize(torch.randn(batch, 2, dim, generator=generator, dtype=torch.float64), dim=-1)
    labels = (torch.rand(batch, num_labels, generator=generator) < 0.3).double()
    any_grad, any_value = gradient_and_value("any", features, labels)
    literal_grad, literal_value = gradient_and_value("simdissim", features, labels, form="literal")
    weighted_grad, weighted_value = gradient_and_value("simdissim", features, labels, form="weighted")
    return {
        "max |grad(literal) - grad(any)|": (literal_grad - any_grad).abs().max().item(),
        "max |grad(weighted) - grad(any)|": (weighted_grad - any_grad).abs().max().item(),
        "loss(any)": any_value,
        "loss(literal) - loss(any)": literal_value - any_value,
        "loss(weighted)": weighted_value,
    }


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("eq12", argv)
    for key, value in compare(args.batch, args.labels, args.dim, args.seed).items():
        print(f"{key:<34} {value:.6g}")
    return 0
