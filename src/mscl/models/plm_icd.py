"""PLM-ICD (Huang et al. 2022, MiuLab/PLM-ICD) as a contrastive encoder (spec kind `plm_icd`).

Spec: `{"kind": "plm_icd", "path": ..., "max_length": 3072, "chunk_size": 128, "attention_dim": 512,
"trainable_layers": null}` (`path`: a Hugging Face encoder, e.g. the RoBERTa-PM checkpoint
PLM-ICD starts from; max_length must be a multiple of chunk_size: 3072 = 24 x 128).

1. Segment pooling input: the whole document is tokenised once (one BOS at the start, one EOS
   at the end), truncated to max_length tokens, padded to a multiple of chunk_size
   ([B, C * chunk_size]) and reshaped into [B * C, chunk_size] rows that the encoder reads as
   independent sequences (positions restart in every chunk, as in the original).
2. The rows' hidden states are concatenated back to H of shape [B, C * chunk_size, d].
   Chunks that are entirely padding are skipped (not encoded: faster); their rows of H are zeros
   and are masked in step 3, so skipping does not change the result.
3. Label-wise attention: Z = tanh(W1 H) [B, T, attention_dim], A = softmax over tokens of W2 Z
   (one row per label: [B, L, T]), V = A H [B, L, d] (`label_vectors`).
   Difference from the original: padded positions are MASKED in that softmax (set to the
   lowest float before it, weight exactly 0). The original code does not mask, so there a
   document's V depends on how much padding its batch added.
4. Representation for contrastive pretraining: h = mean over labels of V ([B, d]; output_dim =
   d).

Which phase trains what. The encoder holds the transformer and the label attention's W1 and W2.
PLM-ICD's output layer, logit_l = <W3_l, V_l> + b_l, is not part of the encoder: the contrastive
loss reads h, which does not depend on W3/b, so they would get no gradient there. It is the
linear probe instead (`mscl.models.heads.LabelWiseLinear`, `mscl.train.probe`): on the frozen
encoder (transformer and W1/W2 fixed) only W3 and b train, with BCE. So

    contrastive phase: the transformer layers that train (all, or the top k) + W1, W2
    linear probe:      W3, b only

Optional `trainable_layers: k` (0 <= k <= L, default null: every layer trains) freezes the
embeddings and the lower L - k transformer layers; k = 0 freezes the whole transformer, so that
contrastive pretraining trains the label attention (W1, W2) only. As for `hf` encoders
(`mscl.models.text`), the frozen *prefix* runs without gradients and always in eval mode, so its
output is a fixed function of the text: `prefix(tokens)` runs it per chunk row, and
`python -m mscl cache-prefix` stores the real tokens' states once per dataset (packed, float16).
A batch of cached states `{"hidden": [B, T, d], "attention_mask": [B, T]}` (T = the batch's
longest document) is padded to whole chunks again, cut into the same [B * C, chunk_size] rows and
the top k layers run per row with the row masks (positions inside a chunk never see another
chunk, as in step 2); the rows are concatenated back to [B, C * chunk_size, d] for the label
attention. In eval mode this equals the full forward on the tokens to float tolerance
(tests/test_prefix_cache.py). With k = 0 the encoder has no dropout at all, so the two
dropout views of a text are identical; `pretrain.text_views: token_dropout` gives two
different views (each hides 10% of the tokens from the label attention).

W1 and W2 are initialised N(0, initializer_range) (0.02 for RoBERTa).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoConfig, AutoModel, PreTrainedModel, PreTrainedTokenizerBase

from mscl.models import check_positive_int, spec_error, validated_spec
from mscl.models.text import (
    CACHED_PREFIX_FIX,
    TextEncoder,
    TopLayers,
    check_prefix_model,
    check_token_limit,
    check_trainable_layers,
    checked_model_path,
    drop_pooler,
    load_tokenizer,
)

PLM_ICD_DEFAULTS: dict[str, Any] = {"max_length": 3072, "chunk_size": 128, "attention_dim": 512, "trainable_layers": None}
# plm_icd spec keys that decide the prefix output (attention_dim only acts after the transformer).
PREFIX_SPEC_KEYS = ("kind", "path", "max_length", "chunk_size", "trainable_layers")


def to_chunks(input_ids: Tensor, attention_mask: Tensor, chunk_size: int) -> tuple[Tensor, Tensor]:
    """[B, C * chunk_size] -> [B * C, chunk_size] rows (ids and mask)."""
    length = input_ids.shape[1]
    if length % chunk_size:
        raise ValueError(f"sequence length {length} is not a multiple of chunk_size {chunk_size}; tokenize with PLMICDEncoder.tokenize")
    return input_ids.reshape(-1, chunk_size), attention_mask.reshape(-1, chunk_size)


def pad_to_chunks(hidden: Tensor, attention_mask: Tensor, chunk_size: int) -> tuple[Tensor, Tensor]:
    """Cached states [B, T, d] and mask [B, T], right-padded with zeros to whole chunks."""
    missing = -hidden.shape[1] % chunk_size
    if not missing:
        return hidden, attention_mask
    return F.pad(hidden, (0, 0, 0, missing)), F.pad(attention_mask, (0, missing))


def rows_to_documents(encoded: Tensor, keep: Tensor, batch: int) -> Tensor:
    """Encoded non-empty rows [R, chunk_size, d] back into documents [B, C * chunk_size, d]:
    `keep` [B * C] says which rows were encoded; the others become zeros."""
    rows = encoded.new_zeros(keep.shape[0], encoded.shape[1], encoded.shape[-1])
    rows[keep] = encoded
    return rows.reshape(batch, -1, encoded.shape[-1])


def masked_label_attention(scores: Tensor, attention_mask: Tensor) -> Tensor:
    """Softmax over tokens of label scores [B, L, T], padded tokens (mask 0) getting weight 0."""
    padded = (attention_mask == 0).unsqueeze(1)  # [B, 1, T], broadcast over labels
    return scores.masked_fill(padded, torch.finfo(scores.dtype).min).softmax(dim=-1)


# Labels whose attention is made at once when no gradient is needed (the probe's streamed V, the
# monitor): the softmax runs over tokens, label by label, so label blocks give V exactly, and a
# block bounds the [B, labels, T] scores: 8 x 25,230 x 3,072 float32 is 2.5 GB a tensor, a block
# of 2,048 labels 0.2 GB.
LABEL_BLOCK = 2048


class LabelWiseAttention(nn.Module):
    """Z = tanh(W1 H), A = masked softmax_T(W2 Z), V = A H."""

    def __init__(self, hidden_dim: int, attention_dim: int, num_labels: int, init_std: float):
        super().__init__()
        self.first = nn.Linear(hidden_dim, attention_dim, bias=False)  # W1
        self.second = nn.Linear(attention_dim, num_labels, bias=False)  # W2: one score row per label
        for layer in (self.first, self.second):
            nn.init.normal_(layer.weight, mean=0.0, std=init_std)

    def attention(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """A [B, L, T] from H [B, T, d] and the token mask [B, T]."""
        scores = self.second(torch.tanh(self.first(hidden))).transpose(1, 2)
        return masked_label_attention(scores, attention_mask)

    def forward(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """V = A H: one d-dimensional document vector per label, [B, L, d]; without gradients,
        LABEL_BLOCK labels at a time."""
        num_labels = self.second.out_features
        if torch.is_grad_enabled() or num_labels <= LABEL_BLOCK:
            return self.attention(hidden, attention_mask) @ hidden
        summary = torch.tanh(self.first(hidden))  # Z [B, T, a], shared by every block
        vectors = hidden.new_empty(hidden.shape[0], num_labels, hidden.shape[-1])
        for start in range(0, num_labels, LABEL_BLOCK):
            rows = slice(start, start + LABEL_BLOCK)
            scores = (summary @ self.second.weight[rows].T).transpose(1, 2)  # [B, block, T]
            vectors[:, rows] = masked_label_attention(scores, attention_mask) @ hidden
        return vectors


class PLMICDEncoder(TopLayers, TextEncoder):
    """Chunked Hugging Face encoder + label-wise attention; h = mean over labels of V.

    Batches are tokens (`tokenize`) or, with `trainable_layers`, cached prefix states
    (`{"hidden", "attention_mask"}`, see the module docstring).
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        chunk_size: int,
        attention_dim: int,
        num_labels: int,
        trainable_layers: int | None = None,
    ):
        super().__init__(spec, model, tokenizer, max_length, trainable_layers)
        self.chunk_size = chunk_size
        init_std = getattr(model.config, "initializer_range", 0.02)
        self.label_attention = LabelWiseAttention(self.output_dim, attention_dim, num_labels, init_std)

    def tokenize(self, texts: list[str]) -> dict[str, Tensor]:
        """`input_ids`/`attention_mask` [B, C * chunk_size]: one BOS/EOS per document, truncated
        to max_length, padded to the batch's longest document rounded up to whole chunks."""
        encoded = self.tokenizer(
            list(texts),
            padding="longest",
            truncation=True,
            max_length=self.max_length,
            pad_to_multiple_of=self.chunk_size,
            return_tensors="pt",
        )
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}

    def prefix(self, tokens: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The frozen part's output for tokenised documents: `{"hidden": [B, C * chunk_size, d],
        "attention_mask": [B, C * chunk_size]}` (the mask passed through). Every non-empty chunk
        row runs through the embeddings and the lower L - k layers as its own sequence, without
        gradients and in eval mode; all-padding chunks are skipped and left as zeros."""
        input_ids, attention_mask = tokens["input_ids"], tokens["attention_mask"]
        row_ids, row_mask = to_chunks(input_ids, attention_mask, self.chunk_size)
        keep = row_mask.any(dim=1)
        encoded = self.run_prefix(row_ids[keep], row_mask[keep])
        return {"hidden": rows_to_documents(encoded, keep, input_ids.shape[0]), "attention_mask": attention_mask}

    def top(self, cached: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(H [B, C * chunk_size, d], its mask) from prefix states `{"hidden": [B, T, d],
        "attention_mask": [B, T]}`: padded to whole chunks, the top k layers run per non-empty
        chunk row with the row masks (with dropout in train mode), rows concatenated back."""
        hidden, attention_mask = pad_to_chunks(cached["hidden"], cached["attention_mask"], self.chunk_size)
        if self.trainable_layers == 0:
            return hidden, attention_mask
        rows, row_mask = hidden.reshape(-1, self.chunk_size, hidden.shape[-1]), attention_mask.reshape(-1, self.chunk_size)
        keep = row_mask.any(dim=1)
        encoded = self.run_top(rows[keep], row_mask[keep])
        return rows_to_documents(encoded, keep, hidden.shape[0]), attention_mask

    def token_states(self, batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(H [B, C * chunk_size, d], its token mask [B, C * chunk_size]) from tokens or, for a
        prefix-cached encoder, from cached prefix states. On tokens without trainable_layers
        every non-empty chunk runs through the whole model; all-padding chunks are skipped and
        left as zeros (masked later)."""
        if "hidden" in batch:
            if not self.prefix_cached:
                raise self.no_prefix_error("but the batch holds cached prefix states", CACHED_PREFIX_FIX)
            return self.top(batch)
        if self.prefix_cached:
            return self.top(self.prefix(batch))
        input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
        row_ids, row_mask = to_chunks(input_ids, attention_mask, self.chunk_size)
        keep = row_mask.any(dim=1)
        encoded = self.model(input_ids=row_ids[keep], attention_mask=row_mask[keep]).last_hidden_state
        return rows_to_documents(encoded, keep, input_ids.shape[0]), attention_mask

    def label_vectors(self, batch: Mapping[str, Tensor]) -> Tensor:
        """V [B, L, d]: what the linear probe reads (one vector per label)."""
        return self.label_attention(*self.token_states(batch))

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.label_vectors(batch).mean(dim=1).float()


def checked_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with defaults, its values checked (all but those that need the model)."""
    spec = validated_spec(spec, required=("path",), defaults=PLM_ICD_DEFAULTS)
    max_length, chunk_size = check_positive_int(spec, "max_length"), check_positive_int(spec, "chunk_size")
    check_positive_int(spec, "attention_dim")
    check_trainable_layers(spec["trainable_layers"], "plm_icd", minimum=0)
    if max_length % chunk_size:
        # Truncated documents must still fill whole chunks (the tokenizer refuses otherwise).
        raise spec_error("plm_icd", "max_length", f"{max_length} is not a multiple of chunk_size {chunk_size}", f"use a multiple such as {max(1, max_length // chunk_size) * chunk_size}")
    return spec


def build_plm_icd(spec: Mapping[str, Any], num_labels: int) -> PLMICDEncoder:
    """PLMICDEncoder from a `plm_icd` spec; `num_labels` rows of label attention."""
    spec = checked_spec(spec)
    path = checked_model_path("plm_icd", spec)
    model = AutoModel.from_pretrained(path, dtype=torch.float32)
    check_token_limit("plm_icd", "chunk_size", spec["chunk_size"], model)
    check_prefix_model(model, spec["trainable_layers"], "plm_icd")
    drop_pooler(model)
    return PLMICDEncoder(
        spec, model, load_tokenizer(path), spec["max_length"], spec["chunk_size"], spec["attention_dim"], num_labels, spec["trainable_layers"]
    )


def prefix_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a `plm_icd` spec (defaults filled in) that decides the prefix output: kind,
    path, max_length, chunk_size and trainable_layers."""
    spec = validated_spec(spec, required=("path",), defaults=PLM_ICD_DEFAULTS)
    return {key: spec[key] for key in PREFIX_SPEC_KEYS}


def hidden_size(spec: Mapping[str, Any]) -> int:
    """d of the spec's model, read from its config alone (no weights loaded)."""
    return int(AutoConfig.from_pretrained(checked_model_path("plm_icd", checked_spec(spec))).hidden_size)
