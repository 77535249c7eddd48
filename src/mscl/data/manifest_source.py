"""A folder already in the manifest format -> the processed folder (`python -m mscl prepare-manifest`).

The input folder under --root holds what `mscl.data.manifest` describes: `{train,val,test}.parquet`
(columns id, labels as a list of label names, and one content column: text, path or features;
other columns are kept), `labels.txt` (the label vocabulary, one per line) and, optionally,
`stats.json`. Everything is checked before the folder is rewritten to --out through the manifest
writer (atomically: nothing is written unless all of it passes): every split present and not
empty, one content column for all splits, ids unique across splits, every label of every sample
listed in labels.txt and every label of labels.txt carried by some sample, a text not empty,
feature vectors finite and of one length, and every image present (opened with PIL unless
--no-verify-images). stats.json is recomputed from the data (counts and label statistics of
hand-made folders are often stale); of an input stats.json only `root` (the folder image paths
are relative to: absolute, or relative to --root; default --root itself) and `family` are used,
and its other keys are kept under `source_info`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mscl import cli
from mscl.data.csv_source import SHOWN_ID
from mscl.data.images import require_images
from mscl.data.manifest import CONTENT_COLUMNS, MODALITY, SPLITS, ManifestWriter, family_of, read_labels
from mscl.errors import InputError, OptionNames, shown
from mscl.io import sha256_file
from mscl.layout import DATASET_FAMILY_NAMES

FORMAT = "a folder in the manifest format (prepare-manifest)"
# stats.json keys the manifest writer computes from the data: an input's own are replaced.
COMPUTED_KEYS = ("modality", "feature_dim", "num_labels", "counts", "total", "avg_labels", "splits")
BATCH_ROWS = 8192  # parquet rows checked and copied at a time
FIX_FORMAT = "write the folder as docs/preprocessing.md describes (mscl.data.manifest)"


def read_input_stats(root: Path) -> dict[str, Any]:
    """The input's stats.json as an object ({} when there is none)."""
    path = root / "stats.json"
    if not path.exists():
        return {}
    try:
        stats = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(path, f"not valid JSON ({error})", "fix the JSON, or remove stats.json (it is optional and recomputed)") from None
    if not isinstance(stats, dict):
        raise InputError(path, "top level is not a JSON object", "fix it, or remove stats.json (it is optional and recomputed)")
    return stats


def image_root(root: Path, stats: dict[str, Any]) -> Path:
    """The folder image paths are relative to: stats.json's `root` (absolute, or relative to
    `root`), else `root`."""
    given = stats.get("root")
    if given is None:
        return root.resolve()
    if not isinstance(given, str) or not given:
        raise InputError(root / "stats.json", f"`root` is {given!r}", "give the folder image paths are relative to, as a string", field="root")
    folder = Path(given).expanduser()
    folder = (folder if folder.is_absolute() else root / folder).resolve()
    if not folder.is_dir():
        raise InputError(root / "stats.json", f"`root` {str(folder)!r} is not a folder", "give the folder image paths are relative to", field="root")
    return folder


