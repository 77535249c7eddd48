"""The one manifest format every dataset is turned into.

A prepared dataset is a folder:

    {split}.parquet   one row per sample, split in SPLITS; columns
                      id (str), labels (list[str], label names) and exactly one content
                      column: `text` (str), `path` (str, image path relative to stats' root)
                      or `features` (list[float32], one fixed length for every row of every
                      split: a tabular dataset; stats.json records it as `feature_dim`)
    labels.txt        the ordered label vocabulary, one label per line
    stats.json        counts per split, label count, average labels per sample, label
                      frequencies, plus the provenance given by the parser (split policy,
                      seed, dropped-and-counted rows, source files). Written last: its
                      presence means the folder is complete.

Two ways to write one: `write_dataset` for splits that fit in memory, and `ManifestWriter`
for datasets streamed chunk by chunk (MIMIC notes). `write_dataset` is a thin wrapper over
`ManifestWriter`, so both produce byte-for-byte the same kind of folder and stats.json.
Either way the folder appears only when complete: files are written into a hidden staging
folder beside it and moved into place at the end; a failure leaves no output behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mscl.errors import InputError
from mscl.io import naming_a_full_disk, sha256_file, staging_folder, write_json, write_text
from mscl.layout import DATASET_FAMILY_NAMES, MODALITY_FAMILY
from mscl.provenance import provenance as software_provenance

SPLITS = ("train", "val", "test")
CONTENT_COLUMNS = ("text", "path", "features")
# stats.json's `modality` for each content column.
MODALITY = {"text": "text", "path": "image", "features": "tabular"}


def _check_columns(name: str, frame: pd.DataFrame, where: str) -> str:
    """Return the split's content column; raise unless it has id, labels and one content column."""
    content = [c for c in CONTENT_COLUMNS if c in frame.columns]
    if "id" not in frame.columns or "labels" not in frame.columns or len(content) != 1:
        raise InputError(
            where,
            f"split {name!r} has columns {list(frame.columns)}",
            "a split needs 'id', 'labels' and exactly one of 'text', 'path' or 'features'",
            field=name,
        )
    return content[0]


def _empty_split_error(name: str, where: str) -> InputError:
    return InputError(where, f"split {name!r} is empty", "check the raw files and the split settings", field=name)


def _check_vocabulary(vocabulary: Sequence[str], where: str) -> None:
    if len(set(vocabulary)) != len(vocabulary):
        raise InputError(where, "the label vocabulary repeats a label", "deduplicate the label list", field="labels")


def _sorted_frequency(frequency: Counter) -> dict[str, int]:
    """Label -> count, most frequent first, ties by label name (stable across runs)."""
    return dict(sorted(frequency.items(), key=lambda kv: (-kv[1], kv[0])))


def label_statistics(frame: pd.DataFrame) -> dict[str, Any]:
    """Sample count, mean labels per sample, unlabelled samples and label frequencies of a frame."""
    tally = _SplitTally()
    tally.add(frame["labels"])
    return tally.statistics()


@dataclass
class _SplitTally:
    """Label statistics of one split, accumulated chunk by chunk."""

    samples: int = 0
    label_occurrences: int = 0
    samples_without_labels: int = 0
    frequency: Counter = field(default_factory=Counter)

    def add(self, labels: pd.Series) -> None:
        sizes = labels.map(len)
        self.samples += int(len(labels))
        self.label_occurrences += int(sizes.sum())
        self.samples_without_labels += int((sizes == 0).sum())
        self.frequency.update(label for sample in labels for label in sample)

    def statistics(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "avg_labels": self.label_occurrences / self.samples if self.samples else 0.0,
            "samples_without_labels": self.samples_without_labels,
            "label_frequency": _sorted_frequency(self.frequency),
        }


def _parquet_schema(frame: pd.DataFrame, content: str) -> pa.Schema:
    """Schema of a split file: id/content as strings, labels as list<string>, other columns inferred."""
    inferred = pa.Schema.from_pandas(frame, preserve_index=False)
    content_type = pa.list_(pa.float32()) if content == "features" else pa.string()
    fixed = {"id": pa.string(), "labels": pa.list_(pa.string()), content: content_type}
    fields = [pa.field(f.name, fixed.get(f.name, f.type)) for f in inferred]
    return pa.schema(fields, metadata=inferred.metadata)


