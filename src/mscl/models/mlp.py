"""A multilayer perceptron for tabular (feature-vector) datasets (spec kind `mlp`).

Spec: `{"kind": "mlp", "input_dim": 103, "hidden_dims": [256, 512, 256], "dropout": 0.2}`.

Each hidden layer is Linear -> ReLU -> Dropout, and h is the last hidden layer's output
(output_dim = hidden_dims[-1]). The defaults are MulSupCon's yeast backbone (103-256-512-256,
dropout 0.2; Zhang & Wu, AAAI 2024, whose code follows C-GMVAE's MLP). Inputs are the
manifest's `features`, standardised with the train split's mean and standard deviation by the
data path (`mscl.train.data.standardize`), so the model itself has no input statistics.
`input_dim` is written in the spec (not read from the data) so that a spec describes one
model; the training job checks it against the manifest's `feature_dim`.
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import Tensor, nn

from mscl.models import Encoder, check_positive_int, check_probability, spec_error, validated_spec

DEFAULT_HIDDEN_DIMS = (256, 512, 256)


class MLPEncoder(Encoder):
    """Feature vectors [B, input_dim] -> h [B, hidden_dims[-1]]."""

    modality = "tabular"

    def __init__(self, spec: Mapping[str, Any], input_dim: int, hidden_dims: list[int], dropout: float):
        super().__init__(spec)
        layers: list[nn.Module] = []
        width = input_dim
        for hidden in hidden_dims:
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        self.layers = nn.Sequential(*layers)
        self.output_dim = width

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.layers(batch["features"])


def check_hidden_dims(spec: Mapping[str, Any]) -> list[int]:
    value = spec["hidden_dims"]
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value or not all(
        isinstance(width, int) and not isinstance(width, bool) and width > 0 for width in value
    ):
        raise spec_error("mlp", "hidden_dims", f"must be a non-empty list of positive integers, got {value!r}", f"use e.g. {list(DEFAULT_HIDDEN_DIMS)}")
    return list(value)


def build_mlp(spec: Mapping[str, Any], num_labels: int) -> MLPEncoder:
    """MLPEncoder from an `mlp` spec (num_labels is not used)."""
    spec = validated_spec(spec, required=("input_dim",), defaults={"hidden_dims": list(DEFAULT_HIDDEN_DIMS), "dropout": 0.2})
    return MLPEncoder(spec, check_positive_int(spec, "input_dim"), check_hidden_dims(spec), check_probability(spec, "dropout"))
