"""mscl.metrics: hand-computed values on tiny matrices, agreement with scikit-learn where the
definitions coincide, and input validation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.metrics import (
    average_precision_score,
    f1_score,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
    roc_auc_score,
)

from mscl import metrics
from mscl.errors import InputError

CAML, PER_CLASS = metrics.MACRO_F1_CAML, metrics.MACRO_F1_PER_CLASS

# 4 examples x 3 labels. Label 2 has no positive; example 3 has no label.
HAND_Y = np.array(
    [
        [1, 0, 0],
        [1, 1, 0],
        [0, 1, 0],
        [0, 0, 0],
    ]
)
HAND_SCORES = np.array(
    [
        [0.9, 0.6, 0.2],
        [0.4, 0.8, 0.1],
        [0.7, 0.3, 0.55],
        [0.4, 0.1, 0.5],  # 0.5 is NOT above the 0.5 threshold
    ]
)
# Predictions (score > 0.5):      label 0       label 1       label 2
#   y                             [1,1,0,0]     [0,1,1,0]     [0,0,0,0]
#   pred                          [1,0,1,0]     [1,1,0,0]     [0,0,1,0]
#   tp / fp / fn                  1 / 1 / 1     1 / 1 / 1     0 / 1 / 0
#   precision / recall / F1       1/2,1/2,1/2   1/2,1/2,1/2   0/1=0, 0/0->0, 0


def test_evaluate_matches_hand_computed_values() -> None:
    result = metrics.evaluate(HAND_Y, HAND_SCORES, k=(1, 2, 3), macro_f1_definition=CAML)
    # micro: TP = 2, FP = 3, FN = 2 -> P = 2/5, R = 2/4, F1 = 2*2 / (2*2 + 3 + 2) = 4/9
    assert result["micro_precision"] == pytest.approx(2 / 5)
    assert result["micro_recall"] == pytest.approx(1 / 2)
    assert result["micro_f1"] == pytest.approx(4 / 9)
    # macro over ALL 3 columns: P = (1/2 + 1/2 + 0)/3 = 1/3, R = (1/2 + 1/2 + 0)/3 = 1/3, F1 = 1/3
    assert result["macro_precision"] == pytest.approx(1 / 3)
    assert result["macro_recall"] == pytest.approx(1 / 3)
    assert result["macro_f1"] == pytest.approx(1 / 3)
    # AUC label 0: pos {0.9, 0.4}, neg {0.7, 0.4}: 0.9>0.7, 0.9>0.4, 0.4<0.7, 0.4=0.4 (1/2) -> 2.5/4
    # AUC label 1: pos {0.8, 0.3}, neg {0.6, 0.1}: 1 + 1 + 0 + 1 = 3/4; label 2 skipped
    assert result["macro_auc"] == pytest.approx((0.625 + 0.75) / 2)
    assert result["macro_auc_skipped_labels"] == 1
    # micro AUC: positives 0.9, 0.8, 0.4, 0.3; negatives 0.1 0.1 0.2 0.4 0.5 0.55 0.6 0.7
    # 0.9 -> 8, 0.8 -> 8, 0.4 -> 3 below + 1 tie/2 = 3.5, 0.3 -> 3: 22.5 / (4*8)
    assert result["micro_auc"] == pytest.approx(22.5 / 32)
    # AP label 0, descending: 0.9 (pos) | 0.7 (neg) | 0.4 tie (pos, neg)
    #   recall 1/2 at precision 1/1, then recall +1/2 at precision 2/4 -> 0.5 + 0.25 = 3/4
    # AP label 1: 0.8 (pos) 0.6 (neg) 0.3 (pos) 0.1 (neg) -> 1/2 * 1 + 1/2 * 2/3 = 5/6
    assert result["map"] == pytest.approx((3 / 4 + 5 / 6) / 2)
    assert result["map_skipped_labels"] == 1
    # P@1: tops are labels 0, 1, 0, 2 -> hits 1, 1, 0, 0 -> 2/4
    assert result["p_at_1"] == pytest.approx(0.5)
    # P@2: {0,1} -> 1/2, {1,0} -> 2/2, {0,2} -> 0, {2,0} -> 0 -> (0.5 + 1) / 4
    assert result["p_at_2"] == pytest.approx(0.375)
    # P@3 takes every label: gold counts 1, 2, 1, 0 over 3 -> (4/3) / 4
    assert result["p_at_3"] == pytest.approx(1 / 3)
    assert result["num_examples"] == 4
    assert result["num_labels"] == 3
    assert result["threshold"] == 0.5


def test_evaluate_returns_plain_json_serialisable_values() -> None:
    result = metrics.evaluate(HAND_Y, HAND_SCORES, macro_f1_definition=CAML)
    for key in ("micro_f1", "macro_f1", "map", "micro_auc", "macro_auc", "p_at_5", "p_at_8"):
        assert type(result[key]) is float
    for key in ("map_skipped_labels", "macro_auc_skipped_labels", "num_examples", "num_labels"):
        assert type(result[key]) is int
    assert json.loads(json.dumps(result)) == result


def test_threshold_is_strict_and_a_score_of_exactly_the_threshold_is_negative() -> None:
    y = np.array([[1, 1]])
    # 0.5 is not predicted at threshold 0.5: tp = 1, fn = 1 -> per-class F1 [1, 0]
    assert metrics.per_class_f1(y, np.array([[0.51, 0.5]])).tolist() == [1.0, 0.0]
    # At threshold 0.4 both are predicted.
    assert metrics.per_class_f1(y, np.array([[0.51, 0.5]]), threshold=0.4).tolist() == [1.0, 1.0]


# Column 0: y [1,0,0,0], pred [1,1,1,1] -> tp 1, fp 3, fn 0 -> P 1/4, R 1, F1 2/5
# Column 1: y [1,1,1,1], pred [1,0,0,0] -> tp 1, fp 0, fn 3 -> P 1,   R 1/4, F1 2/5
SKEWED_Y = np.array([[1, 1], [0, 1], [0, 1], [0, 1]])
SKEWED_SCORES = np.array([[0.9, 0.9], [0.9, 0.1], [0.9, 0.1], [0.9, 0.1]])


def test_macro_f1_is_harmonic_mean_of_averages_not_mean_of_per_label_f1() -> None:
    result = metrics.evaluate(SKEWED_Y, SKEWED_SCORES, k=(1,), macro_f1_definition=CAML)
    # macro P = (1/4 + 1)/2 = 5/8, macro R = (1 + 1/4)/2 = 5/8 -> harmonic mean 5/8
    assert result["macro_precision"] == pytest.approx(5 / 8)
    assert result["macro_recall"] == pytest.approx(5 / 8)
    assert result["macro_f1"] == pytest.approx(5 / 8)
    # mean of per-label F1 = (2/5 + 2/5)/2 = 2/5 (both labels present)
    assert metrics.per_class_f1(SKEWED_Y, SKEWED_SCORES) == pytest.approx([0.4, 0.4])
    assert metrics.edin_macro_f1(SKEWED_Y, SKEWED_SCORES) == pytest.approx(0.4)


def test_edin_variants_have_their_own_keys_and_skip_absent_labels() -> None:
    result = metrics.evaluate_edin(HAND_Y, HAND_SCORES, threshold=0.5)
    assert set(result) == {"edin_micro_f1", "edin_macro_f1", "edin_threshold"}
    assert not set(result) & set(metrics.evaluate(HAND_Y, HAND_SCORES, macro_f1_definition=CAML))
    assert result["edin_micro_f1"] == pytest.approx(4 / 9)
    # Only labels 0 and 1 have positives: (1/2 + 1/2) / 2; CAML's macro-F1 above was 1/3.
    assert result["edin_macro_f1"] == pytest.approx(1 / 2)
    assert result["edin_threshold"] == 0.5


def test_precision_at_k_breaks_ties_by_lower_label_index() -> None:
    y = np.array([[0, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1]])
    scores = np.array([[0.5, 0.5, 0.5, 0.2], [0.5, 0.5, 0.5, 0.2], [0.9, 0.5, 0.5, 0.5]])
    # k=1: row 0 takes label 0 (miss), row 1 label 0 (hit), row 2 label 0 (miss) -> 1/3
    assert metrics.precision_at_k(y, scores, 1) == pytest.approx(1 / 3)
    # k=2: row 0 {0,1} 1 hit, row 1 {0,1} 1 hit, row 2 {0,1} 0 hits -> (1/2 + 1/2 + 0)/3
    assert metrics.precision_at_k(y, scores, 2) == pytest.approx(1 / 3)
    # k=3: row 0 {0,1,2} 1, row 1 {0,1,2} 1, row 2 {0,1,2} 1 -> 1/3 each
    assert metrics.precision_at_k(y, scores, 3) == pytest.approx(1 / 3)


def test_precision_at_k_beyond_label_count_divides_by_label_count() -> None:
    # CAML divides by len(top-k) = L when k > L: 1 gold of 2 labels -> 1/2, not 1/5.
    assert metrics.precision_at_k(np.array([[1, 0]]), np.array([[0.1, 0.2]]), 5) == pytest.approx(0.5)


def _brute_force_precision_at_k(y: np.ndarray, scores: np.ndarray, k: int) -> float:
    """Reference P@k: Python sort of each row by (-score, label index)."""
    values = []
    for labels_row, scores_row in zip(y, scores):
        ranked = sorted(range(len(scores_row)), key=lambda j: (-scores_row[j], j))[:k]
        values.append(sum(labels_row[j] for j in ranked) / len(ranked))
    return float(np.mean(values))


def _random_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random labels (one column all 0, one all 1) and scores rounded to force many ties."""
    rng = np.random.default_rng(seed)
    y = (rng.random((40, 9)) < 0.3).astype(int)
    y[:, 0] = 0
    y[:, 1] = 1
    dtype = np.float32 if seed % 2 else np.float64
    scores = np.round(rng.random((40, 9)), 1).astype(dtype)
    return y, scores


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_sklearn_where_definitions_coincide(seed: int) -> None:
    y, scores = _random_case(seed)
    predicted = scores > 0.5
    result = metrics.evaluate(y, scores, k=(1, 3, 5), macro_f1_definition=CAML)
    assert result["micro_f1"] == pytest.approx(f1_score(y, predicted, average="micro", zero_division=0))
    assert result["micro_precision"] == pytest.approx(precision_score(y, predicted, average="micro", zero_division=0))
    assert result["micro_recall"] == pytest.approx(recall_score(y, predicted, average="micro", zero_division=0))
    macro_p, macro_r, _, _ = precision_recall_fscore_support(y, predicted, average="macro", zero_division=0)
    assert result["macro_precision"] == pytest.approx(macro_p)
    assert result["macro_recall"] == pytest.approx(macro_r)
    assert metrics.per_class_f1(y, scores) == pytest.approx(f1_score(y, predicted, average=None, zero_division=0))
    assert result["micro_auc"] == pytest.approx(roc_auc_score(y.ravel(), scores.ravel()))

    auc, ap = metrics.per_label_auc_and_ap(y, scores)
    expected_auc = [roc_auc_score(y[:, j], scores[:, j]) for j in range(2, 9) if 0 < y[:, j].sum() < 40]
    expected_ap = [average_precision_score(y[:, j], scores[:, j]) for j in range(9) if y[:, j].any()]
    assert np.isnan(auc[0]) and np.isnan(auc[1]) and np.isnan(ap[0])
    assert auc[~np.isnan(auc)] == pytest.approx(expected_auc)
    assert ap[~np.isnan(ap)] == pytest.approx(expected_ap)
    assert result["macro_auc"] == pytest.approx(np.mean(expected_auc))
    assert result["macro_auc_skipped_labels"] == 9 - len(expected_auc)
    assert result["map"] == pytest.approx(np.mean(expected_ap))
    assert result["map_skipped_labels"] == 1
    for k in (1, 3, 5):
        assert result[f"p_at_{k}"] == pytest.approx(_brute_force_precision_at_k(y, scores, k))


