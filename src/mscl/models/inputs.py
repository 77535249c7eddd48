"""The inputs themselves as features: the encoder of the `logreg` reference method.

`logreg` is per-label logistic regression on the data as given: the linear probe (BCE on a
linear layer, features standardised, epoch chosen on val) applied to an identity encoder. It is
the simple baseline that supervised BCE training of a real encoder must at least match, on the
same split and inputs. A tabular batch's feature vectors pass through unchanged. An image
batch's eval views (resized, centre-cropped, normalised `image_size` pixels) are flattened to
3 * image_size^2 values. Text has no numeric input to regress on, so it is refused.
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import Tensor

from mscl import registry
from mscl.models import Encoder


class InputFeatures(Encoder):
    """Batch -> its inputs as a flat [B, output_dim] float tensor; no parameters."""

    def __init__(self, spec: Mapping[str, Any], modality: str, output_dim: int):
        super().__init__(spec)
        self.modality = modality
        self.output_dim = output_dim

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        if self.modality == "tabular":
            return batch["features"].float()
        return batch["images"].float().flatten(1)


def input_features(encoder_spec: Mapping[str, Any], image_size: int) -> InputFeatures:
    """The identity encoder for data an `encoder_spec` reads (its kind sets the modality);
    ValueError for text, or a tabular spec without `input_dim`."""
    modality = registry.encoder_modality(encoder_spec.get("kind"))
    if modality == "tabular":
        if not isinstance(encoder_spec.get("input_dim"), int):
            raise ValueError("method 'logreg' reads the features as they are, so the mlp encoder spec needs its input_dim. Fix: set encoder.spec.input_dim")
        return InputFeatures(encoder_spec, modality, int(encoder_spec["input_dim"]))
    if modality == "image":
        return InputFeatures(encoder_spec, modality, 3 * image_size * image_size)
    raise ValueError(f"method 'logreg' (logistic regression on the inputs) needs tabular or image data, not {modality} data. Fix: leave logreg out of this block's losses")
