"""Gather every probe's results into one tidy CSV, and read that CSV back for tables and figures.

`python -m mscl collect --metrics FILE... --roles ENCODER=ROLE... [--train-counts DATASET=STATS_JSON...]
[--dataset-names DATASET=NAME...] [--encoder-names ENCODER=NAME...] [--method-names LOSS=NAME...]
[--paper-datasets DATASET...] [--paper-encoders ENCODER...] --out results/metrics/all_runs.csv`

Each FILE is a probe's metrics.json; the run's axes are read from the run spec recorded in it
(`spec`: dataset, encoder_name, loss, batch_size, seed), never from its path, which only locates
the test scores beside it. The CSV has one row per (run, split, metric): columns
dataset, encoder, encoder_role, loss, batch_size, seed, split, metric, value, with split
`test` (metrics.json "test") or `val` (metrics.json "val_best"), values as fractions (NaN, which
the probe writes as null, kept and written as an empty field), then what ran, by name
(`mscl.report.names`): dataset_display and encoder_display (from --dataset-names and
--encoder-names; the key itself when not given) and paper_dataset / paper_encoder (true for the
datasets and encoders listed in --paper-datasets / --paper-encoders: the paper's data and models,
the only results tables compare with the paper's numbers). The workflow passes all four from the
config. `method_display` is how tables and figures call the run's loss: its --method-names entry,
else `mscl.report.style.method_name` (the paper's name of a built-in loss, else the key).
`encoder_order` is the encoder's place in --roles (0 first; the workflow lists the encoders of
its runs by key, so that the order of the config's `encoders` block changes no result and reruns
nothing): where several encoders share a role on one dataset, the paper's tables and
figures show one of them (`shown_encoders`) and name the others under them; the benchmark table
(`mscl.report.benchmark`) shows every one. For every dataset given in
`--train-counts`, the test split also gets `bucket_head_macro_f1` / `bucket_tail_macro_f1`
(`mscl.metrics.bucket_macro_f1`, head share 0.6 of the training label instances, in the
dataset's macro-F1 definition) and the bucket sizes `bucket_head_labels` / `bucket_tail_labels`,
computed from the probe's saved test scores (test_scores.parquet beside metrics.json).

Macro-F1: `macro_f1` in the CSV is always the definition of the run's dataset family
(`mscl.metrics.macro_f1_definition`: the recorded spec's `dataset_family` when it has one, a
dataset of one's own; else the dataset's family in `mscl.metrics.DATASET_FAMILIES`), taken from the named `macro_f1_caml` /
`macro_f1_per_class` entries, which are kept too; a dataset without a family is an error. A
metrics.json written before the per-family macro-F1 has only `macro_f1`, which was CAML's: it
is kept as `macro_f1_caml`, and for the test split both definitions are recomputed from the
saved test scores. The val scores are not saved, so an old run's val `macro_f1` of a
per-class family is left out, with a note on stderr (rerun the probe to get it).

The label-prior reference (`python -m mscl chance`) is a run like the others: its metrics.json
records a spec with encoder_name and loss "chance", batch_size 0 and seed 0. It has no encoder,
so it takes the role `reference` (`--roles chance=reference`), which only it may take. It has no
batch size either: `select_batch_size` keeps it at every batch size.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from scipy import sparse

from mscl import cli
from mscl.data.manifest import label_id_lists
from mscl.errors import InputError
from mscl.io import atomic_path, read_json
from mscl.metrics import DEFAULT_THRESHOLD, MACRO_F1_CAML, MACRO_F1_DEFINITIONS, bucket_macro_f1, macro_f1_definition, macro_f1_key, macro_f1_variants
from mscl.report.names import Named, WhatRan
from mscl.layout import PAPER_ROLES, ROLE_PATTERN
from mscl.report.style import CHANCE, METHOD_DISPLAY_NAMES, REFERENCE_ROLE, method_name

# The run's axes and value, then what ran by name (the same for every row of a run).
AXIS_COLUMNS = ("dataset", "encoder", "encoder_role", "loss", "batch_size", "seed", "split", "metric", "value")
NAME_COLUMNS = ("dataset_display", "encoder_display", "paper_dataset", "paper_encoder", "method_display", "encoder_order")
# The versions of the mscl files the run's jobs ran that differ between the collected runs,
# "path@sha256[:12] ...": empty when every run ran the same version of every file it used
# (mscl.provenance; `mixed_code_sentence`).
CODE_COLUMN = "code_versions"
RUN_COLUMNS = (*AXIS_COLUMNS, *NAME_COLUMNS, CODE_COLUMN)
# Columns added after the first all_runs.csv files were written: `load_runs` fills them in an
# older file (`with_later_columns`) instead of refusing it.
LATER_COLUMNS = ("method_display", "encoder_order", CODE_COLUMN)
# How the label prior (encoder "chance", role `reference`) is named in tables and figures.
CHANCE_ENCODER_DISPLAY = "label prior (no encoder)"
# metrics.json section -> split name in the tidy CSV.
SPLIT_SECTIONS = {"test": "test", "val_best": "val"}
HEAD_SHARE = 0.6  # the paper's head bucket: classes holding the top 60% of training instances
# Run axis in the tidy CSV -> the metrics.json `spec` key it is read from (the probe records its
# whole RunSpec there, the label prior a block of these keys alone).
SPEC_AXES = {"dataset": "dataset", "encoder": "encoder_name", "loss": "loss", "batch_size": "batch_size", "seed": "seed"}


# ------------------------------------------------------------------------ reading runs


def read_metrics_json(path: str | Path) -> dict[str, Any]:
    """Load a probe's metrics.json; InputError if it is missing, unreadable or has no test metrics."""
    path = Path(path)
    document = read_json(path, "metrics file", "run the probe job of this run first", "re-run the probe job")
    if not isinstance(document, dict) or not isinstance(document.get("test"), dict):
        raise InputError(path, "no 'test' metrics object", "re-run the probe job", field="test")
    return document


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def run_axes(path: str | Path, document: Mapping[str, Any]) -> dict[str, Any]:
    """The run axes (dataset, encoder, loss, batch_size, seed) of the spec recorded in a metrics.json."""
    spec = document.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    for axis, key in SPEC_AXES.items():
        value = spec.get(key)
        valid = _is_int(value) if axis in ("batch_size", "seed") else isinstance(value, str) and value != ""
        if not valid:
            raise InputError(
                path,
                f"the recorded spec has no valid {key!r} ({value!r})",
                "pass the metrics.json files the probe and chance rules write, or re-run that job",
                field=f"spec.{key}",
            )
    return {axis: spec[key] for axis, key in SPEC_AXES.items()}