def test_chunked_paths_give_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    y, scores = _random_case(7)
    expected = metrics.evaluate(y, scores, k=(2,), macro_f1_definition=CAML)
    expected_threshold = metrics.tune_threshold(y, scores)
    # Chunks of one row / one column exercise every chunk boundary.
    monkeypatch.setattr(metrics, "_CELLS_PER_CHUNK", 1)
    assert metrics.evaluate(y, scores, k=(2,), macro_f1_definition=CAML) == pytest.approx(expected)
    assert metrics.tune_threshold(y, scores) == expected_threshold


def test_undefined_summaries_are_nan_and_empty_ratios_are_zero() -> None:
    no_positives = metrics.evaluate(np.zeros((3, 2), dtype=int), np.full((3, 2), 0.2), k=(1,), macro_f1_definition=CAML)
    # Nothing true, nothing predicted: every 0/0 ratio is 0.
    assert no_positives["micro_f1"] == 0.0 and no_positives["macro_f1"] == 0.0
    assert math.isnan(no_positives["micro_auc"])
    assert math.isnan(no_positives["macro_auc"]) and no_positives["macro_auc_skipped_labels"] == 2
    assert math.isnan(no_positives["map"]) and no_positives["map_skipped_labels"] == 2
    assert no_positives["p_at_1"] == 0.0
    assert math.isnan(metrics.edin_macro_f1(np.zeros((3, 2), dtype=int), np.full((3, 2), 0.2)))

    all_positive = metrics.evaluate(np.ones((3, 2), dtype=int), np.full((3, 2), 0.7), k=(1,), macro_f1_definition=CAML)
    assert math.isnan(all_positive["micro_auc"])
    assert all_positive["map"] == 1.0  # precision is 1 at every recall level
    assert all_positive["micro_f1"] == 1.0


