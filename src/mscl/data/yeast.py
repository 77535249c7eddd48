"""MULAN yeast, as shipped inside the PyPI package `river` -> manifest (`python -m mscl prepare-yeast`).

Source: `river/datasets/yeast.csv.gz` of an installed `river` (found with
`importlib.util.find_spec`, never imported: the pipeline needs only the file), or --source.
It is a gzipped CSV with the header `Att1..Att103,Class1..Class14` and 2,417 rows: 103 numeric
features (gene expression and phylogenetic profile) and 14 binary labels (0/1), one gene a row.

Row order, established for river 0.26.1 (not assumed): the file is MULAN's yeast-test.arff
(917 rows) FOLLOWED BY yeast-train.arff (1,500 rows), not train first. Rows 0..916, written
under MULAN's ARFF header (`@relation MultiLabelData`, the 117 `@attribute` lines, `@data`),
reproduce yeast-test.arff byte for byte (md5 c85f3dfd6508efa5402762849e1f9dc4) and rows
917..2416 reproduce yeast-train.arff (md5 a1c8eeb7cbaf8ae140c5106ff84db332), the md5 sums
published for MULAN's files. The parser re-checks both sums on every run and records the
result as `mulan_md5_verified` in stats.json.

Split policies (--split):
- `mulan` (default): MULAN's standard split, yeast-train.arff rows -> train pool, yeast-test.arff
  rows -> test (917). A seeded --val-fraction of the train pool (default 0.2: 300 of 1,500
  genes, numpy default_rng seed, ids sorted first) becomes val; the remaining 1,200 are train.
  If the two md5 sums do not match (another river release reordered or edited the file) the
  parser stops with an error instead of guessing, unless --split seeded is given.
- `seeded`: the documented fallback: all rows pooled, shuffled with the seed and cut in MULAN's
  proportions (917/2,417 test), then val carved out of train as above.

Ids are `yeast-<row>` with the 0-based data row of the source CSV (so `yeast-0917` is the first
gene of yeast-train.arff). Features are stored as float32 in the manifest's `features` column;
labels keep MULAN's names `Class1`..`Class14` in that order. Genes without any label are kept
and counted (MULAN yeast has none).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from mscl import cli
from mscl.defaults import (
    YEAST_POLICIES as POLICIES,
    YEAST_VAL_FRACTION as DEFAULT_VAL_FRACTION,
)
from mscl.data.manifest import write_dataset
from mscl.data.splitting import fractional_split
from mscl.errors import InputError
from mscl.io import read_maybe_gzipped, sha256_file

FORMAT = "MULAN yeast as river's gzipped CSV (Att1..Att103, Class1..Class14)"
SOURCE_PACKAGE = "river"
SOURCE_IN_PACKAGE = Path("datasets") / "yeast.csv.gz"
FEATURE_COLUMNS = tuple(f"Att{i}" for i in range(1, 104))
LABEL_COLUMNS = tuple(f"Class{i}" for i in range(1, 15))
FIX_INSTALL = "pip install river (its wheel ships river/datasets/yeast.csv.gz), or pass --source FILE"
FIX_FILE = "reinstall river (pip install --force-reinstall river) or pass --source with MULAN yeast as a CSV"


@dataclass(frozen=True)
class MulanLayout:
    """Where MULAN's two files sit in the source CSV (test rows first), and their md5 sums.

    The md5 sums are those of the ARFF files rebuilt from the CSV rows under MULAN's header;
    None skips that check. Tests pass a layout for their small fixture.
    """

    test_rows: int = 917
    train_rows: int = 1500
    test_md5: str | None = "c85f3dfd6508efa5402762849e1f9dc4"
    train_md5: str | None = "a1c8eeb7cbaf8ae140c5106ff84db332"


YEAST_LAYOUT = MulanLayout()


def arff_header(features: Sequence[str] = FEATURE_COLUMNS, labels: Sequence[str] = LABEL_COLUMNS) -> str:
    """MULAN's ARFF header of yeast-train.arff / yeast-test.arff, ending with the `@data` line."""
    attributes = [f"@attribute {name} numeric\n" for name in features]
    attributes += [f"@attribute {name} {{0,1}}\n" for name in labels]
    return "@relation MultiLabelData\n\n" + "".join(attributes) + "\n@data\n"


