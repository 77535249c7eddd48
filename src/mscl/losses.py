"""Multi-label supervised contrastive losses: ALL, ANY, MulSupCon, Jaccard, Sim, Dissim,
Sim-Dissim (the paper), class prototypes and MSC.

Conventions shared by every loss (GUIDE §2):

- ``features`` is ``[B, V, D]``: B samples, V views, L2-normalised; ``labels`` is ``[B, L]``
  multi-hot (0/1, any float or bool dtype; dense, or sparse COO/CSR for large label spaces).
- All n = B*V views are anchors, in view-major order: anchor ``a = v*B + b`` is view v of
  sample b (the order ``torch.cat(features.unbind(1))`` gives).
- ``s_ia = z_i . z_a / temperature`` and ``log p_ip = s_ip - log sum_{a != i} exp(s_ia)``.
- Pair losses: ``L_i = -(1/N_i) sum_{p != i} W_ip log p_ip``; only the weight matrix W (a
  function of the two label sets) and the normaliser N_i (the number of p with W_ip > 0)
  change between losses. The other views of a sample are positives whenever its label set
  is non-empty (their label sets are equal).
- Batch loss: mean of L_i over the anchors that have at least one positive (MulSupCon: the
  sum of L_i over the sum of label-set sizes, paper Eq. 6). An anchor without positives
  (an empty label set included) is skipped, never NaN; a batch without a single positive
  pair gives exactly 0 that still backpropagates. No tau/base_tau factor.

Cost: the label work runs once per *sample* pair (B x B, not n x n), outside autograd, and
its product runs over the label columns that at least two samples of the batch share, as a
sparse x dense product (cost nnz x B); a label that one sample holds alone adds to that
sample's own diagonal entry only. The [B, B] weights never grow to n x n: the weighted sum
of logits is one [B, B] x [B, D] product. Nothing of size n x n x L is built. Labels are
cheapest as a sparse CSR batch (`csr_labels`, built in the collate function); a dense
matrix costs two reads of it (about 3 ms for 512 x 25,230 float32 on two cores).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mscl import registry
from mscl.train.settings import DEFAULT_TEMPERATURE, RUN_LOSS_OPTIONS, LossSpec

SIMDISSIM_FORMS = registry.LOSS_OPTION_CHOICES[("simdissim", "form")]


@dataclass(frozen=True)
class AnchorLosses:
    """Per-anchor loss values, view-major (anchor v*B + b), and which anchors count."""

    values: Tensor  # [n] L_i (0 where the anchor has no positive)
    valid: Tensor  # [n] bool: the anchor has at least one positive


# --------------------------------------------------------------------------------------
# Label bookkeeping (no gradients: it depends on labels only)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchLabels:
    """The batch's label sets in compact, index form.

    ``rows[k], columns[k]`` is the k-th (sample, label) pair present, sorted by row and then
    column; ``columns`` index the label columns the batch uses only (``present`` maps them
    back to vocabulary ids) and ``counts[c]`` is how many samples hold compact label c.
    """

    num_samples: int
    rows: Tensor
    columns: Tensor
    present: Tensor
    counts: Tensor

    @property
    def sizes(self) -> Tensor:
        """|S_b| for every sample b (int64)."""
        return torch.bincount(self.rows, minlength=self.num_samples)

    def dense(self, dtype: torch.dtype) -> Tensor:
        """[B, C] 0/1 matrix over the batch's label columns."""
        matrix = torch.zeros(self.num_samples, len(self.present), dtype=dtype, device=self.rows.device)
        matrix[self.rows, self.columns] = 1
        return matrix


