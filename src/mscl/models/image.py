"""ResNet-family image encoders from torchvision (spec kind `resnet`).

Spec: `{"kind": "resnet", "arch": "resnet50", "weights": "none" | "/path/file.pt" | "IMAGENET1K_V2",
"small_input": false}`.

- `weights: none` -> random initialisation (torch's global RNG).
- a local file -> a state dict read with `torch.load(path, weights_only=True)`; keys of the
  classifier (`fc.*`) are dropped and a leading `backbone.` is stripped, so both a torchvision
  checkpoint and this encoder's own `state_dict()` load; everything else must match exactly.
- any other value is the name of a torchvision weights enum member of `arch`
  (`torchvision.models.get_model_weights(arch)[name]`, e.g. `IMAGENET1K_V2`, `DEFAULT`);
  torchvision downloads and caches it (needs internet).

The fc layer is replaced by the identity, so h is the global-average-pooled feature
(output_dim = fc.in_features: 2048 for resnet50, 512 for resnet18).

`small_input: true` (for the 32x32 demo images) swaps the stem CIFAR-style: conv1 becomes a 3x3
convolution with stride 1 (64 channels, no bias) and the max-pool is removed, so a 32x32 image
still has a 4x4 map before the average pool instead of 1x1. With pretrained weights the new
conv1 is randomly initialised (kaiming normal, as torchvision does); the rest is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch
import torchvision
from torch import Tensor, nn
from torchvision.models import WeightsEnum

from mscl.models import Encoder, check_bool, spec_error, validated_spec

RESNET_PREFIXES = ("resnet", "resnext", "wide_resnet")
ENCODER_PREFIX = "backbone."  # ResNetEncoder (and TorchvisionEncoder) keep the torchvision model as `self.backbone`
SMALL_STEM_CHANNELS = 64  # every torchvision ResNet stem has 64 output channels


def resnet_arches() -> list[str]:
    """Names of torchvision's ResNet-family classification models (all have conv1/maxpool/fc)."""
    return sorted(n for n in torchvision.models.list_models(module=torchvision.models) if n.startswith(RESNET_PREFIXES))


def looks_like_file(weights: str) -> bool:
    """A weights value with a path separator or a file suffix is a local file; enum member
    names (IMAGENET1K_V2, DEFAULT) have neither."""
    return "/" in weights or "\\" in weights or Path(weights).suffix != ""


def resolve_weights(arch: str, weights: str, kind: str = "resnet") -> None | Path | WeightsEnum:
    """None for "none", a Path for an existing local file, else the torchvision weights enum
    member named `weights` (resolved without downloading anything). `kind` names the spec's
    encoder kind in errors."""
    if not isinstance(weights, str):
        raise spec_error(kind, "weights", f"must be a string, got {weights!r}", "use none, a .pt state-dict file or a weights name like IMAGENET1K_V2")
    if weights.lower() == "none":
        return None
    if looks_like_file(weights):
        path = Path(weights).expanduser()
        if not path.is_file():
            raise spec_error(kind, "weights", f"file {str(path)!r} not found", "give the path of a state dict saved with torch.save(model.state_dict(), path)")
        return path
    members = torchvision.models.get_model_weights(arch).__members__
    if weights not in members:
        raise spec_error(kind, "weights", f"{weights!r} is not a torchvision weights name for {arch}", f"use none, a local .pt file or one of {list(members)}")
    return members[weights]


def small_input_stem() -> nn.Conv2d:
    """CIFAR-style stem: 3x3 conv, stride 1, padding 1, initialised like torchvision's convs."""
    conv = nn.Conv2d(3, SMALL_STEM_CHANNELS, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
    return conv


def read_state_dict(path: Path, kind: str = "resnet") -> dict[str, Tensor]:
    """The state dict in `path` (weights_only: no code runs), without the `backbone.` prefix of
    an encoder's own state dict; `kind` names the spec's encoder kind in errors."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise spec_error(kind, "weights", f"cannot read {str(path)!r} as a torch state dict ({error})", "save it with torch.save(model.state_dict(), path)") from error
    if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
        raise spec_error(kind, "weights", f"{str(path)!r} holds a {type(state).__name__}, not a state dict of tensors", "save model.state_dict() itself, not a checkpoint dict around it")
    return {key.removeprefix(ENCODER_PREFIX): value for key, value in state.items()}


def load_state_dict_file(path: Path) -> dict[str, Tensor]:
    """`read_state_dict(path)` minus the classifier's keys (`fc.*`)."""
    return {key: value for key, value in read_state_dict(path).items() if not key.startswith("fc.")}


class ResNetEncoder(Encoder):
    """torchvision ResNet without its classifier: images [B, 3, H, W] -> h [B, fc.in_features]."""

    modality = "image"

    def __init__(self, spec: Mapping[str, Any], arch: str, weights: None | Path | WeightsEnum, small_input: bool):
        super().__init__(spec)
        enum_weights = weights if isinstance(weights, WeightsEnum) else None
        backbone = torchvision.models.get_model(arch, weights=enum_weights)
        if small_input:
            backbone.conv1 = small_input_stem()
            backbone.maxpool = nn.Identity()
        self.output_dim = backbone.fc.in_features
        backbone.fc = nn.Identity()
        if isinstance(weights, Path):
            try:
                backbone.load_state_dict(load_state_dict_file(weights), strict=True)
            except RuntimeError as error:
                raise spec_error("resnet", "weights", f"{str(weights)!r} does not fit {arch} (small_input={small_input}): {error}", "use a state dict of the same arch and stem") from error
        self.backbone = backbone

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.backbone(batch["images"])


def build_resnet(spec: Mapping[str, Any], num_labels: int) -> ResNetEncoder:
    """ResNetEncoder from a `resnet` spec (num_labels is not used by image encoders)."""
    spec = validated_spec(spec, required=("arch", "weights"), defaults={"small_input": False})
    arch = spec["arch"]
    if arch not in resnet_arches():
        raise spec_error("resnet", "arch", f"unknown ResNet architecture {arch!r}", f"use one of {resnet_arches()}")
    weights = resolve_weights(arch, spec["weights"])
    return ResNetEncoder(spec, arch, weights, check_bool(spec, "small_input"))