def numeric_metrics(section: Mapping[str, Any]) -> dict[str, float]:
    """The metric entries of a metrics section as floats: numbers, and null (the probe's strict-JSON
    NaN) as NaN; strings, bools and nested objects are dropped."""
    return {key: math.nan if value is None else float(value) for key, value in section.items() if value is None or _is_number(value)}


def read_test_scores(probe_dir: str | Path) -> tuple[np.ndarray, sparse.csr_array, np.ndarray, list[str]]:
    """(ids, y_true [N, L] as a bool scipy.sparse CSR array, scores [N, L] float32, label names)
    of a probe's test predictions: only the scores are dense (docs/scale.md).

    Reads `test_scores.parquet` as `mscl.train.probe` writes it (columns id, labels = gold label
    names, scores = one probability per vocabulary label; vocabulary in the schema metadata
    `mscl.label_names`, else in `labels.txt` beside it) or, if absent, `test_scores.npz`
    (arrays ids, y_true, scores, labels).
    """
    probe_dir = Path(probe_dir)
    parquet_path, npz_path = probe_dir / "test_scores.parquet", probe_dir / "test_scores.npz"
    if parquet_path.exists():
        table = pq.read_table(parquet_path)
        vocabulary = _parquet_vocabulary(parquet_path, table.schema.metadata or {})
        indptr, indices, _ = label_id_lists(table.column("labels").to_pylist(), vocabulary)
        flat = table.column("scores").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        if flat.size != table.num_rows * len(vocabulary):
            raise InputError(parquet_path, f"scores hold {flat.size} values for {table.num_rows} rows x {len(vocabulary)} labels", "re-run the probe job", field="scores")
        scores = flat.astype(np.float32, copy=False).reshape(table.num_rows, len(vocabulary))
        y_true = sparse.csr_array((np.ones(len(indices), dtype=bool), indices, indptr), shape=scores.shape)
        return np.asarray(table.column("id").to_pylist(), dtype=str), y_true, scores, vocabulary
    if npz_path.exists():
        with np.load(npz_path, allow_pickle=False) as arrays:
            missing = [k for k in ("ids", "y_true", "scores", "labels") if k not in arrays.files]
            if missing:
                raise InputError(npz_path, f"array {missing[0]!r} is missing", "re-run the probe job", field=missing[0])
            return (
                arrays["ids"].astype(str),
                sparse.csr_array(arrays["y_true"].astype(bool)),
                arrays["scores"].astype(np.float32),
                [str(name) for name in arrays["labels"]],
            )
    raise InputError(parquet_path, "no test scores (test_scores.parquet or test_scores.npz)", "re-run the probe job")