def csr_labels(label_ids: Sequence[Sequence[int] | Tensor], num_labels: int) -> Tensor:
    """The cheapest label form for the losses: a [B, num_labels] sparse CSR multi-hot batch
    built from each sample's label ids (duplicates and order do not matter).

    Meant for a DataLoader ``collate_fn``: the losses then read B*K indices instead of a
    dense B x L matrix (52 MB at B = 512, L = 25,230 in float32).
    """
    per_sample = [torch.as_tensor(sample, dtype=torch.long).reshape(-1) for sample in label_ids]
    lengths = [len(sample) for sample in per_sample]
    ids = torch.cat(per_sample) if per_sample else torch.zeros(0, dtype=torch.long)
    if ids.numel() and not (0 <= int(ids.min()) and int(ids.max()) < num_labels):
        raise ValueError(f"label ids must lie in [0, {num_labels}), got {int(ids.min())}..{int(ids.max())}")
    rows = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths, dtype=torch.long))
    # One sort over (row, id) keys gives CSR order and drops duplicates.
    keys = torch.unique(rows * num_labels + ids)
    crow = torch.zeros(len(lengths) + 1, dtype=torch.long)
    crow[1:] = torch.cumsum(torch.bincount(keys // num_labels, minlength=len(lengths)), 0)
    with warnings.catch_warnings():
        # torch's one-time "sparse CSR support is in beta" notice: nothing to act on, and it
        # would otherwise land in every training job's log.
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        # torch 2.11 also says invariant checks are off, though check_invariants=False says so.
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
        return torch.sparse_csr_tensor(
            crow, keys % num_labels, torch.ones(len(keys)), size=(len(lengths), num_labels), check_invariants=False
        )


# A dense label matrix is read in slices of rows of about this size, so that the second
# read of a slice (the gather) finds it in the CPU cache rather than in memory.
DENSE_SLICE_BYTES = 8 << 20


def _dense_entries(labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(rows, vocabulary columns, values) of the non-zero entries of a dense [B, L] matrix.

    ``nonzero()`` over the whole matrix costs about three reductions over it on CPU. Instead,
    per slice of rows, a byte-wise max per column finds the columns holding any non-zero bit
    (so every non-zero entry, whatever its value, is found and checked) and only those
    columns are gathered and scanned.
    """
    batch, width = labels.shape
    labels = labels.contiguous()
    row_bytes = max(1, width * labels.element_size())
    step = max(1, DENSE_SLICE_BYTES // row_bytes) if labels.device.type == "cpu" else batch
    rows, columns, values = [], [], []
    for start in range(0, batch, step):
        block = labels[start : start + step]
        used = block.view(torch.uint8).amax(0).view(width, labels.element_size()).amax(1).nonzero().squeeze(1)
        compact = block.gather(1, used.expand(len(block), -1))
        block_rows, block_columns = compact.nonzero(as_tuple=True)
        rows.append(block_rows + start)
        columns.append(used[block_columns])
        values.append(compact[block_rows, block_columns])
    return torch.cat(rows), torch.cat(columns), torch.cat(values)


def index_labels(labels: Tensor) -> BatchLabels:
    """Turn [B, L] multi-hot labels (dense, sparse COO or sparse CSR) into `BatchLabels`.

    Sparse labels are read from their indices without touching the zeros; a dense matrix
    is read twice (`_dense_entries`). Everything after that works on the B*K entries.
    """
    if labels.dim() != 2:
        raise ValueError(f"labels must be [B, L] multi-hot, got shape {tuple(labels.shape)}")
    batch, width = labels.shape
    if labels.layout in (torch.sparse_coo, torch.sparse_csr):
        # CSR converts cheaply and comes out marked coalesced (its rows are sorted already).
        labels = labels.to_sparse_coo().coalesce()
        (rows, vocab_columns), values = labels.indices(), labels.values()
        stored = values != 0
        if not bool(stored.all()):  # explicitly stored zeros are not labels
            rows, vocab_columns, values = rows[stored], vocab_columns[stored], values[stored]
    else:
        rows, vocab_columns, values = _dense_entries(labels)
    if values.numel() and not bool((values == 1).all()):
        raise ValueError("labels must be multi-hot: every entry 0 or 1")
    counts = torch.bincount(vocab_columns, minlength=width)
    present = counts.nonzero().squeeze(1)
    compact_id = torch.cumsum(counts > 0, 0) - 1  # vocabulary id -> compact column
    return BatchLabels(batch, rows, compact_id[vocab_columns], present, counts[present])


@dataclass(frozen=True)
class LabelOverlap:
    sizes: Tensor  # [B] |S_b|
    intersection: Tensor  # [B, B] sum over c in S_b ∩ S_b' of the label weight (1: |S_b ∩ S_b'|)


def label_overlap(
    batch: BatchLabels, dtype: torch.dtype, label_weight: Tensor | None = None
) -> LabelOverlap:
    """Pairwise (optionally label-weighted) intersection sizes of the batch's label sets.

    ``label_weight`` gives one weight per compact label (default 1). Only labels shared by
    at least two samples enter the product, as a sparse [B, C] times dense [C, B] product
    (cost nnz * B rather than B * C * B); the diagonal is filled from all labels.
    """
    device, num_samples = batch.rows.device, batch.num_samples
    weight = torch.ones(len(batch.present), dtype=dtype, device=device) if label_weight is None else label_weight.to(dtype)
    shared = batch.counts >= 2
    keep = shared[batch.columns]
    rows, shared_labels = batch.rows[keep], batch.columns[keep]
    columns = (torch.cumsum(shared, 0) - 1)[shared_labels]  # a monotone renumbering: still sorted
    width = int(shared.sum())
    held = torch.zeros(width, num_samples, dtype=dtype, device=device)
    held[columns, rows] = 1
    weighted = torch.sparse_coo_tensor(
        torch.stack([rows, columns]), weight[shared_labels], (num_samples, width), is_coalesced=True, check_invariants=False
    )
    intersection = torch.sparse.mm(weighted, held)
    own = torch.zeros(num_samples, dtype=dtype, device=device).index_add_(0, batch.rows, weight[batch.columns])
    intersection.diagonal().copy_(own)
    return LabelOverlap(batch.sizes.to(dtype), intersection)


# Weight functions: LabelOverlap -> W_b [B, B] at sample level (GUIDE §2 table).


def similarity_factor(intersection: Tensor, anchor_size: Tensor) -> Tensor:
    """K^s = |S ∩ T| / |S| (paper Eq. 13); 0 for an empty anchor set."""
    return intersection / anchor_size.clamp_min(1)


def dissimilarity_factor(intersection: Tensor, other_size: Tensor) -> Tensor:
    """K^d = 1 / (1 + |T \\ S|) with |T \\ S| = |T| - |S ∩ T| (paper Eq. 14, 15)."""
    return (1.0 + other_size - intersection).reciprocal()


def _all_weights(o: LabelOverlap) -> Tensor:
    anchor, other = o.sizes[:, None], o.sizes[None, :]
    equal = (o.intersection == anchor) & (o.intersection == other) & (anchor > 0)
    return equal.to(o.intersection.dtype)


def _any_weights(o: LabelOverlap) -> Tensor:
    return (o.intersection > 0).to(o.intersection.dtype)


def _jaccard_weights(o: LabelOverlap) -> Tensor:
    union = o.sizes[:, None] + o.sizes[None, :] - o.intersection
    return o.intersection / union.clamp_min(1)


def _sim_weights(o: LabelOverlap) -> Tensor:
    return similarity_factor(o.intersection, o.sizes[:, None])


def _dissim_weights(o: LabelOverlap) -> Tensor:
    return _any_weights(o) * dissimilarity_factor(o.intersection, o.sizes[None, :])


def _simdissim_weights(o: LabelOverlap) -> Tensor:
    return _sim_weights(o) * dissimilarity_factor(o.intersection, o.sizes[None, :])


WEIGHT_FUNCTIONS: dict[str, Callable[[LabelOverlap], Tensor]] = {
    "all": _all_weights,
    "any": _any_weights,
    "jaccard": _jaccard_weights,
    "sim": _sim_weights,
    "dissim": _dissim_weights,
    "simdissim": _simdissim_weights,
}


def mulsupcon_label_weight(batch: BatchLabels, views: int) -> Tensor:
    """1 / n_c(i) with n_c(i) = #{p != i : c in T_p} = views * count_c - 1 (paper Eq. 4-5).

    Zero where no other view holds the label (a single view and a label one sample holds).
    """
    others = views * batch.counts - 1
    return torch.where(others > 0, 1.0 / others.clamp_min(1).double(), 0.0)


def pair_weights(name: str, labels: Tensor, views: int = 2, dtype: torch.dtype = torch.float64) -> Tensor:
    """The sample-level weight matrix W_b [B, B] of a pair loss (W_ip = W_b[b(i), b(p)], p != i)."""
    batch = index_labels(labels)
    if name == "mulsupcon":
        return label_overlap(batch, dtype, mulsupcon_label_weight(batch, views)).intersection
    if name not in WEIGHT_FUNCTIONS:
        raise ValueError(f"unknown pair loss {name!r}; choose one of {sorted(WEIGHT_FUNCTIONS) + ['mulsupcon']}")
    return WEIGHT_FUNCTIONS[name](label_overlap(batch, dtype))


# --------------------------------------------------------------------------------------
# Feature side
# --------------------------------------------------------------------------------------


def _anchor_features(features: Tensor, labels: Tensor) -> tuple[Tensor, int, int]:
    """Validate shapes and return (z [n, D] view-major, B, V) in float32 (float64 kept)."""
    if features.dim() != 3:
        raise ValueError(f"features must be [B, V, D], got shape {tuple(features.shape)}")
    if labels.dim() != 2 or labels.shape[0] != features.shape[0]:
        raise ValueError(
            f"labels must be [B, L] with B = {features.shape[0]} (features' first dimension), "
            f"got shape {tuple(labels.shape)}"
        )
    if labels.device != features.device:
        raise ValueError(f"labels are on {labels.device} but features on {features.device}; move them together")
    batch, views, _ = features.shape
    dtype = torch.float64 if features.dtype == torch.float64 else torch.float32
    z = features.to(dtype).transpose(0, 1).reshape(batch * views, -1)
    return z, batch, views


def _masked_logits(z: Tensor, temperature: float) -> Tensor:
    """s = z z^T / tau with the diagonal (the anchor itself) excluded from every softmax.

    A finite, very negative value rather than -inf keeps single-anchor batches and 0 * s
    products free of NaN; exp() of it is exactly 0. Filled in place: cheaper than an n x n
    mask and a masked copy, and the division's backward does not need its output.
    """
    logits = z @ z.T / temperature
    logits.diagonal().fill_(torch.finfo(logits.dtype).min / 4)
    return logits


def _row_mass(sample_weights: Tensor, views: int) -> Tensor:
    """sum_{p != i} W_ip for every view-major anchor i, from the sample-level W_b [B, B]."""
    return (views * sample_weights.sum(1) - sample_weights.diagonal()).repeat(views)


def weighted_similarity(z: Tensor, sample_weights: Tensor, temperature: float) -> Tensor:
    """sum_{p != i} W_ip s_ip for every view-major anchor i, with W_ip = W_b[b(i), b(p)].

    Equals z_i . (sum_{p != i} W_ip z_p) / tau: one [B, B] x [B, D] product over the views
    summed per sample, minus the anchor's own term, so no [n, n] weight matrix is built.
    """
    batch = len(sample_weights)
    views = len(z) // batch
    view_sum = z.reshape(views, batch, -1).sum(0)
    own = sample_weights.diagonal().repeat(views)[:, None] * z
    pulled = (sample_weights @ view_sum).repeat(views, 1) - own
    return (z * pulled).sum(1) / temperature


def weighted_neg_log_prob(z: Tensor, sample_weights: Tensor, temperature: float) -> Tensor:
    """sum_{p != i} W_ip * (-log p_ip) for every view-major anchor i, W from W_b [B, B].

    Uses -log p_ip = lse_i - s_ip, so no [n, n] log-probability matrix is kept for backward.
    Given a precomputed W_b this is the feature-only cost the benchmark compares against.
    """
    views = len(z) // len(sample_weights)
    lse = torch.logsumexp(_masked_logits(z, temperature), dim=1)
    return lse * _row_mass(sample_weights, views) - weighted_similarity(z, sample_weights, temperature)


def _zero_like_graph(values: Tensor) -> Tensor:
    """An exact 0 that keeps the autograd graph (a batch without any positive pair)."""
    return values.sum() * 0.0


# --------------------------------------------------------------------------------------
# Loss modules: one base does the shared steps, each loss supplies its anchor losses
# --------------------------------------------------------------------------------------


class ContrastiveLoss(nn.Module):
    """The shared forward of every contrastive loss (pytorch-metric-learning's shape).

    `forward` turns autocast off, makes the view-major anchor features z [n, D] (float32, or
    float64 kept), indexes the labels once (`index_labels`), asks the loss for its per-anchor
    values (`anchor_losses`, the only part a loss writes) and reduces them (`reduce`, by default
    the mean over the anchors that have a positive; a batch without one gives an exact 0 that
    keeps the graph). `per_anchor` returns the unreduced values.
    """

    name = ""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = float(temperature)  # checked by the LossSpec the loss is built from

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"

    def anchor_losses(self, z: Tensor, batch: BatchLabels, views: int, labels: Tensor) -> AnchorLosses:
        raise NotImplementedError  # pragma: no cover - every loss defines it

    def reduce(self, anchors: AnchorLosses, batch: BatchLabels, views: int) -> Tensor:
        if not bool(anchors.valid.any()):
            return _zero_like_graph(anchors.values)
        return anchors.values[anchors.valid].mean()

    def _run(self, features: Tensor, labels: Tensor, reduce: bool) -> AnchorLosses | Tensor:
        with torch.autocast(device_type=features.device.type, enabled=False):
            z, _, views = _anchor_features(features, labels)
            with torch.no_grad():
                batch = index_labels(labels)
            anchors = self.anchor_losses(z, batch, views, labels)
            return self.reduce(anchors, batch, views) if reduce else anchors

    def per_anchor(self, features: Tensor, labels: Tensor) -> AnchorLosses:
        return self._run(features, labels, reduce=False)

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        return self._run(features, labels, reduce=True)


class PairLoss(ContrastiveLoss):
    """Weighted-pair SupCon: L_i = -(1/N_i) sum_p W_ip log p_ip with W from `weight_fn`.

    ``log_weight_inside=True`` evaluates the paper's Eq. 12 as printed,
    ``-(1/N_i) sum_{p in P(i)} log(W_ip exp(s_ip) / sum_a exp(s_ia))``: that equals the ANY loss
    (P(i) = {p : W_ip > 0}) plus the feature-independent ``-(1/N_i) sum_p log W_ip``, so its
    gradients are exactly ANY's.
    """

    def __init__(
        self,
        name: str,
        weight_fn: Callable[[LabelOverlap], Tensor],
        temperature: float,
        log_weight_inside: bool = False,
    ):
        super().__init__(temperature)
        self.name = name
        self.weight_fn = weight_fn
        self.log_weight_inside = log_weight_inside

    def extra_repr(self) -> str:
        form = ", form=literal" if self.log_weight_inside else ""
        return f"name={self.name!r}, temperature={self.temperature}{form}"

    def anchor_losses(self, z: Tensor, batch: BatchLabels, views: int, labels: Tensor) -> AnchorLosses:
        with torch.no_grad():
            sample_weights = self.weight_fn(label_overlap(batch, z.dtype))
            positive = sample_weights > 0
            # N_i: views * (#samples b' with W > 0) minus the anchor itself.
            count = _row_mass(positive.to(z.dtype), views)
            shift = self._log_weight_shift(sample_weights, positive, views) if self.log_weight_inside else None
            if self.log_weight_inside:
                sample_weights = positive.to(z.dtype)
        values = weighted_neg_log_prob(z, sample_weights, self.temperature) / count.clamp_min(1)
        if shift is not None:
            values = values + shift / count.clamp_min(1)
        # An anchor without positives has all-zero weights and shift, so its value is already 0.
        return AnchorLosses(values, count > 0)

    @staticmethod
    def _log_weight_shift(sample_weights: Tensor, positive: Tensor, views: int) -> Tensor:
        """-sum_{p in P(i)} log W_ip per anchor (the literal form's constant)."""
        log_w = torch.where(positive, sample_weights.clamp_min(torch.finfo(sample_weights.dtype).tiny).log(), 0.0)
        per_sample = views * log_w.sum(1) - log_w.diagonal()
        return -per_sample.repeat(views)


class MulSupConLoss(ContrastiveLoss):
    """MulSupCon, batch form (paper Eq. 4-6): one positive set per anchor label.

    W_ip = sum_{c in S_i ∩ T_p} 1/n_c(i), n_c(i) = #{p != i : c in T_p}; L_i = -sum_p W_ip
    log p_ip (unnormalised per anchor); the reducer divides the sum over all anchors by the
    total label count sum_i |S_i|. (The official code is MoCo-style with a momentum encoder and
    a labelled queue; this is the paper's batch form.)
    """

    name = "mulsupcon"

    def __init__(self, temperature: float):
        super().__init__(temperature)

    def anchor_losses(self, z: Tensor, batch: BatchLabels, views: int, labels: Tensor) -> AnchorLosses:
        with torch.no_grad():
            sample_weights = label_overlap(batch, z.dtype, mulsupcon_label_weight(batch, views)).intersection
            valid = _row_mass(sample_weights, views) > 0
        return AnchorLosses(weighted_neg_log_prob(z, sample_weights, self.temperature), valid)

    def reduce(self, anchors: AnchorLosses, batch: BatchLabels, views: int) -> Tensor:
        if not bool(anchors.valid.any()):
            return _zero_like_graph(anchors.values)
        return anchors.values.sum() / batch.sizes.repeat(views).to(anchors.values.dtype).sum()


class _PrototypeLoss(ContrastiveLoss):
    """Shared parts of the losses with learnable, L2-normalised class prototypes P [L, D]."""

    def __init__(self, num_labels: int, dim: int, temperature: float):
        super().__init__(temperature)
        if num_labels < 1 or dim < 1:
            raise ValueError(f"prototype losses need num_labels >= 1 and dim >= 1, got {num_labels}, {dim}")
        self.prototypes = nn.Parameter(torch.randn(num_labels, dim) / math.sqrt(dim))

    def _prototype_logits(self, z: Tensor, labels: Tensor) -> Tensor:
        if labels.shape[1] != self.prototypes.shape[0]:
            raise ValueError(
                f"labels have {labels.shape[1]} columns but the loss has {self.prototypes.shape[0]} "
                "prototypes; pass num_labels equal to the label vocabulary size"
            )
        if z.shape[1] != self.prototypes.shape[1]:
            raise ValueError(f"features have dim {z.shape[1]} but prototypes have dim {self.prototypes.shape[1]}")
        prototypes = F.normalize(self.prototypes.to(z.dtype), dim=1)
        return z @ prototypes.T / self.temperature

    def reduce(self, anchors: AnchorLosses, batch: BatchLabels, views: int) -> Tensor:
        if not bool(anchors.valid.any()):  # keep the prototypes in the graph too
            return _zero_like_graph(anchors.values) + 0.0 * self.prototypes.sum()
        return anchors.values[anchors.valid].mean()


class ClassPrototypeLoss(_PrototypeLoss):
    """Class prototypes (Gupta et al. 2023, nearest public form): for anchor i, the mean over
    c in S_i of -log softmax_c(z_i . P / tau) over all L prototypes."""

    name = "proto"

    def __init__(self, num_labels: int, dim: int, temperature: float):
        super().__init__(num_labels, dim, temperature)

    def anchor_losses(self, z: Tensor, batch: BatchLabels, views: int, labels: Tensor) -> AnchorLosses:
        logits = self._prototype_logits(z, labels)
        with torch.no_grad():
            batch_size = batch.num_samples
            sizes = batch.sizes.repeat(views).to(z.dtype)
            rows = torch.cat([batch.rows + v * batch_size for v in range(views)])
            columns = batch.present[batch.columns].repeat(views)
        positive_sum = torch.zeros(len(z), dtype=z.dtype, device=z.device).index_add(0, rows, logits[rows, columns])
        values = torch.logsumexp(logits, dim=1) - positive_sum / sizes.clamp_min(1)
        valid = sizes > 0
        return AnchorLosses(torch.where(valid, values, values * 0.0), valid)


class MSCLoss(_PrototypeLoss):
    """MSC (Audibert et al. 2024) with prototypes.

    Denominator: log(beta * sum_{k != i} exp(s_ik) + sum_c exp(z_i . P_c / tau)). For each
    c in S_i the positives are P_c (weight 1) and every other view k with c in T_k (weight
    alpha / |S_i ∪ T_k|), weights rescaled to sum to 1 per label;
    L_i = -(1/|S_i|) sum_c sum_positives weight * (score - denominator).
    """

    name = "msc"

    def __init__(
        self,
        num_labels: int,
        dim: int,
        temperature: float,
        alpha: float = 1.0,
        beta: float = 0.1,
    ):
        super().__init__(num_labels, dim, temperature)
        if alpha < 0 or beta <= 0:
            raise ValueError(f"msc needs alpha >= 0 and beta > 0, got alpha={alpha}, beta={beta}")
        self.alpha = float(alpha)
        self.beta = float(beta)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, alpha={self.alpha}, beta={self.beta}"

    def anchor_losses(self, z: Tensor, batch: BatchLabels, views: int, labels: Tensor) -> AnchorLosses:
        prototype_logits = self._prototype_logits(z, labels)
        with torch.no_grad():
            overlap = label_overlap(batch, z.dtype)
            union = overlap.sizes[:, None] + overlap.sizes[None, :] - overlap.intersection
            sample_pull = torch.where(union > 0, self.alpha / union.clamp_min(1), 0.0)  # A_b
            held = batch.dense(z.dtype)  # [B, C] over the labels present
            # Z_ic = 1 + sum_{k != i} A_ik [c in T_k]: the views of sample b' each add
            # A_b[b, b']; the anchor itself does not.
            normaliser = 1 + views * (sample_pull @ held) - sample_pull.diagonal()[:, None] * held
            inverse_normaliser = held / normaliser  # 1/Z_bc on c in S_b, else 0
            shared_inverse = inverse_normaliser @ held.T  # M_b = sum_{c in S ∩ T} 1/Z
            pull_weights = sample_pull * shared_inverse  # [B, B]
            sizes = batch.sizes.repeat(views).to(z.dtype)
            anchor_inverse = inverse_normaliser.repeat(views, 1)
        logits = _masked_logits(z, self.temperature)
        denominator = torch.logsumexp(torch.cat([logits + math.log(self.beta), prototype_logits], dim=1), dim=1)
        prototype_pull = (anchor_inverse * prototype_logits[:, batch.present]).sum(1)
        sample_pull_term = weighted_similarity(z, pull_weights, self.temperature)
        values = denominator - (prototype_pull + sample_pull_term) / sizes.clamp_min(1)
        valid = sizes > 0
        return AnchorLosses(torch.where(valid, values, values * 0.0), valid)


class SupervisedBCE(nn.Module):
    """The supervised reference (method `bce`, not a contrastive loss): mean binary cross-entropy
    of per-view logits ``[B, V, L]`` against the labels (dense, COO or CSR ``[B, L]``), every
    view of a sample scored against that sample's labels."""

    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        targets = labels.to_dense() if labels.is_sparse or labels.layout == torch.sparse_csr else labels
        targets = targets.to(logits.dtype).unsqueeze(1).expand_as(logits)
        return F.binary_cross_entropy_with_logits(logits, targets)


def _pair_loss(name: str, temperature: float, form: str = "weighted") -> PairLoss:
    if form not in SIMDISSIM_FORMS:
        raise ValueError(f"simdissim form must be one of {SIMDISSIM_FORMS}, got {form!r}")
    return PairLoss(name, WEIGHT_FUNCTIONS[name], temperature, log_weight_inside=form == "literal")


def _prototype_loss(cls: type, temperature: float, num_labels: int | None = None, dim: int | None = None, **extra) -> nn.Module:
    if num_labels is None or dim is None:
        raise ValueError(f"loss {cls.name!r} needs option(s) ['dim', 'num_labels'] (label vocabulary size, feature dim)")
    return cls(int(num_labels), int(dim), temperature, **extra)


# How each built-in loss is built: name -> (builder taking temperature and the options, the
# options it takes besides temperature). Its names are mscl.registry.BUILTIN_LOSSES' (a test
# keeps them equal), which also holds their display names and declares their options
# (registry.BUILTIN_LOSS_OPTIONS: the workflow reads them there without importing torch); a
# plugin's losses are built by the factory it registered.
_BUILDERS: dict[str, Callable[..., nn.Module]] = {
    "all": functools.partial(_pair_loss, "all"),
    "any": functools.partial(_pair_loss, "any"),
    "mulsupcon": MulSupConLoss,
    "jaccard": functools.partial(_pair_loss, "jaccard"),
    "sim": functools.partial(_pair_loss, "sim"),
    "dissim": functools.partial(_pair_loss, "dissim"),
    "simdissim": functools.partial(_pair_loss, "simdissim"),
    # The paper's Eq. 12 exactly as printed (simdissim with form="literal"): its own method name,
    # so that the claim check runs it beside ANY, whose gradients it has (README, docs/losses.md).
    "eq12": functools.partial(_pair_loss, "simdissim", form="literal"),
    "proto": functools.partial(_prototype_loss, ClassPrototypeLoss),
    "msc": functools.partial(_prototype_loss, MSCLoss),
}
LOSSES: dict[str, tuple[Callable[..., nn.Module], frozenset[str]]] = {
    name: (build, registry.loss_options(name)) for name, build in _BUILDERS.items()
}
LOSS_NAMES = tuple(LOSSES)
PROTOTYPE_LOSSES = ("proto", "msc")


def make_loss(name: str, **options) -> nn.Module:
    """Build a loss by name (`LOSSES`): all, any, mulsupcon, jaccard, sim, dissim, simdissim,
    eq12 (simdissim with form="literal"), proto, msc.

    Options: ``temperature`` (default DEFAULT_TEMPERATURE, the paper's tau) for all; ``form``
    for simdissim (``weighted``, the default: the weight multiplies log p; ``literal``: the
    weight inside the log as printed in the paper's Eq. 12, gradient-identical to ANY);
    ``num_labels`` and ``dim`` for proto and msc; ``alpha`` (1.0) and ``beta`` (0.1) for msc.
    """
    run_options = {key: options.pop(key) for key in RUN_LOSS_OPTIONS if key in options}
    temperature = options.pop("temperature", DEFAULT_TEMPERATURE)
    return build_loss(LossSpec(name, temperature, options), **run_options)


def loss_options_taken(name: str) -> frozenset[str]:
    """The options loss `name` takes besides temperature (a registered loss: those it declared)."""
    if name in LOSSES:
        return LOSSES[name][1]
    entry = registry.plugin_loss(name)
    if entry is None:
        raise ValueError(registry.unknown_name_message("loss", name, registry.loss_names(), "the run spec"))
    return entry.options


def build_loss(spec: LossSpec, **run_options) -> nn.Module:
    """The loss `spec` names (built in, or registered by a plugin: mscl.registry), with its
    temperature and options, and the options the run fills in (`num_labels` and `dim`, for a
    loss that takes them)."""
    takes = loss_options_taken(spec.name)
    if spec.name in LOSSES:
        build = LOSSES[spec.name][0]
    elif (entry := registry.plugin_loss(spec.name)).weights is not None:
        build = functools.partial(PairLoss, spec.name, entry.weights)  # a registered pair loss
    else:
        build = entry.factory
    options = {**spec.options, **run_options}
    unknown = set(options) - takes
    if unknown:
        raise ValueError(f"loss {spec.name!r} does not take option(s) {sorted(unknown)}; it takes {sorted(takes | {'temperature'})}")
    return build(temperature=spec.temperature, **options)