def is_text_type(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def is_list_type(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind)


def content_column(path: Path, schema: pa.Schema) -> str:
    """The split's content column, once its id, labels and content columns have the right types."""
    names = schema.names
    content = [name for name in CONTENT_COLUMNS if name in names]
    if "id" not in names or "labels" not in names or len(content) != 1:
        raise InputError(path, f"has columns {names}", "a split needs 'id', 'labels' and exactly one of 'text', 'path' or 'features'", field="columns")
    kinds = {name: schema.field(name).type for name in ("id", "labels", content[0])}
    expected = {
        "id": ("a string or integer", is_text_type(kinds["id"]) or pa.types.is_integer(kinds["id"])),
        # list<null>: what pandas writes for a column of empty lists only
        "labels": ("a list of label names (list<string>; [] for no label)", is_list_type(kinds["labels"]) and (is_text_type(kinds["labels"].value_type) or pa.types.is_null(kinds["labels"].value_type))),
        "text": ("a string", content[0] != "text" or is_text_type(kinds["text"])),
        "path": ("a string (the image path)", content[0] != "path" or is_text_type(kinds["path"])),
        "features": ("a list of numbers", content[0] != "features" or (is_list_type(kinds["features"]) and (pa.types.is_floating(kinds["features"].value_type) or pa.types.is_integer(kinds["features"].value_type)))),
    }  # fmt: skip
    for column, (wanted, fits) in expected.items():
        if not fits:
            raise InputError(path, f"column {column!r} is {kinds[column]}, not {wanted}", FIX_FORMAT, field=column)
    return content[0]


class ManifestCheck:
    """The checks that span splits: ids unique across splits, labels within labels.txt and every
    listed label carried, one feature length."""

    def __init__(self, root: Path, vocabulary: Sequence[str], images: Path, verify_images: bool, names: OptionNames = OptionNames()):
        self.root, self.images, self.verify_images, self.names = root, images, verify_images, names
        self.vocabulary = set(vocabulary)
        self.carried: set[str] = set()
        self.place_of_id: dict[str, str] = {}
        self.feature_dim: int | None = None

    def rows(self, path: Path, batch: pa.RecordBatch, content: str, first_row: int) -> pd.DataFrame:
        """`batch` (rows first_row, first_row + 1, ... of split file `path`) checked, as a frame
        with ids as strings and each sample's labels deduplicated in their order. Values are
        checked as Python objects (an integer id column with a null would be floats in pandas).
        The batch's images are decoded together, in parallel (mscl.data.images)."""
        ids, labels, images = [], [], []
        columns = (batch.column(name).to_pylist() for name in ("id", "labels", content))
        for offset, (sample_id, sample_labels, value) in enumerate(zip(*columns)):
            where = f"row {first_row + offset} (pandas index {first_row + offset - 1})"
            ids.append(self.sample_id(path, where, sample_id))
            labels.append(self.sample_labels(path, where, sample_labels))
            self.content(path, where, content, value)
            if content == "path":
                images.append((where, value))
        require_images(self.images, images, self.verify_images, path, "path", self.names)
        return batch.to_pandas().assign(id=ids, labels=labels)

    def sample_id(self, path: Path, where: str, value: Any) -> str:
        if value is None:
            raise InputError(path, f"{where}: the id is null", "give every sample an id", field="id")
        sample_id = str(value)
        place = f"{path.name} {where}"
        if sample_id in self.place_of_id:
            raise InputError(path, f"{where} repeats id {shown(sample_id, SHOWN_ID)} of {self.place_of_id[sample_id]}", "give every sample its own id, in one split only", field="id")
        self.place_of_id[sample_id] = place
        return sample_id

    def sample_labels(self, path: Path, where: str, value: Any) -> list[str]:
        if value is None:
            raise InputError(path, f"{where}: the labels list is null", "write [] for a sample without labels", field="labels")
        labels = list(dict.fromkeys(value))
        unlisted = [label for label in labels if label not in self.vocabulary]
        if unlisted:
            label = "null" if unlisted[0] is None else repr(unlisted[0][:SHOWN_ID])  # label names are quoted (they may have spaces)
            raise InputError(path, f"{where}: label {label} is not in labels.txt", f"add it to {self.root / 'labels.txt'}, or correct the label", field="labels")
        self.carried.update(labels)
        return labels

    def content(self, path: Path, where: str, column: str, value: Any) -> None:
        if column == "features":
            vector = np.asarray(value if value is not None else [], dtype=np.float64)
            if self.feature_dim is None:
                self.feature_dim = len(vector)
            if len(vector) == 0 or len(vector) != self.feature_dim:
                raise InputError(path, f"{where} has {len(vector)} features where the first row has {self.feature_dim}", "give every sample the same, non-zero number of features", field="features")
            if not np.isfinite(vector).all():
                raise InputError(path, f"{where} has a NaN or infinite feature", "impute or drop such samples first", field="features")
            return
        if value is None or not value.strip():  # never quote a text: it may be a clinical note
            raise InputError(path, f"{where}: the {column} is empty", "fill it, or drop the sample", field=column)


def open_split(root: Path, split: str) -> pq.ParquetFile:
    path = root / f"{split}.parquet"
    if not path.is_file():
        raise InputError(path, f"split file not found (a manifest has {', '.join(f'{name}.parquet' for name in SPLITS)})", FIX_FORMAT, field=split)
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        first_line = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        raise InputError(path, f"not a readable parquet file ({first_line})", "write it again with pandas.DataFrame.to_parquet or pyarrow", field=split) from None


def prepare(
    root: Path,
    out: Path,
    family: str | None = None,
    dataset: str | None = None,
    verify_images: bool = True,
    names: OptionNames = OptionNames(),
) -> dict[str, Any]:
    """Check the manifest folder `root` and write it to `out` with a recomputed stats.json; return the stats."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "manifest folder not found", f"set {names('--root')} to a folder with train/val/test.parquet and labels.txt")
    if Path(out).resolve() == root.resolve():
        raise InputError(out, "is the input folder itself", "pass an --out other than --root", field="--out")
    vocabulary = read_labels(root, "write the label vocabulary into labels.txt, one label per line, each once")
    input_stats = read_input_stats(root)
    files = {split: open_split(root, split) for split in SPLITS}
    for split, handle in files.items():
        if handle.metadata.num_rows == 0:
            raise InputError(root / f"{split}.parquet", f"split {split!r} is empty", "give every split samples", field=split)
    contents = {split: content_column(root / f"{split}.parquet", handle.schema_arrow) for split, handle in files.items()}
    content = contents["train"]
    for split, other in contents.items():
        if other != content:
            raise InputError(root / f"{split}.parquet", f"its content column is {other!r} where train.parquet's is {content!r}", "use one content column for all splits", field=other)
    images = image_root(root, input_stats) if content == "path" else root.resolve()
    check = ManifestCheck(root, vocabulary, images, verify_images, names)
    if family is None and "family" in input_stats:
        family = input_stats["family"]
        if family not in DATASET_FAMILY_NAMES:
            raise InputError(root / "stats.json", f"family {family!r} is not a dataset family", f"use one of {list(DATASET_FAMILY_NAMES)}, or set {names('--family')}", field="family")
    family = family_of(MODALITY[content], family)

    sources = [root / f"{split}.parquet" for split in SPLITS] + [root / "labels.txt"] + ([root / "stats.json"] if input_stats else [])
    info = {
        "dataset": dataset or Path(out).name,
        "format": FORMAT,
        "root": str(images),
        "source_folder": str(root.resolve()),
        "sources": {path.name: sha256_file(path) for path in sources},
        "family": family,
        "source_info": {key: value for key, value in input_stats.items() if key not in COMPUTED_KEYS},
    }
    with ManifestWriter(out, labels=vocabulary, info=info) as writer:
        for split, handle in files.items():
            path = root / f"{split}.parquet"
            labelled, first_row = False, 1
            for batch in handle.iter_batches(batch_size=BATCH_ROWS):
                frame = check.rows(path, batch, content, first_row)
                labelled = labelled or bool(frame["labels"].map(len).any())
                writer.add(split, frame)
                first_row += len(frame)
            if not labelled:
                raise InputError(path, f"no sample of split {split!r} has a label", "label some of its samples", field="labels")
        never = [label for label in vocabulary if label not in check.carried]
        if never:
            raise InputError(
                root / "labels.txt", f"label {never[0][:SHOWN_ID]!r} ({len(never)} such in all) is carried by no sample of any split",
                "remove it from labels.txt: a label no sample has is an always-zero column that lowers macro-F1", field="labels",
            )  # fmt: skip
        return writer.close()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-manifest --root DIR --out DIR [--family F] [--dataset NAME] [--no-verify-images]`."""
    args = cli.parse_args("prepare-manifest", argv)
    stats = prepare(args.root, args.out, args.family, args.dataset, args.verify_images, OptionNames.of_source(args.dataset or Path(args.out).name, args.from_config))
    print(f"prepare-manifest: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} modality={stats['modality']} family={stats['family']}")
    return 0