def _parquet_vocabulary(parquet_path: Path, metadata: Mapping[bytes, bytes]) -> list[str]:
    """Label vocabulary of a score file: its `mscl.label_names` metadata, else labels.txt beside it."""
    if b"mscl.label_names" in metadata:
        return [str(name) for name in json.loads(metadata[b"mscl.label_names"])]
    labels_txt = parquet_path.with_name("labels.txt")
    if labels_txt.exists():
        return [line for line in labels_txt.read_text(encoding="utf-8").splitlines() if line]
    raise InputError(parquet_path, "no label vocabulary (metadata mscl.label_names or labels.txt)", "re-run the probe job", field="mscl.label_names")


def read_train_counts(stats_path: str | Path) -> dict[str, int]:
    """Label name -> training instance count from a prepared dataset's stats.json."""
    path = Path(stats_path)
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
        frequency = stats["splits"]["train"]["label_frequency"]
    except FileNotFoundError:
        raise InputError(path, "stats file not found", "run the preprocessing rule of this dataset first") from None
    except (json.JSONDecodeError, KeyError, TypeError):
        raise InputError(path, "no splits.train.label_frequency", "re-run the preprocessing rule", field="splits.train.label_frequency") from None
    return {str(name): int(count) for name, count in frequency.items()}


def bucket_metrics(probe_dir: str | Path, train_counts: Mapping[str, int], definition: str) -> dict[str, float]:
    """Head/tail macro-F1 (in `definition`, the dataset's) and bucket sizes of one probe's test
    scores (labels absent from train count 0)."""
    _, y_true, scores, label_names = read_test_scores(probe_dir)
    counts = np.array([train_counts.get(name, 0) for name in label_names], dtype=np.int64)
    try:
        buckets = bucket_macro_f1(y_true, scores, counts, head_share=HEAD_SHARE, definition=definition)
    except ValueError as error:
        raise InputError(probe_dir, f"cannot compute frequency buckets: {error}", "check the test scores and the --train-counts stats.json") from None
    return {
        "bucket_head_macro_f1": buckets["head"],
        "bucket_tail_macro_f1": buckets["tail"],
        "bucket_head_labels": float(buckets["head_labels"]),
        "bucket_tail_labels": float(buckets["tail_labels"]),
    }


def note(message: str) -> None:
    """A remark about the inputs that does not stop `collect`, on stderr."""
    print(f"collect: note: {message}", file=sys.stderr)


