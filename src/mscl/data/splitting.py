"""Seeded split helpers shared by the dataset parsers.

Every helper sorts the ids before shuffling, so the result depends only on the set of ids
and the seed, never on the order the raw files listed them in.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from mscl.errors import InputError

# Fractions must add up to one; this much slack absorbs decimal input like 0.6 0.2 0.2.
FRACTION_SUM_TOLERANCE = 1e-6


def seeded_order(ids: Sequence[str], seed: int) -> list[str]:
    """Return the sorted unique ids in an order fixed by `seed` alone."""
    ordered = sorted(set(ids))
    permutation = np.random.default_rng(seed).permutation(len(ordered))
    return [ordered[i] for i in permutation]


def check_fractions(fractions: Sequence[float], option: str = "--fractions") -> tuple[float, ...]:
    """Validate split fractions (all positive, summing to one) and return them as a tuple."""
    values = tuple(float(f) for f in fractions)
    if not values or any(not math.isfinite(f) or f <= 0 for f in values):
        raise InputError(None, f"split fractions {list(values)} must all be positive", "give one positive fraction per split", field=option)
    if abs(sum(values) - 1.0) > FRACTION_SUM_TOLERANCE:
        raise InputError(None, f"split fractions {list(values)} sum to {sum(values):g}", "give fractions that add up to 1, e.g. 0.6 0.2 0.2", field=option)
    return values


def split_sizes(total: int, fractions: Sequence[float]) -> list[int]:
    """Sizes of consecutive parts: cumulative boundaries rounded half up, so sizes sum to `total`."""
    values = check_fractions(fractions)
    boundaries, cumulative = [], 0.0
    for fraction in values[:-1]:
        cumulative += fraction
        boundaries.append(min(total, math.floor(cumulative * total + 0.5)))
    boundaries.append(total)
    return [end - start for start, end in zip([0, *boundaries[:-1]], boundaries)]


def fractional_split(ids: Sequence[str], fractions: Sequence[float], seed: int) -> list[list[str]]:
    """Shuffle `ids` with `seed` and cut them into consecutive parts of the given fractions."""
    order = seeded_order(ids, seed)
    parts, start = [], 0
    for size in split_sizes(len(order), fractions):
        parts.append(order[start : start + size])
        start += size
    return parts


def require_every_split(splits: Mapping[str, pd.DataFrame], sources: Mapping[str, str | Path], fix: str) -> None:
    """An InputError naming the input that left a split empty (`sources`: split -> the image
    list, annotation file or folder its rows come from), instead of the output folder's
    "split is empty" once everything is written."""
    for name, frame in splits.items():
        if frame.empty:
            counts = ", ".join(f"{split} {len(rows)}" for split, rows in splits.items())
            raise InputError(sources[name], f"leaves split {name!r} empty ({counts} samples)", fix, field=name)


def halve(ids: Sequence[str], seed: int) -> tuple[list[str], list[str]]:
    """Seeded halves of `ids`; with an odd count the second half gets the extra id."""
    order = seeded_order(ids, seed)
    middle = len(order) // 2
    return order[:middle], order[middle:]


def halve_held_out(train: pd.DataFrame, held_out: pd.DataFrame, seed: int) -> dict[str, pd.DataFrame]:
    """The paper's policy for COCO and VOC: train as published, the published held-out set
    halved (seeded) into val and test; val and test rows sorted by id."""
    val_ids, test_ids = halve(list(held_out["id"]), seed)
    by_id = held_out.set_index("id", drop=False)
    return {
        "train": train,
        "val": by_id.loc[sorted(val_ids)].reset_index(drop=True),
        "test": by_id.loc[sorted(test_ids)].reset_index(drop=True),
    }