# ------------------------------------------------------------- the two macro-F1 definitions


def test_evaluate_returns_both_macro_f1_definitions_and_macro_f1_is_the_one_asked_for() -> None:
    # SKEWED: CAML = harmonic mean of macro-P 5/8 and macro-R 5/8 = 5/8; per-class = (2/5 + 2/5)/2.
    caml = metrics.evaluate(SKEWED_Y, SKEWED_SCORES, k=(1,), macro_f1_definition=CAML)
    per_class = metrics.evaluate(SKEWED_Y, SKEWED_SCORES, k=(1,), macro_f1_definition=PER_CLASS)
    for result in (caml, per_class):
        assert result["macro_f1_caml"] == pytest.approx(5 / 8)
        assert result["macro_f1_per_class"] == pytest.approx(2 / 5)
    assert caml["macro_f1"] == caml["macro_f1_caml"] and per_class["macro_f1"] == per_class["macro_f1_per_class"]
    assert {k: v for k, v in caml.items() if k != "macro_f1"} == {k: v for k, v in per_class.items() if k != "macro_f1"}
    assert metrics.macro_f1_caml(SKEWED_Y, SKEWED_SCORES) == pytest.approx(5 / 8)
    assert metrics.macro_f1_per_class(SKEWED_Y, SKEWED_SCORES) == pytest.approx(2 / 5)
    assert metrics.macro_f1_variants(SKEWED_Y, SKEWED_SCORES) == pytest.approx({"macro_f1_caml": 5 / 8, "macro_f1_per_class": 2 / 5})
    with pytest.raises(ValueError, match="unknown macro-F1 definition 'mean'"):
        metrics.evaluate(SKEWED_Y, SKEWED_SCORES, macro_f1_definition="mean")
    with pytest.raises(TypeError):
        metrics.evaluate(SKEWED_Y, SKEWED_SCORES)  # no silent default: every caller names its definition