def family_macro_f1(values: dict[str, float], definition: str, split: str, metrics_path: str | Path) -> dict[str, float]:
    """`values` with `macro_f1` set to its `definition` entry (see the module docstring), old
    metrics.json files upgraded: their `macro_f1` kept as `macro_f1_caml`, the test split's two
    definitions recomputed from the saved test scores."""
    values = dict(values)
    named = [macro_f1_key(name) for name in MACRO_F1_DEFINITIONS]
    if not any(key in values for key in named):
        if "macro_f1" in values:
            values[macro_f1_key(MACRO_F1_CAML)] = values["macro_f1"]
        probe_dir = Path(metrics_path).parent
        if split == "test" and any((probe_dir / name).exists() for name in ("test_scores.parquet", "test_scores.npz")):
            _, y_true, scores, _ = read_test_scores(probe_dir)
            values.update(macro_f1_variants(y_true, scores, values.get("threshold", DEFAULT_THRESHOLD)))
    values.pop("macro_f1", None)
    chosen = macro_f1_key(definition)
    if chosen in values:
        values["macro_f1"] = values[chosen]
    elif any(key in values for key in named):
        note(
            f"{metrics_path}: {split} has no {chosen} (metrics.json predates the per-family macro-F1 and "
            f"{'no test scores are saved' if split == 'test' else 'val scores are never saved'}); its macro_f1 is left out, "
            "rerun the probe to get it"
        )
    return values


@dataclass(frozen=True)
class RunNames:
    """What `collect` records about the names of what ran: display names per dataset, encoder and
    loss key (datasets and encoders: the key itself when absent; losses: `style.method_name`)
    and the keys that are the paper's own data and models."""

    datasets: Mapping[str, str] = field(default_factory=dict)
    encoders: Mapping[str, str] = field(default_factory=dict)
    paper_datasets: frozenset[str] = frozenset()
    paper_encoders: frozenset[str] = frozenset()
    methods: Mapping[str, str] = field(default_factory=dict)

    def columns(self, dataset: str, encoder: str, loss: str) -> dict[str, Any]:
        """The NAME_COLUMNS values but encoder_order of a run of `dataset` with `encoder` and `loss`."""
        encoder_display = CHANCE_ENCODER_DISPLAY if encoder == CHANCE else self.encoders.get(encoder, encoder)
        return {
            "dataset_display": self.datasets.get(dataset, dataset),
            "encoder_display": encoder_display,
            "paper_dataset": dataset in self.paper_datasets,
            "paper_encoder": encoder in self.paper_encoders and encoder != CHANCE,
            "method_display": self.methods.get(loss, method_name(loss)),
        }


def run_rows(
    metrics_path: str | Path, roles: Mapping[str, str], train_counts: Mapping[str, Mapping[str, int]], names: RunNames | None = None
) -> list[dict[str, Any]]:
    """The tidy rows of one probe run."""
    document = read_metrics_json(metrics_path)
    axes = run_axes(metrics_path, document)
    if axes["encoder"] not in roles:
        raise InputError(
            metrics_path,
            f"encoder {axes['encoder']!r} has no role",
            f"add --roles {axes['encoder']}=ROLE with ROLE one of the paper's columns {list(PAPER_ROLES)}, or a name of your own",
            field="--roles",
        )
    definition = macro_f1_definition(axes["dataset"], metrics_path, document["spec"].get("dataset_family"))
    base = {
        **axes,
        "encoder_role": roles[axes["encoder"]],
        **(names or RunNames()).columns(axes["dataset"], axes["encoder"], axes["loss"]),
        "encoder_order": list(roles).index(axes["encoder"]),
    }
    rows = []
    for section, split in SPLIT_SECTIONS.items():
        values = family_macro_f1(numeric_metrics(document.get(section) or {}), definition, split, metrics_path)
        if split == "test" and axes["dataset"] in train_counts:
            values.update(bucket_metrics(Path(metrics_path).parent, train_counts[axes["dataset"]], definition))
        rows += [{**base, "split": split, "metric": metric, "value": value} for metric, value in values.items()]
    return rows