def arff_md5(lines: Sequence[str]) -> str:
    """md5 of the ARFF file whose data section is `lines` (one row each, newline-terminated)."""
    digest = hashlib.md5(arff_header().encode("ascii"))
    for line in lines:
        digest.update(line.encode("ascii") + b"\n")
    return digest.hexdigest()


def find_source() -> Path:
    """river's yeast.csv.gz, located without importing river."""
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(None, "the Python package 'river' is not installed", FIX_INSTALL, field="--source")
    path = Path(list(spec.submodule_search_locations)[0]) / SOURCE_IN_PACKAGE
    if not path.is_file():
        raise InputError(path, "river is installed but has no yeast.csv.gz", FIX_INSTALL, field="--source")
    return path


def river_version() -> str | None:
    """Installed river version from its metadata (no import), or None."""
    try:
        return importlib.metadata.version(SOURCE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def read_lines(path: Path) -> list[str]:
    """Lines of the (optionally gzipped) CSV, without line endings or trailing blank lines."""
    raw = read_maybe_gzipped(path, "yeast CSV", FIX_INSTALL, FIX_FILE)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as error:
        raise InputError(path, f"not an ASCII CSV ({error})", FIX_FILE) from error
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def parse_rows(path: Path, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Check the header and every row; return features [N, 103] float64 and labels [N, 14] bool."""
    if not lines:
        raise InputError(path, "the file is empty", FIX_FILE)
    header = lines[0].split(",")
    expected = [*FEATURE_COLUMNS, *LABEL_COLUMNS]
    if header != expected:
        raise InputError(
            path,
            f"header has {len(header)} columns starting {header[:2]}, expected the {len(expected)} columns Att1..Att103,Class1..Class14",
            FIX_FILE,
            field="header",
        )
    n_features = len(FEATURE_COLUMNS)
    features = np.empty((len(lines) - 1, n_features), dtype=np.float64)
    labels = np.empty((len(lines) - 1, len(LABEL_COLUMNS)), dtype=bool)
    for row, line in enumerate(lines[1:]):
        values = line.split(",")
        where = f"line {row + 2}"
        if len(values) != len(expected):
            raise InputError(path, f"{where} has {len(values)} columns, the header {len(expected)}", FIX_FILE, field=where)
        try:
            numbers = [float(v) for v in values[:n_features]]
        except ValueError as error:
            raise InputError(path, f"{where} has a non-numeric feature ({error})", FIX_FILE, field=where) from error
        if not all(math.isfinite(x) for x in numbers):
            raise InputError(path, f"{where} has a NaN or infinite feature", FIX_FILE, field=where)
        flags = values[n_features:]
        if any(flag not in ("0", "1") for flag in flags):
            raise InputError(path, f"{where} has a label value other than 0 or 1", FIX_FILE, field=where)
        features[row] = numbers
        labels[row] = [flag == "1" for flag in flags]
    if features.shape[0] == 0:
        raise InputError(path, "the file has a header but no rows", FIX_FILE)
    return features, labels


def row_id(row: int) -> str:
    return f"yeast-{row:04d}"


def check_val_fraction(value: float) -> float:
    if not 0.0 < value < 1.0:
        raise InputError(None, f"--val-fraction {value} is not strictly between 0 and 1", "give e.g. 0.2", field="--val-fraction")
    return float(value)


def split_rows(
    n_rows: int, lines: Sequence[str], policy: str, seed: int, val_fraction: float, layout: MulanLayout, path: Path
) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """Row indices of train/val/test, and the provenance of the split."""
    ids = [row_id(i) for i in range(n_rows)]
    row_of = {sample_id: i for i, sample_id in enumerate(ids)}
    expected_rows = layout.test_rows + layout.train_rows
    provenance: dict[str, Any] = {}
    if policy == "mulan":
        if n_rows != expected_rows:
            raise InputError(
                path,
                f"has {n_rows} rows, but MULAN's split needs {layout.test_rows} (yeast-test.arff) + {layout.train_rows} (yeast-train.arff) = {expected_rows}",
                f"{FIX_FILE}, or pass --split seeded",
            )
        data = lines[1:]
        md5 = {"test": arff_md5(data[: layout.test_rows]), "train": arff_md5(data[layout.test_rows :])}
        wanted = {"test": layout.test_md5, "train": layout.train_md5}
        spans = {"test": f"0..{layout.test_rows - 1}", "train": f"{layout.test_rows}..{expected_rows - 1}"}
        for part in ("test", "train"):
            if wanted[part] is not None and md5[part] != wanted[part]:
                raise InputError(
                    path,
                    f"rows {spans[part]} do not rebuild MULAN's yeast-{part}.arff "
                    f"(md5 {md5[part]}, expected {wanted[part]}): the row order cannot be trusted",
                    "pip install river==0.26.1 (whose order was checked), or pass --split seeded",
                )
        provenance["mulan_md5"] = md5
        provenance["mulan_md5_verified"] = all(wanted[p] is not None for p in wanted)
        test_ids = ids[: layout.test_rows]
        pool = ids[layout.test_rows :]
        sentence = (
            f"MULAN's standard split: source rows {layout.test_rows}..{expected_rows - 1} (yeast-train.arff) form the train pool, "
            f"rows 0..{layout.test_rows - 1} (yeast-test.arff) form test; a fraction {val_fraction:g} of the train pool "
            f"(numpy default_rng seed {seed}, ids sorted first) is carved out as val"
        )
    else:
        test_fraction = layout.test_rows / expected_rows
        pool, test_ids = fractional_split(ids, (1.0 - test_fraction, test_fraction), seed)
        provenance["mulan_md5_verified"] = False
        sentence = (
            f"fallback: all rows shuffled (numpy default_rng seed {seed}, ids sorted first) and cut in MULAN's proportions, "
            f"test fraction {test_fraction:.4f}; a fraction {val_fraction:g} of the rest (same seed) is carved out as val"
        )
    train_ids, val_ids = fractional_split(pool, (1.0 - val_fraction, val_fraction), seed)
    members = {"train": train_ids, "val": val_ids, "test": test_ids}
    provenance["split_policy"] = sentence
    return {name: sorted(row_of[i] for i in part) for name, part in members.items()}, provenance


def prepare(
    out: Path,
    source: Path | None = None,
    seed: int = 0,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    policy: str = "mulan",
    layout: MulanLayout = YEAST_LAYOUT,
) -> dict[str, Any]:
    """Parse MULAN yeast and write the manifest to `out`; return its stats."""
    if policy not in POLICIES:
        raise InputError(None, f"unknown split policy {policy!r}", f"use one of {list(POLICIES)}", field="--split")
    val_fraction = check_val_fraction(val_fraction)
    path = Path(source) if source is not None else find_source()
    lines = read_lines(path)
    features, labels = parse_rows(path, lines)
    rows_of_split, provenance = split_rows(len(features), lines, policy, seed, val_fraction, layout, path)

    features32 = features.astype(np.float32)
    splits = {
        name: pd.DataFrame(
            {
                "id": [row_id(r) for r in rows],
                "labels": [[LABEL_COLUMNS[j] for j in np.flatnonzero(labels[r])] for r in rows],
                "features": [features32[r] for r in rows],
            }
        )
        for name, rows in rows_of_split.items()
    }
    info = {
        "dataset": "yeast",
        "format": FORMAT,
        "source": str(path.resolve()),
        "source_sha256": sha256_file(path),
        "source_package": {"name": SOURCE_PACKAGE, "version": river_version()} if source is None else None,
        "source_rows": int(len(features)),
        "seed": seed,
        "policy": policy,
        "val_fraction": val_fraction,
        "feature_names": list(FEATURE_COLUMNS),
        "dropped": {"rows": 0},
        "samples_without_labels_kept": int((labels.sum(axis=1) == 0).sum()),
        **provenance,
    }
    return write_dataset(out, splits, labels=list(LABEL_COLUMNS), info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-yeast --out DIR [--source FILE] [--split P] [--val-fraction F] [--seed N]`."""
    args = cli.parse_args("prepare-yeast", argv)
    stats = prepare(args.out, args.source, args.seed, args.val_fraction, args.split)
    print(
        f"prepare-yeast: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} "
        f"feature_dim={stats['feature_dim']} mulan_md5_verified={stats['mulan_md5_verified']}"
    )
    return 0
