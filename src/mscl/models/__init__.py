"""Encoders, the projection head and optimiser parameter groups.

`build_encoder(spec, num_labels)` turns an encoder spec (a config mapping with a `kind`) into an
`Encoder`: a module whose `forward(batch)` returns the representation h = Enc(x) of shape
[B, output_dim]. The contrastive phase puts a `ProjectionHead` on top of h; the linear probe
uses h itself, except for `plm_icd`, whose probe is PLM-ICD's label-wise output layer on the
label-attention vectors V (`LabelWiseLinear`, `mscl.models.plm_icd`). Kinds:

- `resnet`: torchvision ResNet family, fc removed (`mscl.models.image`);
- `torchvision`: any torchvision classifier, its final Linear layer removed
  (`mscl.models.torchvision_encoder`);
- `cifar_resnet`: a CIFAR-style ResNet in plain torch, for small images trained from scratch
  (`mscl.models.cifar_resnet`);
- `hf`: a Hugging Face encoder such as RoBERTa, first-token pooling (`mscl.models.text`);
- `llama_lora`: a decoder-only Hugging Face model with LoRA adapters, last-token pooling
  (`mscl.models.text`);
- `plm_icd`: PLM-ICD, chunked encoding + label-wise attention (`mscl.models.plm_icd`);
- `mlp`: a multilayer perceptron on feature vectors (tabular datasets, `mscl.models.mlp`).

Submodules are imported on demand so that an image run never imports transformers or peft.
Spec problems (unknown kind, missing or unknown key, bad value, missing local folder or weights
file) raise `ValueError` naming the key and the fix. Model initialisation draws from torch's
global RNG: seed it (the training loop does) before `build_encoder` for reproducible weights.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from torch import Tensor, nn

from mscl import registry
from mscl.models.heads import LabelWiseLinear, ProjectionHead

__all__ = [
    "ENCODER_KINDS",
    "ENCODER_MODALITY",
    "Encoder",
    "LabelWiseLinear",
    "ProjectionHead",
    "build_encoder",
    "count_parameters",
    "parameter_groups",
    "prefix_spec",
    "spec_error",
    "validated_spec",
]

# Built-in kind -> the modality of its inputs (decides transforms, views and the default
# optimiser): mscl.registry's list, the one place that names them (a plugin adds its own there).
ENCODER_MODALITY = registry.BUILTIN_ENCODER_KINDS
ENCODER_KINDS = tuple(ENCODER_MODALITY)
# kind -> (module, builder function taking (validated spec, num_labels)).
_BUILDERS: dict[str, tuple[str, str]] = {
    "resnet": ("mscl.models.image", "build_resnet"),
    "torchvision": ("mscl.models.torchvision_encoder", "build_torchvision"),
    "cifar_resnet": ("mscl.models.cifar_resnet", "build_cifar_resnet"),
    "hf": ("mscl.models.text", "build_hf"),
    "llama_lora": ("mscl.models.text", "build_llama_lora"),
    "plm_icd": ("mscl.models.plm_icd", "build_plm_icd"),
    "mlp": ("mscl.models.mlp", "build_mlp"),
}
# Kinds that accept `trainable_layers` (a frozen prefix that `python -m mscl cache-prefix`
# can cache) -> (module, function returning the spec keys that decide the prefix output).
PREFIX_KINDS: dict[str, tuple[str, str]] = {
    "hf": ("mscl.models.text", "prefix_spec"),
    "plm_icd": ("mscl.models.plm_icd", "prefix_spec"),
}


class Encoder(nn.Module):
    """Base class of every encoder: `forward(batch) -> h` of shape [B, output_dim], float32.

    Image batches are `{"images": float tensor [B, 3, H, W]}` (already normalised); tabular
    batches `{"features": float tensor [B, F]}` (standardised); text batches are what `tokenize`
    returns. `spec` keeps the validated spec the encoder was built from.
    """

    modality: str = ""
    output_dim: int = 0

    def __init__(self, spec: Mapping[str, Any]):
        super().__init__()
        self.spec = dict(spec)

    def forward(self, batch: dict[str, Tensor]) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def tokenize(self, texts: list[str]) -> dict[str, Tensor]:
        """Padded CPU tensors for a list of texts (text encoders only)."""
        raise TypeError(f"{type(self).__name__} is an {self.modality} encoder: it has no tokenizer")


def spec_error(kind: str, key: str, problem: str, fix: str) -> ValueError:
    """A ValueError that names the spec key, what is wrong with it and how to fix it."""
    return ValueError(f"encoder spec ({kind}) key {key!r}: {problem}. Fix: {fix}")


def validated_spec(
    spec: Mapping[str, Any], required: tuple[str, ...], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """`spec` with defaults filled in; missing required keys and unknown keys raise ValueError.

    Unknown keys are rejected rather than ignored so that a typo (`lora_rank`) cannot silently
    fall back to a default.
    """
    kind = spec["kind"]
    allowed = {"kind", *required, *defaults}
    for key in required:
        if key not in spec:
            raise spec_error(kind, key, "is missing", f"add `{key}:` to the encoder spec")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise spec_error(kind, unknown[0], "is not a known key", f"use only {sorted(allowed)}")
    return {**defaults, **spec}


def check_positive_int(spec: Mapping[str, Any], key: str) -> int:
    """spec[key] as a positive int (bools rejected: True is an int in Python)."""
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise spec_error(spec["kind"], key, f"must be a positive integer, got {value!r}", f"set `{key}` to e.g. 16")
    return value


def check_probability(spec: Mapping[str, Any], key: str) -> float:
    """spec[key] as a float in [0, 1)."""
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise spec_error(spec["kind"], key, f"must be a number in [0, 1), got {value!r}", f"set `{key}` to e.g. 0.1")
    return float(value)


def check_bool(spec: Mapping[str, Any], key: str) -> bool:
    """spec[key] as a bool (strings like "false" are rejected, not guessed)."""
    value = spec[key]
    if not isinstance(value, bool):
        raise spec_error(spec["kind"], key, f"must be true or false, got {value!r}", f"set `{key}: true` or `{key}: false`")
    return value


def build_encoder(spec: Mapping[str, Any], num_labels: int) -> Encoder:
    """Build the encoder a spec describes. `num_labels` sizes PLM-ICD's label attention; other
    kinds ignore it."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"encoder spec must be a mapping with a 'kind' key, got {type(spec).__name__}. Fix: write e.g. {{kind: resnet, arch: resnet50, weights: none}}")
    kind = spec.get("kind")
    if kind not in registry.encoder_kinds():
        raise ValueError(registry.unknown_name_message("encoder kind", kind, registry.encoder_kinds(), "encoder spec key 'kind'"))
    if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels <= 0:
        raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}. Fix: pass the size of the label vocabulary")
    if kind in _BUILDERS:
        module_name, function_name = _BUILDERS[kind]
        return getattr(importlib.import_module(module_name), function_name)(spec, num_labels)
    return _plugin_encoder(registry.plugin_encoder(kind), spec, num_labels)


