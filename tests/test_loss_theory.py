"""The paper's theory (Theorems 1-5, the case analysis) checked on the library's own weights.

Weights come from `mscl.losses.pair_weights`, the matrix path the losses use, so these tests
exercise the real code: exhaustively over every pair of subsets of a 5-label universe, and
with hypothesis over larger universes.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mscl.losses import dissimilarity_factor, pair_weights, similarity_factor

UNIVERSE = 5
SUBSETS = [frozenset(c) for r in range(UNIVERSE + 1) for c in itertools.combinations(range(UNIVERSE), r)]


def multi_hot(sets, width):
    labels = torch.zeros(len(sets), width, dtype=torch.float64)
    for row, members in enumerate(sets):
        labels[row, list(members)] = 1
    return labels


def relation(s: frozenset, t: frozenset) -> int:
    """Paper Eq. 7-11: R1 disjoint, R2 equal, R3 overlap/neither subset, R4 S ⊋ T, R5 S ⊊ T."""
    if not s & t:
        return 1
    if s == t:
        return 2
    if s > t:
        return 4
    if s < t:
        return 5
    return 3


@pytest.fixture(scope="module")
def exhaustive():
    """Sim-Dissim weight of every (anchor S, other T) pair over the 5-label universe."""
    weights = pair_weights("simdissim", multi_hot(SUBSETS, UNIVERSE))
    return {(s, t): weights[i, j].item() for (i, s), (j, t) in itertools.product(enumerate(SUBSETS), repeat=2) if s}


def test_theorems_1_2_3_exhaustively(exhaustive):
    seen = set()
    for (s, t), w in exhaustive.items():
        r = relation(s, t)
        seen.add(r)
        assert 0.0 <= w <= 1.0
        if r == 1:
            assert w == 0.0  # Theorem 1
        elif r == 2:
            assert w == 1.0  # Theorem 2
        else:
            assert 0.0 < w < 1.0  # Theorem 3
    assert seen == {1, 2, 3, 4, 5}


def test_theorem_4_exhaustively(exhaustive):
    checked = 0
    for s in SUBSETS:
        for t3, t4 in itertools.product(SUBSETS, repeat=2):
            if s and relation(s, t3) == 3 and relation(s, t4) == 4 and len(t3) == len(t4):
                assert exhaustive[(s, t4)] > exhaustive[(s, t3)]
                checked += 1
    assert checked > 50


def test_theorem_5_exhaustively(exhaustive):
    checked = 0
    for s in SUBSETS:
        for t3, t5 in itertools.product(SUBSETS, repeat=2):
            if s and relation(s, t3) == 3 and relation(s, t5) == 5 and len(t5 - s) <= len(t3 - s):
                assert exhaustive[(s, t5)] > exhaustive[(s, t3)]
                checked += 1
    assert checked > 20


def test_case_analysis_values():
    """Paper §2.5: S = {a, b, c} and one example per relation."""
    s = {0, 1, 2}
    others = [{3, 4, 5}, {0, 1, 2}, {0, 3, 4}, {0, 1}, {0, 1, 2, 3, 4}]  # R1..R5
    intersection = torch.tensor([float(len(s & t)) for t in others], dtype=torch.float64)
    sizes = torch.tensor([float(len(t)) for t in others], dtype=torch.float64)
    k_s = similarity_factor(intersection, torch.tensor(3.0, dtype=torch.float64))
    k_d = dissimilarity_factor(intersection, sizes)
    assert [Fraction(x).limit_denominator(100) for x in k_s.tolist()] == [0, 1, Fraction(1, 3), Fraction(2, 3), 1]
    assert [Fraction(x).limit_denominator(100) for x in k_d.tolist()] == [Fraction(1, 4), 1, Fraction(1, 3), 1, Fraction(1, 3)]
    weights = pair_weights("simdissim", multi_hot([s, *others], 6))[0, 1:]
    assert [Fraction(x).limit_denominator(100) for x in weights.tolist()] == [0, 1, Fraction(1, 9), Fraction(2, 3), Fraction(1, 3)]


labels_12 = st.frozensets(st.integers(0, 11), max_size=12)


@settings(max_examples=300, deadline=None)
@given(s=labels_12.filter(bool), t=labels_12)
def test_weight_bounds_and_relations_on_larger_universes(s, t):
    w = pair_weights("simdissim", multi_hot([s, t], 12))[0, 1].item()
    expected = len(s & t) / len(s) / (1 + len(t - s))
    assert w == pytest.approx(expected, abs=1e-15)
    r = relation(s, t)
    assert (w == 0.0) == (r == 1)
    assert (w == 1.0) == (r == 2)


@settings(max_examples=200, deadline=None)
@given(s=labels_12.filter(lambda x: len(x) >= 2), data=st.data())
def test_theorems_4_and_5_on_larger_universes(s, data):
    outside = sorted(set(range(12)) - s)
    inside = sorted(s)
    # R4: a proper non-empty subset of S.
    t4 = frozenset(data.draw(st.lists(st.sampled_from(inside), min_size=1, max_size=len(s) - 1, unique=True)))
    # R3: part of S (not all of it) plus at least one label outside S, with |T3| = |T4| (Theorem 4).
    if len(t4) >= 2 and outside:
        k_in = data.draw(st.integers(1, min(len(t4) - 1, len(s) - 1)))
        t3 = frozenset(data.draw(st.permutations(inside))[:k_in]) | frozenset(
            data.draw(st.permutations(outside))[: len(t4) - k_in]
        )
        if relation(s, t3) == 3 and len(t3) == len(t4):
            w = pair_weights("simdissim", multi_hot([s, t3, t4], 12))[0]
            assert w[2] > w[1]
    # R5 vs R3 with |T5 \ S| <= |T3 \ S| (Theorem 5).
    if outside:
        extra3 = data.draw(st.integers(1, len(outside)))
        t3 = frozenset(inside[:1]) | frozenset(outside[:extra3])
        t5 = s | frozenset(outside[: data.draw(st.integers(1, extra3))])
        w = pair_weights("simdissim", multi_hot([s, t3, t5], 12))[0]
        assert relation(s, t3) == 3 and relation(s, t5) == 5
        assert w[2] > w[1]


def test_mulsupcon_weight_counts_each_shared_label_over_its_positive_count():
    """W_ip = sum_{c in S ∩ T} 1/n_c(i) (paper Eq. 5): checked by hand on 3 samples x 2 views.

    Sample labels: A = {0, 1}, B = {0}, C = {1, 2}. n_c(i) for an anchor with label c is
    2 * count_c - 1: label 0 -> 3, label 1 -> 3, label 2 -> 1.
    """
    weights = pair_weights("mulsupcon", multi_hot([{0, 1}, {0}, {1, 2}], 3), views=2)
    third = 1 / 3
    expected = torch.tensor(
        [
            [third + third, third, third],  # A-A: labels 0 and 1; A-B: 0; A-C: 1
            [third, third, 0.0],
            [third, 0.0, third + 1.0],  # C-C: label 1 (1/3) and label 2 (1/1)
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(weights, expected)