class ManifestWriter:
    """Write a prepared dataset incrementally: `add(split, frame)` any number of times, then `close()`.

    Rows are appended to `{split}.parquet` as they come (one row group per `add`), so memory
    holds one chunk plus the label tallies and the set of ids seen (to reject duplicates).
    `labels` fixes the vocabulary order; by default it is the sorted union of labels seen.
    Use as a context manager: leaving the block without `close()` (e.g. on an error) removes
    everything written so far and leaves `out_dir` untouched.
    """

    def __init__(
        self,
        out_dir: str | Path,
        labels: Sequence[str] | None = None,
        info: Mapping[str, Any] | None = None,
    ):
        self.out_dir = Path(out_dir)
        self._where = str(self.out_dir)
        self._labels = None if labels is None else [str(label) for label in labels]
        if self._labels is not None:
            _check_vocabulary(self._labels, self._where)
        self._info = dict(info or {})
        self._content: str | None = None
        self._feature_dim: int | None = None  # length of every `features` row, once one is seen
        self._schemas: dict[str, pa.Schema] = {}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._split_of_id: dict[str, str] = {}
        self._tallies = {name: _SplitTally() for name in SPLITS}
        self._staging: Path | None = staging_folder(self.out_dir)

    def __enter__(self) -> "ManifestWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.abort()

    def add(self, split: str, frame: pd.DataFrame) -> None:
        """Validate a chunk of `split` and append it to the split's parquet file."""
        if self._staging is None:
            raise RuntimeError("ManifestWriter is already closed")
        if split not in SPLITS:
            raise InputError(self._where, f"unknown split {split!r}", f"use one of {list(SPLITS)}", field=split)
        content = _check_columns(split, frame, self._where)
        if self._content is None:
            self._content = content
        elif content != self._content:
            raise InputError(
                self._where,
                f"splits mix content columns {self._content!r} and {content!r}",
                "use one content column for all splits",
            )
        if frame.empty:
            return
        with naming_a_full_disk(self.out_dir):
            self._add_rows(split, frame, content)

    def _add_rows(self, split: str, frame: pd.DataFrame, content: str) -> None:
        frame = frame.reset_index(drop=True)
        frame = frame.assign(id=frame["id"].astype(str), labels=frame["labels"].map(lambda ls: [str(x) for x in ls]))
        if content == "features":
            self._check_features(split, frame["features"])
        self._register_ids(split, frame["id"])
        self._tallies[split].add(frame["labels"])
        self._write_rows(split, frame, content)

    def _check_features(self, split: str, features: pd.Series) -> None:
        """Every feature vector must be finite and as long as every other one, across splits."""
        lengths = set(features.map(len))
        if self._feature_dim is not None:
            lengths.add(self._feature_dim)
        if len(lengths) != 1 or 0 in lengths:
            raise InputError(
                self._where,
                f"split {split!r} has feature vectors of lengths {sorted(lengths)}",
                "give every sample the same, non-zero number of features",
                field="features",
            )
        self._feature_dim = lengths.pop()
        if not all(np.isfinite(np.asarray(row, dtype=np.float64)).all() for row in features):
            raise InputError(self._where, f"split {split!r} has a NaN or infinite feature", "impute or drop such samples first", field="features")

    def _register_ids(self, split: str, ids: pd.Series) -> None:
        """Reject an id repeated within a split or shared by two splits."""
        for sample_id in ids:
            previous = self._split_of_id.get(sample_id)
            if previous == split:
                raise InputError(
                    self._where, f"split {split!r} repeats id {sample_id!r}", "deduplicate the samples", field="id"
                )
            if previous is not None:
                raise InputError(self._where, f"id {sample_id!r} is in two splits", "splits must be disjoint", field="id")
            self._split_of_id[sample_id] = split

    def _write_rows(self, split: str, frame: pd.DataFrame, content: str) -> None:
        if split not in self._writers:
            self._schemas[split] = _parquet_schema(frame, content)
            path = self._staging / f"{split}.parquet"
            self._writers[split] = pq.ParquetWriter(path, self._schemas[split])
        schema = self._schemas[split]
        if list(frame.columns) != schema.names:
            raise InputError(
                self._where,
                f"split {split!r} changed columns from {schema.names} to {list(frame.columns)}",
                "give every chunk of a split the same columns in the same order",
                field=split,
            )
        table = pa.Table.from_pandas(frame, preserve_index=False)
        self._writers[split].write_table(table.cast(schema))

    def close(self, info: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Finish the files, publish the folder and return its stats.

        `info` (optional) is merged over the constructor's provenance, for counts that are
        only known once everything has been added.
        """
        if self._staging is None:
            raise RuntimeError("ManifestWriter is already closed")
        for name in SPLITS:
            if self._tallies[name].samples == 0:
                raise _empty_split_error(name, self._where)
        seen = sorted(set().union(*(self._tallies[name].frequency for name in SPLITS)))
        vocabulary = self._labels if self._labels is not None else seen
        stats = self._statistics(vocabulary, {**self._info, **dict(info or {})})
        with naming_a_full_disk(self.out_dir):
            for writer in self._writers.values():
                writer.close()
            self._writers = {}
            write_text(self._staging / "labels.txt", "".join(f"{label}\n" for label in vocabulary))
            # What prepared it (mscl.provenance): `python -m mscl stale` finds the runs on data
            # that today's preparation code would prepare differently.
            write_json(self._staging / "versions.json", software_provenance())
            write_json(self._staging / "stats.json", stats)
        self._publish()
        return stats

    def _statistics(self, vocabulary: Sequence[str], info: Mapping[str, Any]) -> dict[str, Any]:
        vocab_set = set(vocabulary)
        per_split = {}
        for name in SPLITS:
            tally = self._tallies[name]
            per_split[name] = {
                **tally.statistics(),
                "out_of_vocabulary_occurrences": sum(n for label, n in tally.frequency.items() if label not in vocab_set),
            }
        total = sum(self._tallies[name].samples for name in SPLITS)
        occurrences = sum(self._tallies[name].label_occurrences for name in SPLITS)
        return {
            **info,
            "modality": MODALITY.get(self._content, "image"),
            **({"feature_dim": self._feature_dim} if self._content == "features" else {}),
            "num_labels": len(vocabulary),
            "counts": {name: per_split[name]["samples"] for name in SPLITS},
            "total": total,
            "avg_labels": occurrences / total,
            "splits": per_split,
        }

    def _publish(self) -> None:
        """Move the staged files onto `out_dir`; stats.json last, since it marks completeness."""
        staging, self._staging = self._staging, None
        if not self.out_dir.exists():
            os.replace(staging, self.out_dir)
            return
        (self.out_dir / "stats.json").unlink(missing_ok=True)
        names = sorted(p.name for p in staging.iterdir() if p.name != "stats.json") + ["stats.json"]
        for name in names:
            os.replace(staging / name, self.out_dir / name)
        staging.rmdir()

    def abort(self) -> None:
        """Discard everything written so far (no-op after `close`)."""
        for writer in self._writers.values():
            with contextlib.suppress(OSError):  # on a full disk the final flush fails too; the file goes anyway
                writer.close()
        self._writers = {}
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None


def provenance(dataset: str, format: str, root: Path, seed: int, sources: Sequence[Path], **details: Any) -> dict[str, Any]:
    """What a parser records about its input in stats.json (`write_dataset`'s `info`): the
    dataset, the raw format, the root folder read, the seed of the split, the sha256 of every
    source file (named by its path under `root`), then the parser's own `details`."""
    return {
        "dataset": dataset,
        "format": format,
        "root": str(root.resolve()),
        "seed": seed,
        "sources": {path.relative_to(root).as_posix(): sha256_file(path) for path in sources},
        **details,
    }


def family_of(modality: str, family: str | None, option: str = "--family") -> str:
    """The dataset family a prepared folder's stats.json records as `family` (what decides its
    macro-F1 definition, mscl.metrics): `family` when given, else the family of its modality."""
    if family is None:
        return MODALITY_FAMILY[modality]
    if family not in DATASET_FAMILY_NAMES:
        raise InputError(None, f"unknown dataset family {family!r}", f"use one of {list(DATASET_FAMILY_NAMES)}", field=option)
    return family


def write_dataset(
    out_dir: str | Path,
    splits: Mapping[str, pd.DataFrame],
    labels: Sequence[str] | None = None,
    info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate and write a prepared dataset; return its stats.

    `labels` fixes the vocabulary order (e.g. a top-50 list); by default it is the sorted
    union of the labels seen in all splits. `info` is provenance merged into stats.json.
    """
    where = str(out_dir)
    if set(splits) != set(SPLITS):
        raise InputError(where, f"got splits {sorted(splits)}", f"provide exactly {list(SPLITS)}")
    for name in SPLITS:
        _check_columns(name, splits[name], where)
        if splits[name].empty:
            raise _empty_split_error(name, where)
    with ManifestWriter(out_dir, labels=labels, info=info) as writer:
        for name in SPLITS:
            writer.add(name, splits[name])
        return writer.close()


def rebuild_fix(data_dir: str | Path) -> str:
    """The fix for a prepared folder that is damaged or was edited by hand."""
    return f"delete {data_dir} and rerun Snakemake (or the dataset's `python -m mscl prepare-...` command) to prepare it again"


def read_split(data_dir: str | Path, split: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A prepared split (only `columns` when given, e.g. without images' or notes' content),
    checked: a readable parquet file with `id` and `labels` columns and no repeated id."""
    path = Path(data_dir) / f"{split}.parquet"
    if not path.exists():
        raise InputError(path, "prepared split not found", "run the preprocessing rule for this dataset first")
    try:
        frame = pd.read_parquet(path, columns=None if columns is None else list(columns))
    except (pa.ArrowException, OSError) as error:
        first_line = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        raise InputError(path, f"not a readable parquet file ({first_line})", rebuild_fix(data_dir), field=split) from error
    for column in ("id", "labels"):
        if column not in frame.columns:
            raise InputError(path, f"split {split!r} has no {column!r} column (columns: {list(frame.columns)})", rebuild_fix(data_dir), field=column)
    repeated = frame["id"][frame["id"].duplicated()]
    if len(repeated):
        raise InputError(path, f"split {split!r} repeats id {str(repeated.iloc[0])[:40]!r}", rebuild_fix(data_dir), field="id")
    frame["labels"] = frame["labels"].map(list)
    return frame


def read_texts(data_dir: str | Path, split: str) -> list[str] | None:
    """The `text` column of a prepared split as a list (None when it has none), read a batch of
    rows at a time: at MIMIC-IV's size the column is gigabytes, and reading it whole held it
    twice, as Arrow buffers and as Python strings (docs/scale.md)."""
    handle = pq.ParquetFile(Path(data_dir) / f"{split}.parquet")
    if "text" not in handle.schema_arrow.names:
        return None
    texts: list[str] = []
    for batch in handle.iter_batches(columns=["text"], batch_size=4096):
        texts.extend(batch.column(0).to_pylist())
    return texts


def read_split_with_content(data_dir: str | Path, split: str, content: str, fix: str) -> pd.DataFrame:
    """`read_split`, then the `content` column a conversion needs ("text" to embed, "path" to
    read images); `fix` names the kind of manifest to pass instead."""
    frame = read_split(data_dir, split)
    if content not in frame.columns:
        raise InputError(Path(data_dir) / f"{split}.parquet", f"no {content!r} column (columns {list(frame.columns)})", fix, field=content)
    return frame


def read_labels(data_dir: str | Path, fix: str | None = None) -> list[str]:
    """The label vocabulary, checked: present, not empty, no label twice (the line named). `fix`
    is what every refusal tells a folder of one's own (prepare-manifest); a prepared folder's
    say to prepare it (again)."""
    path = Path(data_dir) / "labels.txt"
    if not path.exists():
        raise InputError(path, "label vocabulary not found", fix or "run the preprocessing rule for this dataset first")
    labels, line_of = [], {}
    for line, label in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not label:
            continue
        if label in line_of:
            raise InputError(path, f"line {line} repeats label {label[:40]!r} of line {line_of[label]}", fix or rebuild_fix(data_dir), field=f"line {line}")
        line_of[label] = line
        labels.append(label)
    if not labels:
        raise InputError(path, "the label vocabulary is empty", fix or rebuild_fix(data_dir), field="labels")
    return labels


def read_stats(data_dir: str | Path) -> dict[str, Any]:
    import json

    path = Path(data_dir) / "stats.json"
    if not path.exists():
        raise InputError(path, "dataset stats not found", "run the preprocessing rule for this dataset first")
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(path, f"not valid JSON ({error})", rebuild_fix(data_dir)) from error
    if not isinstance(stats, dict):
        raise InputError(path, "top level is not a JSON object", rebuild_fix(data_dir))
    return stats


def label_id_lists(label_lists: Sequence[Sequence[str]], vocabulary: Sequence[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """Samples' label names as CSR label ids over `vocabulary`: (indptr int64 [N + 1], indices
    int64, each row ascending and without repeats; how many occurrences were not in the
    vocabulary). The sparse form every stage keeps labels in (mscl.train.labels, docs/scale.md)."""
    column = {label: index for index, label in enumerate(vocabulary)}
    indices: list[int] = []
    indptr = np.zeros(len(label_lists) + 1, dtype=np.int64)
    ignored = 0
    for row, labels in enumerate(label_lists):
        found = sorted({column[label] for label in labels if label in column})
        ignored += sum(label not in column for label in labels)
        indices.extend(found)
        indptr[row + 1] = len(indices)
    return indptr, np.asarray(indices, dtype=np.int64), ignored