def _naive_per_class_macro_f1(y: np.ndarray, scores: np.ndarray, threshold: float = 0.5) -> float:
    """The formula by loops: per class F1 = 2TP / (2TP + FP + FN), 0 when 2TP + FP + FN = 0, mean over all classes."""
    f1s = []
    for j in range(y.shape[1]):
        tp = fp = fn = 0
        for i in range(y.shape[0]):
            predicted, gold = scores[i][j] > threshold, y[i][j] == 1
            tp += predicted and gold
            fp += predicted and not gold
            fn += gold and not predicted
        f1s.append(2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0)
    return sum(f1s) / len(f1s)


def _with_an_empty_class(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random case whose column 0 is never true and never predicted (its F1 is 0/0) and whose
    column 2 is never true but predicted (F1 0, defined; Edin's mean would skip it)."""
    y, scores = _random_case(seed)
    scores[:, 0] = np.minimum(scores[:, 0], 0.5)
    y[:, 2] = 0
    scores[0, 2] = 0.9
    return y, scores


@pytest.mark.parametrize("seed", range(6))
def test_per_class_macro_f1_is_the_formula_and_sklearns_macro_with_zero_division_0(seed: int) -> None:
    y, scores = _with_an_empty_class(seed)
    predicted = scores > 0.5
    value = metrics.macro_f1_per_class(y, scores)
    assert value == pytest.approx(_naive_per_class_macro_f1(y, scores))
    # Agree: scikit-learn's macro average with the 0/0 class counted 0.
    assert value == pytest.approx(f1_score(y, predicted, average="macro", zero_division=0))
    # Differ, only through the 0/0 class: zero_division=1 counts it 1, zero_division=nan drops it
    # (the mean over the classes where F1 is defined). Both differ by exactly that one class.
    num_labels = y.shape[1]
    assert f1_score(y, predicted, average="macro", zero_division=1) == pytest.approx(value + 1 / num_labels)
    assert f1_score(y, predicted, average="macro", zero_division=np.nan) == pytest.approx(value * num_labels / (num_labels - 1))
    # MulSupCon's formula, 2TP / (2TP + FP + FN + 1e-6) averaged over its finite values: the +1e-6
    # makes the 0/0 class a finite 0, so its filter keeps it, and the value is ours up to the epsilon.
    tp = (predicted & (y == 1)).sum(axis=0)
    fp = (predicted & (y == 0)).sum(axis=0)
    fn = (~predicted & (y == 1)).sum(axis=0)
    with_epsilon = 2 * tp / (2 * tp + fp + fn + 1e-6)
    assert np.isfinite(with_epsilon).all()
    assert value == pytest.approx(with_epsilon.mean(), abs=1e-6)
    # CAML's definition is scikit-learn's macro P and R combined, not the mean of per-class F1.
    macro_p, macro_r, _, _ = precision_recall_fscore_support(y, predicted, average="macro", zero_division=0)
    assert metrics.macro_f1_caml(y, scores) == pytest.approx(2 * macro_p * macro_r / (macro_p + macro_r))


def test_per_class_macro_f1_keeps_labels_without_positives_unlike_edin() -> None:
    # HAND: per-class F1 [1/2, 1/2, 0]; label 2 has no positive but one false positive.
    assert metrics.macro_f1_per_class(HAND_Y, HAND_SCORES) == pytest.approx(1 / 3)
    assert metrics.edin_macro_f1(HAND_Y, HAND_SCORES) == pytest.approx(1 / 2)


def _config_dataset_settings() -> list[str]:
    """The built-in settings by their display names (mscl.report.names), the other list a new
    setting must join; the workflow takes the settings from mscl.layout.DATASET_FAMILIES."""
    from mscl.report.names import DATASET_NAMES

    return list(DATASET_NAMES)


def test_every_dataset_setting_has_a_family_and_each_family_a_definition() -> None:
    # Ties the mapping to the display names: a new dataset setting cannot be forgotten in either.
    settings = _config_dataset_settings()
    assert sorted(metrics.DATASET_FAMILIES) == sorted(settings)
    assert set(metrics.DATASET_FAMILIES.values()) == set(metrics.FAMILY_MACRO_F1)
    assert set(metrics.FAMILY_MACRO_F1.values()) == set(metrics.MACRO_F1_DEFINITIONS)
    expected = {
        "coco": PER_CLASS, "voc": PER_CLASS, "nuswide": PER_CLASS, "aapd": PER_CLASS,
        "mimic3_full": CAML, "mimic3_50": CAML, "mimic4_icd9_full": CAML, "mimic4_icd9_50": CAML,
        "mimic4_icd10_full": CAML, "mimic4_icd10_50": CAML,
        "yeast": PER_CLASS, "debtags": PER_CLASS, "fashion_mnist": PER_CLASS,
    }  # fmt: skip
    assert {name: metrics.macro_f1_definition(name) for name in settings} == expected
    assert {metrics.dataset_family(name) for name in ("coco", "voc", "nuswide", "fashion_mnist")} == {"image"}
    assert {metrics.dataset_family(name) for name in ("aapd", "debtags")} == {"text"}
    assert metrics.dataset_family("yeast") == "tabular"
    with pytest.raises(InputError, match="spec.json .field 'dataset'.: dataset 'toy' has no family"):
        metrics.macro_f1_definition("toy", "spec.json")


# Training counts: label 1 (50), label 2 (20), label 3 (20), label 0 (5), label 4 (5); total 100.
TRAIN_COUNTS = np.array([5, 50, 20, 20, 5])
# Per-class F1 at 0.5:  label 0: tp 1 -> 1;  label 1: fn 1 -> 0;  label 2: tp 2 -> 1;
#                       label 3: tp 1, fn 1 -> 2/3;  label 4: fp 1 -> 0
BUCKET_Y = np.array([[1, 1, 1, 1, 0], [0, 0, 1, 1, 0]])
BUCKET_SCORES = np.array([[0.9, 0.1, 0.9, 0.9, 0.1], [0.1, 0.1, 0.9, 0.1, 0.9]])


def test_bucket_macro_f1_on_hand_example() -> None:
    assert metrics.per_class_f1(BUCKET_Y, BUCKET_SCORES) == pytest.approx([1, 0, 1, 2 / 3, 0])
    # 60% of 100 = 60: cumulative 50, 70 -> head {1, 2} (label 2 before 3: tie by index)
    result = metrics.bucket_macro_f1(BUCKET_Y, BUCKET_SCORES, TRAIN_COUNTS, head_share=0.6, definition=PER_CLASS)
    assert result["head_labels"] == 2 and result["tail_labels"] == 3
    assert result["head"] == pytest.approx((0 + 1) / 2)
    assert result["tail"] == pytest.approx((2 / 3 + 1 + 0) / 3)


def test_bucket_macro_f1_uses_the_definition_it_is_given() -> None:
    # CAML per bucket: head {1, 2}: P (0 + 1)/2, R (0 + 1)/2 -> 1/2;
    # tail {3, 0, 4}: P (1 + 1 + 0)/3 = 2/3, R (1/2 + 1 + 0)/3 = 1/2 -> 2 (2/3)(1/2) / (2/3 + 1/2) = 4/7.
    result = metrics.bucket_macro_f1(BUCKET_Y, BUCKET_SCORES, TRAIN_COUNTS, head_share=0.6, definition=CAML)
    assert result["head"] == pytest.approx(1 / 2)
    assert result["tail"] == pytest.approx(4 / 7)
    with pytest.raises(ValueError, match="unknown macro-F1 definition"):
        metrics.bucket_macro_f1(BUCKET_Y, BUCKET_SCORES, TRAIN_COUNTS, definition="mean")


@pytest.mark.parametrize("definition", [CAML, PER_CLASS])
def test_a_bucket_of_every_class_is_the_tables_macro_f1(definition: str) -> None:
    # head_share 1.0 puts every class in the head: the bucket must then equal evaluate()'s macro_f1.
    y, scores = _with_an_empty_class(3)
    bucket = metrics.bucket_macro_f1(y, scores, np.arange(1, y.shape[1] + 1), head_share=1.0, definition=definition)
    assert bucket["tail_labels"] == 0 and math.isnan(bucket["tail"])
    assert bucket["head"] == pytest.approx(metrics.evaluate(y, scores, macro_f1_definition=definition)["macro_f1"])


@pytest.mark.parametrize(
    ("head_share", "head"),
    [(0.5, [1]), (0.6, [1, 2]), (0.7, [1, 2]), (0.71, [1, 2, 3]), (1.0, [1, 2, 3, 0, 4])],
)
def test_head_is_smallest_prefix_reaching_the_share(head_share: float, head: list[int]) -> None:
    # 0.7 * 100 evaluates to 70.00000000000001 in floating point, yet 70 must reach it.
    head_labels, tail_labels = metrics.head_tail_split(TRAIN_COUNTS, head_share)
    assert head_labels.tolist() == head
    assert sorted(head_labels.tolist() + tail_labels.tolist()) == [0, 1, 2, 3, 4]


def test_tune_threshold_picks_the_hand_computed_best() -> None:
    # Positives 0.8, 0.35; negatives 0.3, 0.6, 0.1, 0.2; 2 gold cells. micro-F1 = 2TP/(pred + 2):
    # t=0.1: 5 pred, TP 2 -> 4/7   t=0.2: 4, 2 -> 4/6   t=0.3: 3, 2 -> 4/5 (best)
    # t=0.4: 2, 1 -> 2/4           t=0.6: 1, 1 -> 2/3   t=0.8: 0, 0 -> 0
    y = np.array([[1, 0], [0, 1], [0, 0]])
    scores = np.array([[0.8, 0.3], [0.6, 0.35], [0.1, 0.2]])
    grid = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert metrics.tune_threshold(y, scores, grid) == 0.3
    # 0.6 and 0.7 tie at 2/3: the lower threshold wins, whatever the grid order.
    assert metrics.tune_threshold(y, scores, [0.7, 0.6]) == 0.6


def test_tune_threshold_default_grid_stays_inside_it() -> None:
    # Same ranking as above with scores off the grid: any t in [0.305, 0.355) keeps the 3
    # highest scores (micro-F1 4/5); the first value of 0.01, 0.02, ..., 0.99 there is 0.31.
    y = np.array([[1, 0], [0, 1], [0, 0]])
    scores = np.array([[0.8, 0.305], [0.6, 0.355], [0.1, 0.2]])
    assert metrics.tune_threshold(y, scores) == pytest.approx(0.31)


@pytest.mark.parametrize(
    ("y_true", "scores", "message"),
    [
        (np.zeros((2, 3)), np.zeros((2, 2)), "scores has shape"),
        (np.array([[0, 2]]), np.array([[0.1, 0.2]]), "y_true must be binary"),
        (np.array([[0, 0.5]]), np.array([[0.1, 0.2]]), "y_true must be binary"),
        (np.array([0, 1]), np.array([0.1, 0.2]), "y_true must be a 2-D"),
        (np.zeros((0, 3)), np.zeros((0, 3)), "y_true is empty"),
        (np.array([[0, 1]]), np.array([[0.1, np.nan]]), "scores contains NaN"),
        (np.array([[0, 1]]), np.array([[0.1, 3.0]]), "scores must be probabilities"),
    ],
)
def test_invalid_inputs_raise_value_error_naming_the_argument(
    y_true: np.ndarray, scores: np.ndarray, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        metrics.evaluate(y_true, scores, macro_f1_definition=CAML)


def test_invalid_k_counts_and_threshold_raise() -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        metrics.evaluate(HAND_Y, HAND_SCORES, k=(0,), macro_f1_definition=CAML)
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        metrics.evaluate(HAND_Y, HAND_SCORES, threshold=float("nan"), macro_f1_definition=CAML)
    with pytest.raises(ValueError, match="train_counts has shape"):
        metrics.bucket_macro_f1(HAND_Y, HAND_SCORES, [1, 2], definition=PER_CLASS)
    with pytest.raises(ValueError, match="head_share"):
        metrics.head_tail_split(TRAIN_COUNTS, 0.0)
