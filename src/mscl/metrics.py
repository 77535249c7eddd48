"""The paper's evaluation metrics, with every convention written down.

Inputs everywhere: ``y_true`` a {0,1} (or bool) array [N examples, L labels], dense or a
``scipy.sparse`` matrix (what the pipeline passes: a split's labels are never dense,
`mscl.train.labels`), and ``scores`` probabilities in [0, 1] of the same shape. Sparse labels
are made dense a chunk of rows or columns at a time, so both forms give the same numbers. A label is predicted when ``score > threshold``
(strictly greater: CAML rounds with ``np.round``, which sends exactly 0.5 to 0). The F1
threshold is 0.5 unless the caller passes one tuned on dev data (``tune_threshold``); this
module never looks at test data to pick a threshold.

Conventions (CAML / PLM-ICD semantics, see docs/metrics.md):

* every ratio whose denominator is 0 (0/0 precision, recall or F1) is 0, never NaN;
* a *summary* that has nothing to average over (micro-AUC with no positive or no negative,
  macro-AUC or mAP with no eligible label, Edin macro-F1 with no present label, a frequency
  bucket with no class) is ``float('nan')``;
* macro-F1 has two definitions here, both over ALL label columns and both always returned by
  ``evaluate`` under their own names: ``macro_f1_caml``, the harmonic mean of macro-precision
  and macro-recall (CAML, the MIMIC papers), and ``macro_f1_per_class``, the mean of per-class
  F1 = 2tp / (2tp + fp + fn) (MulSupCon's evaluation code, the image papers). Which one a
  dataset's plain ``macro_f1`` means is decided in one place, ``DATASET_FAMILIES`` and
  ``FAMILY_MACRO_F1`` (``macro_f1_definition(dataset)``); the mean of per-label F1 over labels
  present in the split is a third, Edin et al.'s ``edin_macro_f1``;
* rank metrics (AUC, AP) treat tied scores as sklearn does: a tie between a positive and a
  negative counts one half in AUC, and AP steps once per distinct score;
* P@k breaks score ties by the lower label index.

Everything is vectorised over labels and examples so that MIMIC-IV ICD-10 Full (25,230 labels
x ~8k test notes) evaluates in seconds; large arrays are processed in row or column chunks to
bound memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from scipy import sparse

from mscl.errors import InputError
from mscl.layout import DATASET_FAMILIES  # noqa: F401  (the built-in settings' families, read here by many)

DEFAULT_THRESHOLD = 0.5
# Edin et al. tune one global threshold on dev over this grid; read-only because it is a
# shared default argument.
DEFAULT_THRESHOLD_GRID = np.linspace(0.01, 0.99, 99)
DEFAULT_THRESHOLD_GRID.setflags(write=False)

# About this many matrix cells per chunk: a few tens of MB of temporaries per chunk.
_CELLS_PER_CHUNK = 4_000_000

# ------------------------------------------------------------- macro-F1 per dataset family

# The two macro-F1 definitions (Opitz & Burst, arXiv:1911.03347, call them "F1 of averages" and
# "averaged F1"). `evaluate` returns both as f"macro_f1_{definition}".
MACRO_F1_CAML = "caml"  # harmonic mean of macro-P and macro-R over all labels (CAML, PLM-ICD)
MACRO_F1_PER_CLASS = "per_class"  # mean over all classes of per-class F1 (MulSupCon's code)
MACRO_F1_DEFINITIONS = (MACRO_F1_CAML, MACRO_F1_PER_CLASS)

# Which definition a family's reported `macro_f1` means, after the papers its numbers compare
# with (docs/metrics.md says why for each):
# * mimic: the paper cites CAML and Nguyen et al. for its MIMIC metrics, and every row of its
#   SOTA table uses CAML's macro-F1;
# * image: the paper follows MoCo, MulSupCon and Audibert et al.; MulSupCon's evaluation code
#   averages per-class F1;
# * text (AAPD; the claim check's debtags): the paper names no source. Its AAPD table reports the
#   image protocol's F1 pair from the same probe, Audibert et al. (cited for those metrics) are
#   a text paper that evaluates AAPD, and the multi-label text literature (and scikit-learn's
#   average="macro") averages per-class F1;
# * tabular (the claim check's yeast): MulSupCon's own benchmark, scored by its code.
FAMILY_MACRO_F1 = {"image": MACRO_F1_PER_CLASS, "text": MACRO_F1_PER_CLASS, "tabular": MACRO_F1_PER_CLASS, "mimic": MACRO_F1_CAML}


def dataset_family(dataset: str, source: str | Path | None = None, family: str | None = None) -> str:
    """The family (image, text, tabular, mimic) of a dataset setting: `family` when given (a run
    spec's `dataset_family`, for a dataset of one's own), else its DATASET_FAMILIES entry.
    InputError naming `source` (the spec, run or folder that named the dataset) for an unknown
    family, a dataset without one, or a `family` that contradicts DATASET_FAMILIES."""
    known = DATASET_FAMILIES.get(dataset)
    if family is not None:
        if family not in FAMILY_MACRO_F1:
            raise InputError(source, f"dataset_family {family!r} is not a dataset family", f"use one of {list(FAMILY_MACRO_F1)}", field="dataset_family")
        if known not in (None, family):
            raise InputError(
                source, f"dataset {dataset!r} is of family {known!r}, not {family!r}",
                f"leave dataset_family out for {dataset!r}, or give the dataset of one's own another name", field="dataset_family",
            )  # fmt: skip
        return family
    if known is None:
        raise InputError(
            source,
            f"dataset {dataset!r} has no family in mscl.metrics.DATASET_FAMILIES (known: "
            f"{', '.join(sorted(DATASET_FAMILIES))}), so its macro-F1 definition is unknown",
            f"give the run spec a `dataset_family` ({', '.join(FAMILY_MACRO_F1)}), or use one of those dataset settings",
            field="dataset",
        )
    return known


def macro_f1_definition(dataset: str, source: str | Path | None = None, family: str | None = None) -> str:
    """The macro-F1 definition (MACRO_F1_CAML or MACRO_F1_PER_CLASS) a dataset's `macro_f1`
    reports, by `dataset_family(dataset, source, family)`."""
    return FAMILY_MACRO_F1[dataset_family(dataset, source, family)]


def macro_f1_key(definition: str) -> str:
    """The metric key of one definition, e.g. 'macro_f1_per_class'; ValueError for an unknown one."""
    if definition not in MACRO_F1_DEFINITIONS:
        raise ValueError(f"unknown macro-F1 definition {definition!r}; use one of {list(MACRO_F1_DEFINITIONS)}")
    return f"macro_f1_{definition}"


# --------------------------------------------------------------------------- validation


Labels = np.ndarray | sparse.csr_array  # a validated label matrix: dense bool, or canonical bool CSR


def _as_label_matrix(y_true: np.ndarray) -> np.ndarray | sparse.csr_array:
    """Return ``y_true`` as a 2-D bool matrix (a scipy.sparse input as a bool CSR array with
    sorted, unique indices); ValueError unless it is 2-D, non-empty and {0,1}."""
    if sparse.issparse(y_true):
        return _as_sparse_label_matrix(y_true)
    labels = np.asarray(y_true)
    if labels.ndim != 2:
        raise ValueError(f"y_true must be a 2-D array [examples, labels], got shape {labels.shape}")
    if labels.size == 0:
        raise ValueError(f"y_true is empty (shape {labels.shape}); need at least one example and one label")
    if labels.dtype == np.bool_:
        return labels
    if not (np.issubdtype(labels.dtype, np.number)):
        raise ValueError(f"y_true must be numeric or bool with values in {{0, 1}}, got dtype {labels.dtype}")
    if not np.all((labels == 0) | (labels == 1)):
        bad = labels[(labels != 0) & (labels != 1)].flat[0]
        raise ValueError(f"y_true must be binary (0/1); found the value {bad!r}")
    return labels != 0


def _as_sparse_label_matrix(y_true) -> sparse.csr_array:
    labels = sparse.csr_array(y_true)
    if labels.shape[0] == 0 or labels.shape[1] == 0:
        raise ValueError(f"y_true is empty (shape {labels.shape}); need at least one example and one label")
    if labels.dtype != np.bool_ and not np.issubdtype(labels.dtype, np.number):
        raise ValueError(f"y_true must be numeric or bool with values in {{0, 1}}, got dtype {labels.dtype}")
    labels.sum_duplicates()  # also sorts the indices
    labels.eliminate_zeros()
    if labels.dtype != np.bool_ and not np.all(labels.data == 1):
        raise ValueError(f"y_true must be binary (0/1); found the value {labels.data[labels.data != 1][0]!r}")
    return sparse.csr_array((np.ones(labels.nnz, dtype=bool), labels.indices, labels.indptr), shape=labels.shape)


def _label_rows(labels: Labels, start: int, stop: int) -> np.ndarray:
    """Rows start..stop-1 of a validated label matrix as a dense bool array."""
    return labels[start:stop].toarray() if sparse.issparse(labels) else labels[start:stop]


def _positives_per_label(labels: Labels) -> np.ndarray:
    """How many examples carry each label, int64 [L]."""
    if sparse.issparse(labels):
        return np.bincount(labels.indices, minlength=labels.shape[1]).astype(np.int64)
    return np.count_nonzero(labels, axis=0).astype(np.int64)


def _positive_scores(labels: Labels, scores: np.ndarray) -> np.ndarray:
    """The scores of every positive cell (in no particular order)."""
    if sparse.issparse(labels):
        rows = np.repeat(np.arange(labels.shape[0]), np.diff(labels.indptr))
        return scores[rows, labels.indices]
    return scores[labels]


def _row_chunks(labels: Labels) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive row chunks of about _CELLS_PER_CHUNK cells."""
    num_examples, num_labels = labels.shape
    chunk = max(1, _CELLS_PER_CHUNK // num_labels)
    return ((start, min(start + chunk, num_examples)) for start in range(0, num_examples, chunk))


def _as_score_matrix(scores: np.ndarray, expected_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``scores`` as a float matrix of ``expected_shape`` with values in [0, 1].

    float32 and float64 are kept as they are (no copy of a large float32 matrix); other
    numeric types become float64.
    """
    values = np.asarray(scores)
    if values.shape != expected_shape:
        raise ValueError(f"scores has shape {values.shape} but y_true has shape {expected_shape}; they must match")
    if values.dtype not in (np.float32, np.float64):
        if not np.issubdtype(values.dtype, np.number) or np.issubdtype(values.dtype, np.complexfloating):
            raise ValueError(f"scores must be real numbers, got dtype {values.dtype}")
        values = values.astype(np.float64)
    # min/max propagate NaN, so two reductions check NaN and the range without temporaries.
    lowest, highest = values.min(), values.max()
    if np.isnan(lowest) or np.isnan(highest):
        raise ValueError("scores contains NaN; every score must be a probability in [0, 1]")
    if lowest < 0 or highest > 1:
        raise ValueError(
            f"scores must be probabilities in [0, 1] (apply a sigmoid to logits first); "
            f"found values in [{lowest}, {highest}]"
        )
    return values


def _validated(y_true: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (labels, scores) pair and return them as (bool matrix, float matrix)."""
    labels = _as_label_matrix(y_true)
    return labels, _as_score_matrix(scores, labels.shape)


def _validated_threshold(threshold: float) -> float:
    """Return ``threshold`` as a float; ValueError unless it is a finite number."""
    value = float(threshold)
    if not np.isfinite(value):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    return value


def _validated_k(k: int) -> int:
    """Return ``k`` as an int; ValueError unless it is a positive integer."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


# ------------------------------------------------------------------- thresholded metrics


def _safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Element-wise numerator / denominator with 0/0 (any x/0) defined as 0."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator != 0)


def _harmonic_mean(precision: float, recall: float) -> float:
    """F1 from precision and recall, 0 when both are 0."""
    return float(_safe_ratio(2.0 * precision * recall, precision + recall))


def _confusion_counts(labels: Labels, scores: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label (tp, fp, fn) counts of ``score > threshold`` as int64 arrays of length L, in row chunks."""
    true_positives = np.zeros(labels.shape[1], dtype=np.int64)
    predicted_positives = np.zeros(labels.shape[1], dtype=np.int64)
    for start, stop in _row_chunks(labels):
        predicted = scores[start:stop] > threshold
        true_positives += np.count_nonzero(_label_rows(labels, start, stop) & predicted, axis=0)
        predicted_positives += np.count_nonzero(predicted, axis=0)
    return true_positives, predicted_positives - true_positives, _positives_per_label(labels) - true_positives


def _counts_at_threshold(
    y_true: np.ndarray, scores: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate inputs and return per-label (tp, fp, fn) for ``score > threshold``."""
    labels, values = _validated(y_true, scores)
    return _confusion_counts(labels, values, _validated_threshold(threshold))


def _per_label_f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Per-label F1 = 2tp / (2tp + fp + fn), 0 when the label is never true nor predicted."""
    return _safe_ratio(2 * tp, 2 * tp + fp + fn)


def _micro_f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
    """Micro-F1 = 2TP / (2TP + FP + FN) over all cells, 0 when nothing is true nor predicted."""
    total_tp = int(tp.sum())
    return float(_safe_ratio(2 * total_tp, 2 * total_tp + int(fp.sum()) + int(fn.sum())))


def _edin_macro_f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
    """Mean per-label F1 over labels with >= 1 positive; NaN when no label has one."""
    present = (tp + fn) > 0
    if not present.any():
        return float("nan")
    return float(_per_label_f1_from_counts(tp, fp, fn)[present].mean())


def _caml_macro_f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
    """Harmonic mean of macro-P and macro-R, each the mean over ALL columns (0/0 -> 0)."""
    return _harmonic_mean(float(_safe_ratio(tp, tp + fp).mean()), float(_safe_ratio(tp, tp + fn).mean()))


def _per_class_macro_f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
    """Mean over ALL columns of per-class F1 = 2tp / (2tp + fp + fn), 0 for a class never true nor predicted."""
    return float(_per_label_f1_from_counts(tp, fp, fn).mean())


_MACRO_F1_FROM_COUNTS = {MACRO_F1_CAML: _caml_macro_f1_from_counts, MACRO_F1_PER_CLASS: _per_class_macro_f1_from_counts}


def _macro_f1_variants_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> dict[str, float]:
    """Both definitions under their keys: {'macro_f1_caml': ..., 'macro_f1_per_class': ...}."""
    return {macro_f1_key(name): function(tp, fp, fn) for name, function in _MACRO_F1_FROM_COUNTS.items()}


def _micro_and_macro_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, definition: str) -> dict[str, float]:
    """Micro P/R/F1 over the flattened matrix; macro P/R over all label columns; both macro-F1
    definitions, and `macro_f1` = the one named by `definition`."""
    total_tp, total_fp, total_fn = int(tp.sum()), int(fp.sum()), int(fn.sum())
    variants = _macro_f1_variants_from_counts(tp, fp, fn)
    return {
        "micro_precision": float(_safe_ratio(total_tp, total_tp + total_fp)),
        "micro_recall": float(_safe_ratio(total_tp, total_tp + total_fn)),
        "micro_f1": _micro_f1_from_counts(tp, fp, fn),
        "macro_precision": float(_safe_ratio(tp, tp + fp).mean()),
        "macro_recall": float(_safe_ratio(tp, tp + fn).mean()),
        "macro_f1": variants[macro_f1_key(definition)],
        **variants,
    }


def per_class_f1(y_true: np.ndarray, scores: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """F1 of every label column at ``score > threshold``, float64 array of length L.

    F1 = 2tp / (2tp + fp + fn); a label with no positive and no prediction (0/0) gets 0,
    as sklearn's ``f1_score(average=None, zero_division=0)``.
    """
    return _per_label_f1_from_counts(*_counts_at_threshold(y_true, scores, threshold))


def macro_f1_caml(y_true: np.ndarray, scores: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> float:
    """CAML's macro-F1: harmonic mean of macro-precision and macro-recall, each averaged over ALL
    label columns (a ratio with denominator 0 is 0). The MIMIC family's ``macro_f1``."""
    return _caml_macro_f1_from_counts(*_counts_at_threshold(y_true, scores, threshold))


def macro_f1_per_class(y_true: np.ndarray, scores: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> float:
    """MulSupCon's macro-F1: mean over ALL label columns of per-class F1 = 2tp / (2tp + fp + fn).

    A class never true and never predicted (2tp + fp + fn = 0) counts 0, as in MulSupCon's code,
    whose +1e-6 in the denominator makes that 0/0 a finite 0 that its non-finite filter keeps;
    this equals scikit-learn's ``f1_score(average="macro", zero_division=0)``. The image, text
    and tabular families' ``macro_f1``.
    """
    return _per_class_macro_f1_from_counts(*_counts_at_threshold(y_true, scores, threshold))


def macro_f1_variants(y_true: np.ndarray, scores: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> dict[str, float]:
    """Both macro-F1 definitions from one count pass: {'macro_f1_caml': ..., 'macro_f1_per_class': ...}."""
    return _macro_f1_variants_from_counts(*_counts_at_threshold(y_true, scores, threshold))


def edin_macro_f1(y_true: np.ndarray, scores: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> float:
    """Edin et al.'s macro-F1: mean of per-label F1 over labels with >= 1 positive in the split.

    Differs from both ``macro_f1_caml`` and ``macro_f1_per_class`` (which average over all
    columns). NaN when no label has a positive.
    """
    return _edin_macro_f1_from_counts(*_counts_at_threshold(y_true, scores, threshold))


# ------------------------------------------------------------------------- rank metrics


def _rank_metrics_of_rows(label_rows: np.ndarray, score_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ROC AUC and average precision of each row (one row = one label's column), from one sort.

    AUC = (sum of positives' mid-ranks - P(P+1)/2) / (P * Nneg), mid-ranks averaging ties
    (NaN without a positive or a negative). AP = sum over positives of the precision at the
    positive's score, counting every cell with an equal or higher score as predicted, / P;
    this equals sklearn's step-wise AP (NaN without a positive).

    After the sort only the positive cells are visited: each finds its run of tied scores by a
    binary search among the run starts, so the cost beyond the sort is O(cells) comparisons.
    """
    num_rows, width = score_rows.shape
    order = np.argsort(score_rows, axis=1)
    sorted_scores = np.take_along_axis(score_rows, order, axis=1)
    sorted_labels = np.take_along_axis(label_rows, order, axis=1)

    starts_run = np.ones(sorted_scores.shape, dtype=bool)
    starts_run[:, 1:] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
    # Flat positions of run starts, plus a sentinel so that run i ends before start i + 1.
    run_bounds = np.append(np.flatnonzero(starts_run), num_rows * width)
    positive_cells = np.flatnonzero(sorted_labels)
    row = positive_cells // width
    run = np.searchsorted(run_bounds, positive_cells, side="right") - 1
    row_start = row * width
    first = run_bounds[run] - row_start  # positions within the row, ascending order
    last = run_bounds[run + 1] - 1 - row_start

    positives = np.bincount(row, minlength=num_rows).astype(np.float64)
    negatives = width - positives
    mid_rank_sum = np.bincount(row, weights=(first + last) / 2.0 + 1.0, minlength=num_rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = (mid_rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives)
    auc[(positives == 0) | (negatives == 0)] = np.nan

    positives_in_earlier_rows = (np.cumsum(positives) - positives).astype(np.int64)
    positives_below_run = np.searchsorted(positive_cells, run_bounds[run], side="left") - positives_in_earlier_rows[row]
    precision_at_run = (positives[row] - positives_below_run) / (width - first)
    with np.errstate(divide="ignore", invalid="ignore"):
        average_precision = np.bincount(row, weights=precision_at_run, minlength=num_rows) / positives
    average_precision[positives == 0] = np.nan
    return auc, average_precision


def _per_label_rank_metrics(labels: Labels, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-label (AUC, AP) arrays for validated inputs; labels without a positive are NaN."""
    num_examples, num_labels = labels.shape
    auc = np.full(num_labels, np.nan)
    average_precision = np.full(num_labels, np.nan)
    # Columns without a positive are NaN in both metrics: skip their sort entirely.
    columns = np.flatnonzero(_positives_per_label(labels))
    by_column = labels.T.tocsr() if sparse.issparse(labels) else None  # each label's examples, one row per label
    chunk = max(1, _CELLS_PER_CHUNK // num_examples)
    for start in range(0, columns.size, chunk):
        selected = columns[start : start + chunk]
        # Transposed copies make each label a contiguous row for the sort.
        label_rows = by_column[selected].toarray() if by_column is not None else np.ascontiguousarray(labels[:, selected].T)
        chunk_auc, chunk_ap = _rank_metrics_of_rows(label_rows, np.ascontiguousarray(scores[:, selected].T))
        auc[selected] = chunk_auc
        average_precision[selected] = chunk_ap
    return auc, average_precision


def per_label_auc_and_ap(y_true: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-label ROC AUC and average precision, each a float64 array of length L.

    AUC equals sklearn's ``roc_auc_score`` on the column and is NaN when the column has no
    positive or no negative; AP equals ``average_precision_score`` and is NaN when the
    column has no positive. Computed from one argsort per column, in column chunks.
    """
    return _per_label_rank_metrics(*_validated(y_true, scores))


def _micro_auc(labels: Labels, scores: np.ndarray) -> float:
    """ROC AUC over the flattened matrix (ties count 1/2); NaN without a positive or a negative.

    Counts, for each positive score, the negatives strictly below and equal to it with binary
    searches in the sorted scores, which needs one sort of the values and no argsort.
    """
    positive_scores = _positive_scores(labels, scores)
    num_positives = positive_scores.size
    num_negatives = scores.size - num_positives
    if num_positives == 0 or num_negatives == 0:
        return float("nan")
    all_sorted = np.sort(scores, axis=None)
    positive_sorted = np.sort(positive_scores)
    all_below = np.searchsorted(all_sorted, positive_sorted, side="left")
    all_up_to = np.searchsorted(all_sorted, positive_sorted, side="right")
    positives_below = np.searchsorted(positive_sorted, positive_sorted, side="left")
    positives_up_to = np.searchsorted(positive_sorted, positive_sorted, side="right")
    negatives_below = (all_below - positives_below).sum(dtype=np.float64)
    negatives_tied = ((all_up_to - all_below) - (positives_up_to - positives_below)).sum(dtype=np.float64)
    return float((negatives_below + 0.5 * negatives_tied) / (num_positives * float(num_negatives)))


def _gold_in_top_k(labels: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Per example, how many gold labels are among the k highest scores (ties: lower index first)."""
    num_labels = scores.shape[1]
    kth_highest = np.partition(scores, num_labels - k, axis=1)[:, num_labels - k : num_labels - k + 1]
    above = scores > kth_highest
    tied = scores == kth_highest
    # The k-th score's ties fill the remaining places in label-index order.
    places_left = k - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= places_left))
    return np.count_nonzero(chosen & labels, axis=1)


def _precision_at_k(labels: Labels, scores: np.ndarray, k: int) -> float:
    """Mean over examples of (gold labels in the top-k scores) / k, in row chunks.

    When k exceeds the number of labels every label is taken and the denominator is the
    number of labels, as CAML's ``precision_at_k`` (it divides by ``len(topk)``).
    """
    num_examples, num_labels = labels.shape
    taken = min(k, num_labels)
    hits = sum(
        int(_gold_in_top_k(_label_rows(labels, start, stop), scores[start:stop], taken).sum())
        for start, stop in _row_chunks(labels)
    )
    return hits / (taken * num_examples)


def precision_at_k(y_true: np.ndarray, scores: np.ndarray, k: int) -> float:
    """P@k: mean over examples of (gold labels among the k highest scores) / k.

    Ties are broken deterministically: among equal scores the lower label index ranks first.
    An example without any gold label contributes 0. For k > L the denominator is L.
    """
    return _precision_at_k(*_validated(y_true, scores), _validated_k(k))


def _nan_mean(values: np.ndarray) -> tuple[float, int]:
    """Mean of the non-NaN values (NaN if none) and how many NaN values were skipped."""
    defined = ~np.isnan(values)
    skipped = int(values.size - np.count_nonzero(defined))
    return (float(values[defined].mean()) if defined.any() else float("nan")), skipped


# ------------------------------------------------------------------------- entry points


def evaluate(
    y_true: np.ndarray,
    scores: np.ndarray,
    k: Sequence[int] = (5, 8),
    threshold: float = DEFAULT_THRESHOLD,
    *,
    macro_f1_definition: str,
) -> dict[str, float | int]:
    """All of the paper's metrics for one split, as plain floats/ints (fractions in [0, 1]).

    Keys: micro_precision, micro_recall, micro_f1 (over the flattened matrix); macro_precision,
    macro_recall (per-label tp/(tp+fp) and tp/(tp+fn), 0/0 -> 0, averaged over ALL labels);
    macro_f1_caml (their harmonic mean, CAML) and macro_f1_per_class (the mean of per-class F1
    over ALL labels, MulSupCon); macro_f1, the one of the two that ``macro_f1_definition``
    names (pass ``macro_f1_definition(dataset)``); micro_auc (flattened; NaN without a positive
    or a negative); macro_auc (mean per-label AUC over labels with >= 1 positive and >= 1
    negative; macro_auc_skipped_labels counts the others); map (mean per-label average
    precision over labels with >= 1 positive; map_skipped_labels counts the others);
    p_at_{k} for each k; threshold; num_examples; num_labels.
    """
    macro_f1_key(macro_f1_definition)  # ValueError for an unknown definition, before any work
    labels, values = _validated(y_true, scores)
    cutoff = _validated_threshold(threshold)
    ks = [_validated_k(each) for each in k]
    num_examples, num_labels = labels.shape

    results: dict[str, float | int] = dict(
        _micro_and_macro_from_counts(*_confusion_counts(labels, values, cutoff), macro_f1_definition)
    )
    results["micro_auc"] = _micro_auc(labels, values)
    per_label_auc, per_label_ap = _per_label_rank_metrics(labels, values)
    results["macro_auc"], results["macro_auc_skipped_labels"] = _nan_mean(per_label_auc)
    results["map"], results["map_skipped_labels"] = _nan_mean(per_label_ap)
    for each in ks:
        results[f"p_at_{each}"] = _precision_at_k(labels, values, each)
    results["threshold"] = cutoff
    results["num_examples"] = int(num_examples)
    results["num_labels"] = int(num_labels)
    return results


# Entries of `evaluate` (and of collect's bucket sizes) that count or configure rather than score;
# every other entry is a score, a fraction in [0, 1].
BOOKKEEPING_METRICS = ("threshold", "num_examples")
BOOKKEEPING_SUFFIX = "_labels"  # num_labels, map_skipped_labels, bucket_head_labels, ...


def is_score(metric: str) -> bool:
    """Whether a metric entry is a score (not a count or the threshold)."""
    return metric not in BOOKKEEPING_METRICS and not metric.endswith(BOOKKEEPING_SUFFIX)


def _micro_f1_per_threshold(labels: Labels, scores: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Micro-F1 at ``score > t`` for every t of the ascending ``grid``, from one pass in row chunks.

    Each score is binned by how many grid values lie strictly below it; a suffix sum of the
    bin counts then gives the number of predictions at every threshold at once.
    """
    predicted = np.zeros(grid.size + 1, dtype=np.int64)
    true_positives = np.zeros(grid.size + 1, dtype=np.int64)
    for start, stop in _row_chunks(labels):
        bins = np.searchsorted(grid, scores[start:stop], side="left")
        predicted += np.bincount(bins.ravel(), minlength=grid.size + 1)
        true_positives += np.bincount(bins[_label_rows(labels, start, stop)], minlength=grid.size + 1)
    # A score in bin b exceeds grid[0..b-1]: predicted at threshold g iff b > g.
    predicted_at = np.cumsum(predicted[::-1])[::-1][1:]
    true_positives_at = np.cumsum(true_positives[::-1])[::-1][1:]
    num_gold = int(_positives_per_label(labels).sum())
    return _safe_ratio(2 * true_positives_at, predicted_at + num_gold)


def tune_threshold(
    y_true_dev: np.ndarray, scores_dev: np.ndarray, grid: Sequence[float] | np.ndarray = DEFAULT_THRESHOLD_GRID
) -> float:
    """The single global threshold from ``grid`` that maximises micro-F1 on DEV data (Edin et al.).

    Predictions are ``score > t``. Among equally good thresholds the lowest wins. Only ever
    pass dev/validation predictions: choosing a threshold on test inflates test scores.
    """
    labels, values = _validated(y_true_dev, scores_dev)
    requested = np.asarray(grid, dtype=np.float64)
    if requested.ndim != 1 or requested.size == 0 or not np.all(np.isfinite(requested)):
        raise ValueError(f"grid must be a non-empty 1-D sequence of finite thresholds, got {grid!r}")
    candidates = np.unique(requested)  # sorted ascending, duplicates removed
    micro_f1 = _micro_f1_per_threshold(labels, values, candidates)
    return float(candidates[int(np.argmax(micro_f1))])


def evaluate_edin(y_true: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, float]:
    """Edin et al.'s F1 variants at a threshold tuned on dev (see ``tune_threshold``).

    Keys: edin_micro_f1 (micro-F1 at ``score > threshold``), edin_macro_f1 (mean per-label F1
    over labels with >= 1 positive, NaN if none), edin_threshold.
    """
    counts = _counts_at_threshold(y_true, scores, threshold)
    return {
        "edin_micro_f1": _micro_f1_from_counts(*counts),
        "edin_macro_f1": _edin_macro_f1_from_counts(*counts),
        "edin_threshold": _validated_threshold(threshold),
    }


# ------------------------------------------------------------------ frequency buckets


def head_tail_split(train_counts: np.ndarray, head_share: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """Label indices of the head and tail buckets from training instance counts.

    Labels are sorted by count, descending, ties by lower index; the head is the smallest
    prefix whose cumulative count reaches ``head_share`` of all instances (with a relative
    tolerance of 1e-12 so that e.g. 0.7 * 100 = 70.00000000000001 is reached by 70), the tail
    is the rest.
    """
    counts = np.asarray(train_counts)
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(f"train_counts must be a non-empty 1-D array, got shape {counts.shape}")
    if not np.issubdtype(counts.dtype, np.number) or np.any(~np.isfinite(counts)) or np.any(counts < 0):
        raise ValueError("train_counts must hold finite, non-negative instance counts")
    if not 0 < head_share <= 1:
        raise ValueError(f"head_share must be in (0, 1], got {head_share!r}")
    total = float(counts.sum())
    if total == 0:
        raise ValueError("train_counts sums to 0; the buckets need at least one training instance")
    by_frequency = np.argsort(-counts, kind="stable")
    cumulative = np.cumsum(counts[by_frequency], dtype=np.float64)
    needed = head_share * total * (1 - 1e-12)
    head_size = int(np.searchsorted(cumulative, needed, side="left")) + 1
    return by_frequency[:head_size], by_frequency[head_size:]


def bucket_macro_f1(
    y_true: np.ndarray,
    scores: np.ndarray,
    train_counts: np.ndarray,
    head_share: float = 0.6,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    definition: str,
) -> dict[str, float | int]:
    """Macro-F1 of the head and tail frequency buckets (paper, long-tail analysis on MS-COCO).

    Buckets come from ``head_tail_split`` on the TRAINING counts. A bucket's macro-F1 is the
    ``definition`` (MACRO_F1_CAML or MACRO_F1_PER_CLASS) computed on the bucket's columns only,
    every class of the bucket included: pass the dataset's ``macro_f1_definition`` so that the
    buckets read like the table they extend. NaN for an empty bucket. Returns head, tail,
    head_labels, tail_labels.
    """
    macro_f1_key(definition)  # ValueError for an unknown definition
    from_counts = _MACRO_F1_FROM_COUNTS[definition]
    tp, fp, fn = _counts_at_threshold(y_true, scores, threshold)
    if np.asarray(train_counts).shape != tp.shape:
        raise ValueError(
            f"train_counts has shape {np.asarray(train_counts).shape} but there are {tp.size} labels; they must match"
        )
    head, tail = head_tail_split(train_counts, head_share)
    return {
        "head": from_counts(tp[head], fp[head], fn[head]) if head.size else float("nan"),
        "tail": from_counts(tp[tail], fp[tail], fn[tail]) if tail.size else float("nan"),
        "head_labels": int(head.size),
        "tail_labels": int(tail.size),
    }