def run_code_files(metrics_path: str | Path) -> dict[str, set[str]]:
    """The mscl files a run's jobs ran, path -> their sha256 (two when the code changed between
    its pretraining and its probe), from the versions.json of its probe and of the pretraining
    beside it; empty for a run made before jobs recorded their code."""
    probe = Path(metrics_path).parent
    files: dict[str, set[str]] = {}
    for record in (probe / "versions.json", probe.parent / "pretrain" / "versions.json"):
        code = (read_json(record, "versions.json", "rerun the job", "rerun the job").get("code") or {}) if record.is_file() else {}
        for name, digest in (code.get("files") or {}).items():
            files.setdefault(name, set()).add(digest)
    return files


def code_versions(runs: Sequence[Mapping[str, set[str]]]) -> list[str]:
    """Each run's CODE_COLUMN: its versions of the files that several runs ran in different versions."""
    seen: dict[str, set[str]] = {}
    for files in runs:
        for name, digests in files.items():
            seen.setdefault(name, set()).update(digests)
    mixed = sorted(name for name, digests in seen.items() if len(digests) > 1)
    return [" ".join(f"{name}@{digest[:12]}" for name in mixed if name in files for digest in sorted(files[name])) for files in runs]


def mixed_code_sentence(runs: pd.DataFrame) -> str:
    """A caption's sentence when the runs were made by more than one version of an mscl file
    (empty when not), naming the files."""
    versions: dict[str, set[str]] = {}
    for value in runs[CODE_COLUMN].dropna().unique():
        for token in str(value).split():
            name, _, digest = token.rpartition("@")
            versions.setdefault(name, set()).add(digest)
    if not versions:
        return ""
    files = ", ".join(f"{name} ({len(digests)} versions)" for name, digests in sorted(versions.items()))
    return f"These runs were made by more than one version of the code: {files}; `python -m mscl stale` lists the runs today's code would not make the same way."