def _plugin_encoder(entry: registry.PluginEncoder, spec: Mapping[str, Any], num_labels: int) -> Encoder:
    """A registered kind's encoder, checked to be what the training loop drives: an nn.Module
    with a positive `output_dim` and the registered modality."""
    encoder = entry.builder(dict(spec), num_labels)
    where = f"encoder kind {entry.kind!r} (registered by {entry.source})"
    if not isinstance(encoder, nn.Module):
        raise ValueError(f"{where}: the builder returned {type(encoder).__name__}, not a torch.nn.Module. Fix: return a subclass of mscl.models.Encoder")
    dim = getattr(encoder, "output_dim", None)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
        raise ValueError(f"{where}: the encoder's output_dim is {dim!r}. Fix: set `output_dim` to the width of h (forward's [B, output_dim])")
    encoder.modality = entry.modality
    if not hasattr(encoder, "spec"):
        encoder.spec = dict(spec)
    return encoder


def prefix_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an encoder spec (defaults filled in) that decides its frozen prefix's output,
    for the kinds in PREFIX_KINDS: the prefix cache's fingerprint. ValueError for other kinds
    and for spec problems."""
    kind = spec.get("kind") if isinstance(spec, Mapping) else None
    if kind not in PREFIX_KINDS:
        raise ValueError(f"encoder spec key 'kind': {kind!r} has no frozen prefix to cache. Fix: use one of {list(PREFIX_KINDS)} with `trainable_layers: k`")
    module_name, function_name = PREFIX_KINDS[kind]
    return getattr(importlib.import_module(module_name), function_name)(spec)


# Parameters of these modules are scales and shifts of a normalisation: weight decay would pull
# the scales towards 0, which is why BERT-style recipes exempt them (with all biases).
_NORM_TYPES = (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)


def is_norm_module(module: nn.Module) -> bool:
    """True for LayerNorm/RMSNorm/GroupNorm/BatchNorm, including Hugging Face's own norm classes
    (e.g. `LlamaRMSNorm` is not a subclass of `nn.RMSNorm`, so its class name is checked too)."""
    return isinstance(module, _NORM_TYPES) or "norm" in type(module).__name__.lower()


def parameter_groups(module: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on weights, none on biases and normalisation params.

    Only parameters that require a gradient are included (frozen LoRA base weights are left
    out); shared parameters appear once. Groups that would be empty are omitted, so the result
    has one or two entries: `{"params": [...], "weight_decay": weight_decay}` first, then
    `{"params": [...], "weight_decay": 0.0}`.
    """
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    seen: set[int] = set()
    for submodule in module.modules():
        exempt_module = is_norm_module(submodule)
        for name, parameter in submodule.named_parameters(recurse=False):
            if not parameter.requires_grad or id(parameter) in seen:
                continue
            seen.add(id(parameter))
            # `_bias` catches names like nn.MultiheadAttention's `in_proj_bias`.
            exempt = exempt_module or name == "bias" or name.endswith("_bias")
            (no_decay if exempt else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": float(weight_decay)}, {"params": no_decay, "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters (only those that require a gradient when asked)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)

