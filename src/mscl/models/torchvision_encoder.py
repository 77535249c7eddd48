"""Any classifier of torchvision.models as an image encoder (spec kind `torchvision`).

Spec: `{"kind": "torchvision", "arch": NAME, "weights": null | "none" | "/path/file.pt" | "IMAGENET1K_V1",
"options": {}}`.

- `arch`: a name of `torchvision.models.list_models(module=torchvision.models)` (resnet18,
  mobilenet_v3_small, efficientnet_b0, convnext_tiny, vit_b_16, swin_t, ...) whose final
  classification layer is a Linear layer: every one but squeezenet1_0/1_1, whose classifier is
  a convolution, refused with the alternatives.
- h is the input of that final Linear layer, which is replaced by the identity: output_dim is
  its in_features. The final layer is the model's last module holding parameters, as in every
  torchvision classifier. For most archs h is the pooled feature (resnet18 512, efficientnet_b0
  1280, convnext_tiny 768, vit_b_16's class token 768); where the classifier is itself a small
  MLP it is the MLP's last hidden layer (mobilenet_v3_small 1024, vgg16 4096, maxvit_t 512).
- Auxiliary classifiers (googlenet's aux1/aux2, inception_v3's AuxLogits: the model's children
  named aux*) are removed, so that the model returns h alone in training mode too.
- `weights`: null or `none` -> random initialisation (torch's global RNG). A local file -> a
  state dict read with `torch.load(path, weights_only=True)`: of the whole torchvision
  classifier (the final layer's and the auxiliary classifiers' keys are dropped), of the model
  without them, or this encoder's own `state_dict()` (its `backbone.` prefix is stripped);
  everything else must match exactly. Any other value is a torchvision weights name of `arch`
  (`IMAGENET1K_V1`, `DEFAULT`, ...), which torchvision downloads and caches (needs internet
  unless it is in the torch hub cache).
- `options`: keyword arguments passed on to the torchvision builder, e.g. `{image_size: 64}`
  for vit_* or `{input_size: [64, 64]}` for maxvit_t, whose input size is fixed (224 by
  default: set it to the run's `pretrain.image_size`), or `{dropout: 0.0}`.

Images come in as for `resnet` (`{"images": [B, 3, H, W]}`, normalised), at the run's
`pretrain.image_size`; the modality (image) gives the same default optimiser and schedule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torchvision
from torch import Tensor, nn
from torchvision.models import WeightsEnum

from mscl.models import Encoder, spec_error, validated_spec
from mscl.models.image import read_state_dict, resolve_weights

KIND = "torchvision"
LINEAR_EXAMPLES = "resnet18, mobilenet_v3_small, efficientnet_b0, convnext_tiny, vit_b_16"
SHOWN_KEYS = 3  # state-dict keys named in an error (a mismatch lists hundreds)


def classifier_names() -> list[str]:
    """Every classification model builder of torchvision.models."""
    return torchvision.models.list_models(module=torchvision.models)


def final_layer(model: nn.Module) -> tuple[str, nn.Module]:
    """Name and module of the last module (in registration order) that holds parameters of its own."""
    holders = [(name, module) for name, module in model.named_modules() if next(module.parameters(recurse=False), None) is not None]
    return holders[-1]


def remove_auxiliary_classifiers(model: nn.Module) -> list[str]:
    """Drop the auxiliary classifiers of a model that has them (`aux_logits`); return their names."""
    if not getattr(model, "aux_logits", False):
        return []
    model.aux_logits = False
    names = [name for name, child in model.named_children() if "aux" in name.lower() and child is not None]
    for name in names:
        setattr(model, name, None)  # the torchvision forwards skip an auxiliary classifier that is None
    return names


def keys_shown(keys: list[str]) -> str:
    return ", ".join(keys[:SHOWN_KEYS]) + (f" and {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else "")


class TorchvisionEncoder(Encoder):
    """A torchvision classifier without its final Linear layer: images [B, 3, H, W] -> h [B, in_features]."""

    modality = "image"

    def __init__(self, spec: Mapping[str, Any], arch: str, weights: None | Path | WeightsEnum, options: Mapping[str, Any]):
        super().__init__(spec)
        try:
            backbone = torchvision.models.get_model(arch, weights=weights if isinstance(weights, WeightsEnum) else None, **options)
        except (TypeError, ValueError) as error:
            raise spec_error(KIND, "options", f"torchvision's {arch} builder refused {dict(options)} ({error})", f"pass only keyword arguments of torchvision.models.{arch}") from error
        removed = remove_auxiliary_classifiers(backbone)
        name, layer = final_layer(backbone)
        if not isinstance(layer, nn.Linear):
            raise spec_error(
                KIND, "arch", f"{arch}'s final layer {name!r} is a {type(layer).__name__}, not a Linear classification layer, so it has no feature vector to take as h",
                f"use an arch whose classifier ends in a Linear layer (e.g. {LINEAR_EXAMPLES}), or register an encoder of your own",
            )  # fmt: skip
        self.output_dim = layer.in_features
        backbone.set_submodule(name, nn.Identity())
        if isinstance(weights, Path):
            load_weights(backbone, weights, arch, dropped=(name, *removed))
        self.backbone = backbone

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.backbone(batch["images"])


def load_weights(backbone: nn.Module, path: Path, arch: str, dropped: tuple[str, ...]) -> None:
    """Load a state-dict file into the headless `backbone`: the keys of the `dropped` modules (the
    final layer, auxiliary classifiers) are left out; the rest must match exactly."""
    state = {key: value for key, value in read_state_dict(path, KIND).items() if not key.startswith(tuple(f"{name}." for name in dropped))}
    expected = backbone.state_dict()
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    misshapen = [key for key in expected if key in state and state[key].shape != expected[key].shape]
    if missing or unexpected or misshapen:
        problems = [f"{label} {keys_shown(keys)}" for label, keys in (("missing", missing), ("unexpected", unexpected), ("of another shape", misshapen)) if keys]
        raise spec_error(
            KIND, "weights", f"{str(path)!r} does not fit torchvision's {arch}: keys {'; '.join(problems)}",
            f"give a state dict of torchvision.models.{arch}(...) with the same options (with or without its classifier), or of this encoder",
        )  # fmt: skip
    backbone.load_state_dict(state, strict=True)


def build_torchvision(spec: Mapping[str, Any], num_labels: int) -> TorchvisionEncoder:
    """TorchvisionEncoder from a `torchvision` spec (num_labels is not used by image encoders)."""
    spec = validated_spec(spec, required=("arch",), defaults={"weights": None, "options": {}})
    arch = spec["arch"]
    names = classifier_names()
    if arch not in names:
        raise spec_error(KIND, "arch", f"{arch!r} is not a classification model of torchvision.models", f"use one of {names}")
    weights = resolve_weights(arch, "none" if spec["weights"] is None else spec["weights"], KIND)
    options = spec["options"]
    if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
        raise spec_error(KIND, "options", f"must be a mapping of builder keyword arguments, got {options!r}", "write e.g. `options: {dropout: 0.0}`, or leave it out")
    if "weights" in options:
        raise spec_error(KIND, "options", "holds 'weights'", "give the weights as the spec's own `weights` key")
    return TorchvisionEncoder(spec, arch, weights, options)