def collect_runs(
    metrics_paths: Sequence[str | Path],
    roles: Mapping[str, str],
    train_counts: Mapping[str, Mapping[str, int]] | None = None,
    names: RunNames | None = None,
) -> pd.DataFrame:
    """One tidy frame (RUN_COLUMNS) of all runs, sorted by every axis for a stable file."""
    versions = code_versions([run_code_files(path) for path in metrics_paths])
    rows = [
        {**row, CODE_COLUMN: version}
        for path, version in zip(metrics_paths, versions)
        for row in run_rows(path, roles, train_counts or {}, names)
    ]
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    keys = [c for c in AXIS_COLUMNS if c != "value"]
    duplicated = frame.duplicated(keys)
    if duplicated.any():
        first = frame.loc[duplicated].iloc[0]
        raise InputError(None, f"run {dict(first[keys[:6]])} is given twice", "pass each metrics.json once", field="--metrics")
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def write_runs(frame: pd.DataFrame, out: str | Path) -> None:
    """Write the tidy CSV atomically (full float precision, NaN as an empty field)."""
    with atomic_path(out, suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n", float_format="%.17g")


# ----------------------------------------------------------------- using the tidy CSV


def load_runs(path: str | Path) -> pd.DataFrame:
    """Read a tidy CSV written by `collect`; InputError naming the file if it is missing or malformed.
    A file written before LATER_COLUMNS existed gets them filled (`with_later_columns`)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "results file not found", "run `python -m mscl collect` first", field="--runs")
    text = {c: str for c in ("dataset", "encoder", "encoder_role", "loss", "split", "metric", "dataset_display", "encoder_display", "method_display", CODE_COLUMN)}
    frame = pd.read_csv(path, dtype=text, keep_default_na=False, na_values={"value": ["", "NaN", "nan"]})
    missing = [c for c in RUN_COLUMNS if c not in frame.columns and c not in LATER_COLUMNS]
    if missing:
        raise InputError(path, f"column {missing[0]!r} is missing", "regenerate it with `python -m mscl collect`", field=missing[0])
    for column in ("paper_dataset", "paper_encoder"):
        if frame[column].dtype != bool:
            values = frame[column].astype(str).str.lower()
            if not values.isin(["true", "false"]).all():
                raise InputError(path, f"column {column!r} holds {sorted(set(values) - {'true', 'false'})[:3]}, not True/False", "regenerate it with `python -m mscl collect`", field=column)
            frame[column] = values == "true"
    if "encoder_order" in frame.columns and not pd.api.types.is_integer_dtype(frame["encoder_order"]):
        bad = frame.loc[pd.to_numeric(frame["encoder_order"], errors="coerce").isna(), "encoder_order"]
        raise InputError(path, f"column 'encoder_order' holds {bad.astype(str).unique()[:3].tolist()}, not whole numbers", "regenerate it with `python -m mscl collect`", field="encoder_order")
    return with_later_columns(frame)[list(RUN_COLUMNS)]


def with_later_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` (RUN_COLUMNS) with LATER_COLUMNS filled where absent or empty: method_display with
    `style.method_name` of the loss, encoder_order with the encoder's place among the encoder
    keys in alphabetical order (an older file does not record the --roles order), code_versions
    empty (an older file does not say)."""
    runs = runs.assign(**{column: math.nan for column in LATER_COLUMNS if column not in runs.columns})
    display = runs["method_display"]
    missing_display = display.isna() | (display.astype(str) == "")
    order = pd.to_numeric(runs["encoder_order"], errors="coerce")
    if missing_display.any():
        display = display.astype(object).where(~missing_display, runs["loss"].map(method_name)).astype(str)
    if order.isna().any():
        alphabetical = {encoder: place for place, encoder in enumerate(sorted(runs["encoder"].unique()))}
        order = order.fillna(runs["encoder"].map(alphabetical))
    return runs.assign(method_display=display, encoder_order=order.astype(int), **{CODE_COLUMN: runs[CODE_COLUMN].astype(object).where(runs[CODE_COLUMN].notna(), "").astype(str)})


def shown_encoders(runs: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(dataset, encoder_role) -> the encoder the paper's tables and figures show there: of the
    encoders that ran under that role on that dataset, the paper's own model if one is, else the
    first in encoder_order (the --roles order: by key in the workflow), then by key."""
    encoders = runs[["dataset", "encoder_role", "encoder", "paper_encoder", "encoder_order"]].drop_duplicates(["dataset", "encoder_role", "encoder"])
    ranked = encoders.sort_values(["paper_encoder", "encoder_order", "encoder"], ascending=[False, True, True], kind="stable")
    first = ranked.drop_duplicates(["dataset", "encoder_role"])
    return {(d, r): e for d, r, e in zip(first["dataset"], first["encoder_role"], first["encoder"])}


def paper_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the encoders the paper's tables and figures show (`shown_encoders`): one per
    (dataset, encoder_role), so every table cell and plotted item is one encoder's."""
    if runs.empty:
        return runs
    shown = shown_encoders(runs)
    keep = [shown[(d, r)] == e for d, r, e in zip(runs["dataset"], runs["encoder_role"], runs["encoder"])]
    return runs[np.asarray(keep, dtype=bool)]


def known_order_key(order: Sequence[str], key: str) -> tuple[int, str]:
    """Sort key of `key`: its place in `order`, then any key `order` lacks (a plugin's loss, a
    dataset of one's own), by the key itself."""
    return (order.index(key), "") if key in order else (len(order), key)


def method_sort_key(loss: str) -> tuple[int, str]:
    """Report order of loss keys: the paper's and the claim check's methods in their order, then
    any other (a plugin's) by key."""
    return known_order_key(list(METHOD_DISPLAY_NAMES), loss)


def what_ran(runs: pd.DataFrame) -> WhatRan:
    """The names and paper status recorded in the tidy runs (mscl.report.names.WhatRan): the
    encoder shown per (dataset, role), the others that ran there, and the losses by name."""
    runs = with_later_columns(runs)
    shown = shown_encoders(runs) if len(runs) else {}
    result = WhatRan(methods=dict(METHOD_DISPLAY_NAMES))
    columns = ["dataset", "encoder_role", "encoder", "dataset_display", "encoder_display", "paper_dataset", "paper_encoder", "encoder_order"]
    others: dict[tuple[str, str], list[tuple[int, str, Named]]] = {}
    for row in runs[columns].drop_duplicates().itertuples(index=False):
        result.datasets.setdefault(row.dataset, Named(row.dataset_display, bool(row.paper_dataset)))
        pair, encoder = (row.dataset, row.encoder_role), Named(row.encoder_display, bool(row.paper_encoder))
        if shown[pair] == row.encoder:
            named = result.encoders.setdefault(pair, [])
            if encoder not in named:
                named.append(encoder)
        else:
            others.setdefault(pair, []).append((row.encoder_order, row.encoder, encoder))
    for pair, encoders in others.items():
        result.also_ran[pair] = list(dict.fromkeys(named for _, _, named in sorted(encoders, key=lambda item: item[:2])))
    for row in runs[["dataset", "encoder_role", "loss", "method_display"]].drop_duplicates().itertuples(index=False):
        result.methods[row.loss] = row.method_display
        losses = result.losses.setdefault((row.dataset, row.encoder_role), [])
        if row.loss not in losses:
            losses.append(row.loss)
    for losses in result.losses.values():
        losses.sort(key=method_sort_key)
    return result


def default_batch_sizes(runs: pd.DataFrame) -> dict[tuple[str, str], int]:
    """Per (dataset, encoder_role): the batch size with the most (loss, seed) runs, ties -> the largest.

    A batch-size sweep adds a few runs at other sizes; the main grid is the size most runs share.
    """
    chosen = {}
    runs_per_size = runs.groupby(["dataset", "encoder_role", "batch_size"])[["loss", "seed"]].apply(
        lambda group: len(group.drop_duplicates())
    )
    for (dataset, role), sizes in runs_per_size.groupby(level=[0, 1]):
        counts = {int(size): int(n) for (_, _, size), n in sizes.items()}
        chosen[(dataset, role)] = max(counts, key=lambda size: (counts[size], size))
    return chosen


def select_batch_size(runs: pd.DataFrame, batch_size: int | None = None) -> pd.DataFrame:
    """Runs at `batch_size`, or at each (dataset, encoder_role)'s default batch size if None.

    The reference role (the label prior, which has no batch size) is kept either way.
    """
    if batch_size is not None:
        return runs[(runs["batch_size"] == batch_size) | (runs["encoder_role"] == REFERENCE_ROLE)]
    if runs.empty:
        return runs
    chosen = default_batch_sizes(runs)
    keep = [chosen[(d, r)] == b for d, r, b in zip(runs["dataset"], runs["encoder_role"], runs["batch_size"])]
    return runs[np.asarray(keep, dtype=bool)]


SUMMARY_KEYS = ["dataset", "encoder_role", "loss", "batch_size", "split", "metric"]


def summarise_seeds(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std (ddof 1, NaN for one seed) and seed count of every cell over seeds.

    Keys: dataset, encoder_role, loss, batch_size, split, metric. NaN values are left out of the
    mean (`seeds` counts the finite ones); a cell whose values are all NaN has mean NaN and
    seeds 0. Two encoders of the same role in one cell is an error: pass `paper_runs(runs)`,
    which keeps one encoder per role and dataset.
    """
    if runs.empty:
        return pd.DataFrame(columns=[*SUMMARY_KEYS, "mean", "std", "seeds"])
    encoders = runs.groupby(SUMMARY_KEYS)["encoder"].nunique()
    if (encoders > 1).any():
        dataset, role = encoders[encoders > 1].index[0][:2]
        names = sorted(runs.loc[(runs["dataset"] == dataset) & (runs["encoder_role"] == role), "encoder"].unique())
        raise InputError(None, f"encoders {names} all map to role {role!r} on {dataset!r}", "summarise `paper_runs(runs)`, which keeps the encoder the paper's tables show", field="encoder_role")
    grouped = runs.groupby(SUMMARY_KEYS)["value"]
    summary = grouped.agg(mean="mean", std="std", seeds="count").reset_index()
    summary["seeds"] = summary["seeds"].astype(int)
    return summary


@dataclass(frozen=True)
class CellStat:
    """One table cell over seeds: mean and sample std (fractions) and the number of finite seeds."""

    mean: float
    std: float
    seeds: int


CellKey = tuple[str, str, str, str]  # (dataset, encoder_role, loss, metric)


def cell_index(runs: pd.DataFrame, split: str = "test", batch_size: int | None = None) -> dict[CellKey, CellStat]:
    """(dataset, encoder_role, loss, metric) -> CellStat of one split at the chosen batch sizes."""
    chosen = select_batch_size(runs[runs["split"] == split], batch_size)
    summary = summarise_seeds(chosen)
    return {
        (row.dataset, row.encoder_role, row.loss, row.metric): CellStat(float(row.mean), float(row.std), int(row.seeds))
        for row in summary.itertuples(index=False)
    }


# ------------------------------------------------------------------------------- CLI


def parse_pairs(values: Sequence[str], flag: str, example: str) -> dict[str, str]:
    """Repeated KEY=VALUE arguments -> dict; each key once."""
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key or not item:
            raise InputError(None, f"{flag} {value!r} is not KEY=VALUE", f"write e.g. {flag} {example}", field=flag)
        if key in pairs:
            raise InputError(None, f"{flag} gives {key!r} twice", "give each key once", field=flag)
        pairs[key] = item
    return pairs


def parse_roles(values: Sequence[str]) -> dict[str, str]:
    """--roles ENCODER=ROLE arguments -> dict. A role is any name (mscl.layout.ROLE_PATTERN): one
    of the paper's columns (PAPER_ROLES) puts the encoder in that column of the paper's tables,
    any other in the benchmark alone; the role `reference` belongs to the label prior alone
    (chance=reference)."""
    roles = parse_pairs(values, "--roles", "resnet50=resnet")
    for encoder, role in roles.items():
        if not re.match(ROLE_PATTERN, role):
            raise InputError(
                None, f"role {role!r} of encoder {encoder!r} is not a name",
                f"use one of the paper's columns {list(PAPER_ROLES)}, or a name of your own (a letter, then letters, digits, '_' or '-')", field="--roles",
            )  # fmt: skip
        if (encoder == CHANCE) != (role == REFERENCE_ROLE):
            raise InputError(
                None,
                f"--roles {encoder}={role}: the role {REFERENCE_ROLE!r} is reserved for the label prior, as {CHANCE}={REFERENCE_ROLE}",
                f"map {CHANCE} to {REFERENCE_ROLE} and every encoder to another role (the paper's {list(PAPER_ROLES)}, or one of your own)",
                field="--roles",
            )
    return roles


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    args = cli.parse_args("collect", argv)
    roles = parse_roles(args.roles)
    counts = {name: read_train_counts(path) for name, path in parse_pairs(args.train_counts, "--train-counts", "coco=data/processed/coco/stats.json").items()}
    names = RunNames(
        datasets=parse_pairs(args.dataset_names, "--dataset-names", "coco='COCO-demo (30 glyph classes)'"),
        encoders=parse_pairs(args.encoder_names, "--encoder-names", "resnet8='ResNet-8 (for ResNet-50)'"),
        paper_datasets=frozenset(args.paper_datasets),
        paper_encoders=frozenset(args.paper_encoders),
        methods=parse_pairs(args.method_names, "--method-names", "my_loss='My loss'"),
    )
    frame = collect_runs(args.metrics, roles, counts, names)
    write_runs(frame, args.out)
    print(f"collect: wrote {args.out} with {len(frame)} rows from {len(args.metrics)} runs")
    return 0
