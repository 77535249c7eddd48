"""PLM-ICD (Huang et al. 2022, MiuLab/PLM-ICD) as a contrastive encoder (spec kind `plm_icd`).

Spec: `{"kind": "plm_icd", "path": ..., "max_length": 3072, "chunk_size": 128, "attention_dim": 512}`
(`path`: a Hugging Face encoder, e.g. the RoBERTa-PM checkpoint PLM-ICD starts from;
max_length must be a multiple of chunk_size: 3072 = 24 x 128).

1. Segment pooling input: the whole document is tokenised once (one BOS at the start, one EOS
   at the end), truncated to max_length tokens, padded to a multiple of chunk_size
   ([B, C * chunk_size]) and reshaped into [B * C, chunk_size] rows that the encoder reads as
   independent sequences (positions restart in every chunk, as in the original).
2. The rows' hidden states are concatenated back to H of shape [B, C * chunk_size, d].
   Chunks that are entirely padding are skipped (not encoded: faster); their rows of H are zeros
   and are masked in step 3, so skipping does not change the result.
3. Label-wise attention: Z = tanh(W1 H) [B, T, attention_dim], A = softmax over tokens of W2 Z
   (one row per label: [B, L, T]), V = A H [B, L, d].
   Difference from the original: padded positions are MASKED in that softmax (set to the
   lowest float before it, weight exactly 0). The original code does not mask, so there a
   document's V depends on how much padding its batch added.
4. Representation for contrastive pretraining: h = mean over labels of V ([B, d]; output_dim =
   d). `label_logits(batch)` gives the original classifier, logit_l = <W3_l, V_l> + b_l [B, L],
   for users who want it; W3/b get no gradient from the contrastive loss and the linear probe
   does not use them.

W1, W2, W3 are initialised N(0, initializer_range) (0.02 for RoBERTa), W3's bias at 0.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn
from transformers import AutoModel, PreTrainedModel, PreTrainedTokenizerBase

from mscl.models import check_positive_int, spec_error, validated_spec
from mscl.models.text import TextEncoder, check_token_limit, checked_model_path, drop_pooler, load_tokenizer


def to_chunks(input_ids: Tensor, attention_mask: Tensor, chunk_size: int) -> tuple[Tensor, Tensor]:
    """[B, C * chunk_size] -> [B * C, chunk_size] rows (ids and mask)."""
    length = input_ids.shape[1]
    if length % chunk_size:
        raise ValueError(f"sequence length {length} is not a multiple of chunk_size {chunk_size}; tokenize with PLMICDEncoder.tokenize")
    return input_ids.reshape(-1, chunk_size), attention_mask.reshape(-1, chunk_size)


def masked_label_attention(scores: Tensor, attention_mask: Tensor) -> Tensor:
    """Softmax over tokens of label scores [B, L, T], padded tokens (mask 0) getting weight 0."""
    padded = (attention_mask == 0).unsqueeze(1)  # [B, 1, T], broadcast over labels
    return scores.masked_fill(padded, torch.finfo(scores.dtype).min).softmax(dim=-1)


class LabelWiseAttention(nn.Module):
    """Z = tanh(W1 H), A = masked softmax_T(W2 Z), V = A H; logits_l = <W3_l, V_l> + b_l."""

    def __init__(self, hidden_dim: int, attention_dim: int, num_labels: int, init_std: float):
        super().__init__()
        self.first = nn.Linear(hidden_dim, attention_dim, bias=False)  # W1
        self.second = nn.Linear(attention_dim, num_labels, bias=False)  # W2: one score row per label
        self.third = nn.Linear(hidden_dim, num_labels)  # W3 and b: one classifier vector per label
        for layer in (self.first, self.second, self.third):
            nn.init.normal_(layer.weight, mean=0.0, std=init_std)
        nn.init.zeros_(self.third.bias)

    def attention(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """A [B, L, T] from H [B, T, d] and the token mask [B, T]."""
        scores = self.second(torch.tanh(self.first(hidden))).transpose(1, 2)
        return masked_label_attention(scores, attention_mask)

    def forward(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """V = A H: one d-dimensional document vector per label, [B, L, d]."""
        return self.attention(hidden, attention_mask) @ hidden

    def logits(self, label_vectors: Tensor) -> Tensor:
        """logit_l = <W3_l, V_l> + b_l, [B, L]."""
        return (label_vectors * self.third.weight).sum(dim=-1) + self.third.bias


class PLMICDEncoder(TextEncoder):
    """Chunked Hugging Face encoder + label-wise attention; h = mean over labels of V."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        chunk_size: int,
        attention_dim: int,
        num_labels: int,
    ):
        super().__init__(spec, tokenizer, max_length)
        self.model = model
        self.chunk_size = chunk_size
        self.output_dim = model.config.hidden_size
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

    def token_states(self, batch: dict[str, Tensor]) -> Tensor:
        """H [B, C * chunk_size, d]: every non-empty chunk encoded as its own row; all-padding
        chunks are skipped and left as zeros (masked later)."""
        input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
        row_ids, row_mask = to_chunks(input_ids, attention_mask, self.chunk_size)
        keep = row_mask.any(dim=1)
        encoded = self.model(input_ids=row_ids[keep], attention_mask=row_mask[keep]).last_hidden_state
        rows = encoded.new_zeros(row_ids.shape[0], self.chunk_size, encoded.shape[-1])
        rows[keep] = encoded
        return rows.reshape(input_ids.shape[0], input_ids.shape[1], -1)

    def label_vectors(self, batch: dict[str, Tensor]) -> Tensor:
        """V [B, L, d]."""
        return self.label_attention(self.token_states(batch), batch["attention_mask"])

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.label_vectors(batch).mean(dim=1).float()

    def label_logits(self, batch: dict[str, Tensor]) -> Tensor:
        """The original PLM-ICD classifier's logits [B, L] (apply a sigmoid for probabilities)."""
        return self.label_attention.logits(self.label_vectors(batch)).float()


def build_plm_icd(spec: Mapping[str, Any], num_labels: int) -> PLMICDEncoder:
    """PLMICDEncoder from a `plm_icd` spec; `num_labels` rows of label attention."""
    spec = validated_spec(spec, required=("path",), defaults={"max_length": 3072, "chunk_size": 128, "attention_dim": 512})
    path = checked_model_path("plm_icd", spec)
    max_length, chunk_size = check_positive_int(spec, "max_length"), check_positive_int(spec, "chunk_size")
    attention_dim = check_positive_int(spec, "attention_dim")
    if max_length % chunk_size:
        # Truncated documents must still fill whole chunks (the tokenizer refuses otherwise).
        raise spec_error("plm_icd", "max_length", f"{max_length} is not a multiple of chunk_size {chunk_size}", f"use a multiple such as {max(1, max_length // chunk_size) * chunk_size}")
    model = AutoModel.from_pretrained(path, dtype=torch.float32)
    check_token_limit("plm_icd", "chunk_size", chunk_size, model)
    drop_pooler(model)
    return PLMICDEncoder(spec, model, load_tokenizer(path), max_length, chunk_size, attention_dim, num_labels)
