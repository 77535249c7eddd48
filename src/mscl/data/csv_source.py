"""One CSV or TSV file of one's own -> manifest (`python -m mscl prepare-csv`): a dataset with no code.

Each data row (the first line is the header) is one sample. `--input-column` holds its text or,
with `--modality image`, the path of its image relative to the file's folder (an absolute path
is taken as it is); `--labels-column` holds its labels joined by `--separator` (default `;`).
Labels are stripped of surrounding whitespace, empty ones are dropped and a label repeated in a
row counts once; a row may have no label (it is kept and stats.json counts it). The split is
each row's `--split-column` value (train, val or test in any case, dev/valid/validation meaning
val) or, without a split column, a seeded split by `--fractions` (default 0.7/0.15/0.15). Ids
are the `--id-column` values, or `row-000001` for the first data row, `row-000002` for the
next, and so on. Rows keep the file's order within their split.
"""

from __future__ import annotations

import contextlib
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from mscl import cli
from mscl.data.images import require_images
from mscl.data.manifest import SPLITS, family_of, provenance, write_dataset
from mscl.data.splitting import check_fractions, fractional_split
from mscl.defaults import CSV_FRACTIONS, CSV_LABEL_SEPARATOR, CSV_MODALITIES
from mscl.errors import InputError, OptionNames, shown

FORMAT = "one CSV/TSV file (prepare-csv)"
# A split column's values (stripped, lower-cased) -> the manifest's split.
SPLIT_VALUES = {"train": "train", "val": "val", "valid": "val", "validation": "val", "dev": "val", "test": "test"}
# Delimiters `--delimiter auto` tells apart (by extension, else by csv.Sniffer), with their names.
DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}
EXTENSION_DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
SNIFF_BYTES = 1 << 16  # the start of the file csv.Sniffer reads
# The longest split value and id an error quotes (mscl.errors.shown: never a value with spaces).
SHOWN_SPLIT, SHOWN_ID = 20, 40
CONTENT_COLUMN = {"text": "text", "image": "path"}
# Separators a labels column may be joined by instead of the one given, in the order they are
# tried, with how messages call them (" ": any whitespace).
JOIN_CANDIDATES = {"|": "'|'", ",": "','", ";": "';'", "/": "'/'", "+": "'+'", "&": "'&'", "\t": "a tab", " ": "whitespace"}
SHOWN_LABEL = 40  # the longest label a message quotes
FIX_QUOTING = "quote every field that holds the delimiter, a double quote or a line break (spreadsheet programs do when they export CSV)"


def choose_delimiter(path: Path, delimiter: str, names: OptionNames = OptionNames()) -> str:
    """`delimiter`, or for "auto": a tab for .tsv/.tab, a comma for .csv, else what csv.Sniffer
    finds among DELIMITER_NAMES in the file's first lines."""
    if delimiter != "auto":
        return delimiter
    if path.suffix.lower() in EXTENSION_DELIMITERS:
        return EXTENSION_DELIMITERS[path.suffix.lower()]
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
        sample = handle.read(SNIFF_BYTES)
    whole_lines = sample[: sample.rfind("\n") + 1] or sample  # a cut last line would mislead the sniffer
    try:
        return csv.Sniffer().sniff(whole_lines, delimiters="".join(DELIMITER_NAMES)).delimiter
    except csv.Error:
        raise InputError(path, "cannot tell the delimiter from the file's first lines", f"set {names('--delimiter')} to ',', 'tab', ';' or '|'", field=names("--delimiter")) from None


@contextlib.contextmanager
def unlimited_fields() -> Iterator[None]:
    """Lift csv's field size limit (128 KiB by default: a long note would be refused) for a block."""
    previous = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # the largest value every platform's C long holds
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def first_non_utf8_line(path: Path) -> int:
    """The 1-based number of the first line of `path` that is not UTF-8."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 0  # pragma: no cover - only called after a decoding error


def read_table(path: Path, delimiter: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header (names stripped) and the data rows as (line where the row starts, fields).
    Blank lines are skipped; every other row must have as many fields as the header."""
    rows: list[tuple[int, list[str]]] = []
    try:
        with unlimited_fields(), open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter=delimiter)
            try:
                header = [name.strip() for name in next(reader)]
            except StopIteration:
                raise InputError(path, "the file is empty", "write a header line naming the columns, then one line per sample") from None
            start = reader.line_num + 1
            for fields in reader:
                if fields:
                    rows.append((start, fields))
                start = reader.line_num + 1
    except UnicodeDecodeError:
        line = first_non_utf8_line(path)
        raise InputError(path, f"line {line} is not UTF-8 text", "save the file as UTF-8 (spreadsheet programs offer 'CSV UTF-8')", field=f"line {line}") from None
    except csv.Error as error:  # csv's messages name no field content
        raise InputError(path, f"line {reader.line_num}: {error}", FIX_QUOTING, field=f"line {reader.line_num}") from None
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InputError(path, f"the header names column {repeated[0]!r} twice", "give every column its own name", field="header")
    for line, fields in rows:
        if len(fields) != len(header):
            raise InputError(
                path, f"line {line} has {len(fields)} fields where the header has {len(header)}",
                f"{FIX_QUOTING}; the delimiter used is the {DELIMITER_NAMES.get(delimiter, repr(delimiter))}", field=f"line {line}",
            )  # fmt: skip
    return header, rows


def require_columns(path: Path, header: Sequence[str], options: Mapping[str, str | None], delimiter: str, names: OptionNames = OptionNames()) -> None:
    """Every column an option names must be in the header; the error lists the file's columns
    and names the option as `names` does (the config key the workflow read it from)."""
    for option, column in options.items():
        if column is None or column in header:
            continue
        hint = ""
        if len(header) == 1:
            others = [name for char, name in DELIMITER_NAMES.items() if char != delimiter and char in header[0]]
            if others:
                hint = f"; the header is one column holding a {others[0]}: set {names('--delimiter')} to it"
        raise InputError(
            path, f"no column {column!r} (named by {names(option)}); the file's columns are {list(header)}",
            f"set {names(option)} to one of those columns{hint}", field=column,
        )  # fmt: skip


def parse_labels(cell: str, separator: str) -> list[str]:
    """The sorted distinct labels of a cell: split on `separator`, stripped, empty ones dropped."""
    return sorted({label.strip() for label in cell.split(separator)} - {""})


@dataclass(frozen=True)
class JoinedLabels:
    """What a labels column read with one separator looks like when its labels are joined by
    another: the other separator, in how many cells it occurs, and the label count either way."""

    separator: str
    cells: int  # data rows whose labels cell holds it
    labels_as_read: int  # distinct labels read with the given separator (one per cell)
    labels_split: int  # distinct labels once split by the one found
    standalone: tuple[str, ...]  # parts that are also a whole cell's label, a few of them


def joined_by(cells: Sequence[str], separator: str) -> JoinedLabels | None:
    """The other separator that joins the labels of `cells` (a labels column's cells), or None.

    Only when `separator` occurs in no cell: then every row has one label, the cell, and a file
    whose labels are joined by another separator reads as a single-label file of label sets.
    Such a file shows one of two signs, for a candidate in JOIN_CANDIDATES:
    - its cells are made of labels: of the distinct cells holding it, at least two, and at least
      half, consist of parts that are each a whole cell elsewhere too (the rows with one label);
    - its combinations outnumber its parts: more distinct cells hold it than there are parts
      (seven labels joined by '|' read as 54 "labels").
    Labels that merely contain such a character do not show them: "New York", "Los Angeles" split
    into words that are no labels alone, ICD codes hold no candidate, "AC/DC" or "N/A" beside
    other labels give parts that are not labels, "black cat" beside "cat" has a part that is not.
    Whitespace, inside multi-word label names, counts by the first sign only (a grid of names
    such as "heart failure", "renal failure", "heart disease", ... has more names than words)."""
    distinct = set(cells) - {""}
    if not distinct or any(separator in cell for cell in distinct):
        return None
    for candidate in JOIN_CANDIDATES:
        if candidate == separator or (candidate == " " and separator.isspace()):
            continue
        split = str.split if candidate == " " else (lambda cell, c=candidate: cell.split(c))
        holding = [cell for cell in distinct if len(split(cell)) > 1]
        if not holding:
            continue
        parts = {part.strip() for cell in holding for part in split(cell)} - {""}
        standalone = sorted(parts & distinct)
        made_of_labels = sum(all(part.strip() in distinct for part in split(cell) if part.strip()) for cell in holding)
        own_labels = made_of_labels >= 2 and 2 * made_of_labels >= len(holding)
        combinations = candidate != " " and len(holding) > len(parts)
        if own_labels or combinations:
            all_parts = parts | {cell for cell in distinct if len(split(cell)) == 1}
            rows = sum(len(split(cell)) > 1 for cell in cells)
            return JoinedLabels(candidate, rows, len(distinct), len(all_parts), tuple(standalone[:3]))
    return None


def separator_problem(path: Path, column: str, cells: Sequence[str], separator: str, names: OptionNames) -> InputError | None:
    """The refusal of a labels column whose labels look joined by another separator (`joined_by`)."""
    joined = joined_by(cells, separator)
    if joined is None:
        return None
    found = JOIN_CANDIDATES[joined.separator]
    standalone = f"; {', '.join(shown(label, SHOWN_LABEL) for label in joined.standalone)} are labels alone and parts of others" if joined.standalone else ""
    setting = repr(joined.separator) if joined.separator != " " else "' '"
    return InputError(
        path,
        f"the labels of column {column!r} look joined by {found}, not by the separator {separator!r}, which occurs in no cell: "
        f"{found} is in {joined.cells} of {len(cells)} rows{standalone}. Read with {separator!r}, every row has one label and "
        f"there are {joined.labels_as_read} labels; split by {found}, {joined.labels_split}",
        f"set {names('--separator')} to {setting}, or, if each cell is one label, {names('--no-separator-check')}",
        field=column,
    )


def split_of(value: str, path: Path, line: int, column: str) -> str:
    """The manifest split a split-column value names (SPLIT_VALUES, any case)."""
    split = SPLIT_VALUES.get(value.strip().lower())
    if split is None:
        raise InputError(
            path, f"line {line}: split value {shown(value.strip(), SHOWN_SPLIT)} is not a split",
            f"write train, val or test (any case; dev, valid and validation mean val) in column {column!r}", field=column,
        )  # fmt: skip
    return split


def id_width(count: int) -> int:
    """Digits of the zero-padded row number of the default ids (at least 6)."""
    return max(6, len(str(count)))


def read_samples(
    path: Path, header: Sequence[str], rows: Sequence[tuple[int, list[str]]], columns: Mapping[str, str | None],
    separator: str, modality: str, verify_images: bool, names: OptionNames = OptionNames(),
) -> pd.DataFrame:  # fmt: skip
    """One row per sample: id, labels, split (None without a split column) and the content
    (text, or image path checked on disk, every image decoded in parallel unless not
    `verify_images`). Cells are named by line and column, never quoted when they hold text (it
    may be a clinical note)."""
    position = {name: index for index, name in enumerate(header)}
    width = id_width(len(rows))
    samples, line_of_id, images = [], {}, []
    for number, (line, fields) in enumerate(rows, start=1):
        cell = {option: fields[position[column]] for option, column in columns.items() if column is not None}
        content = cell["input"].strip()
        if not content:
            raise InputError(path, f"line {line}: the {modality} cell is empty", "fill it, or remove the row", field=columns["input"])
        if modality == "image":
            images.append((f"line {line}", content))
        sample_id = cell["id"].strip() if "id" in cell else f"row-{number:0{width}d}"
        if not sample_id:
            raise InputError(path, f"line {line}: the id cell is empty", "give every row an id, or leave --id-column out (ids are then row numbers)", field=columns["id"])
        if sample_id in line_of_id:
            raise InputError(path, f"line {line} repeats id {shown(sample_id, SHOWN_ID)} of line {line_of_id[sample_id]}", "give every row its own id", field=columns["id"])
        line_of_id[sample_id] = line
        samples.append({
            "id": sample_id, "labels": parse_labels(cell["labels"], separator),
            "split": split_of(cell["split"], path, line, columns["split"]) if "split" in cell else None,
            CONTENT_COLUMN[modality]: content,
        })  # fmt: skip
    require_images(path.parent, images, verify_images, path, columns["input"], names)
    return pd.DataFrame(samples, columns=["id", "labels", "split", CONTENT_COLUMN[modality]])


def split_policy(split_column: str | None, fractions: Sequence[float], seed: int) -> str:
    """The split policy sentence recorded in stats.json."""
    if split_column is not None:
        return f"the file's column {split_column!r} names each row's split (train, val, test in any case; dev, valid, validation mean val)"
    shares = "/".join(f"{f:g}" for f in fractions)
    return f"rows split at random into train/val/test with fractions {shares} (numpy default_rng seed {seed}, ids sorted first)"


def prepare(
    path: Path,
    out: Path,
    input_column: str,
    labels_column: str,
    *,
    separator: str = CSV_LABEL_SEPARATOR,
    split_column: str | None = None,
    fractions: Sequence[float] | None = None,
    modality: str = "text",
    family: str | None = None,
    seed: int = 0,
    delimiter: str = "auto",
    id_column: str | None = None,
    dataset: str | None = None,
    verify_images: bool = True,
    separator_check: bool = True,
    names: OptionNames = OptionNames(),
) -> dict[str, Any]:
    """Read the CSV/TSV file `path` and write its manifest to `out`; return its stats. Messages
    name the options as `names` does: the config keys of the source, when the workflow runs it."""
    path = Path(path)
    if split_column is not None and fractions is not None:
        raise InputError(None, "both a split column and split fractions are given", f"set {names('--split-column')} or {names('--fractions')}, not both", field=names("--fractions"))
    fractions = check_fractions(CSV_FRACTIONS if fractions is None else fractions, names("--fractions"))
    if modality not in CSV_MODALITIES:
        raise InputError(None, f"unknown modality {modality!r}", f"use one of {list(CSV_MODALITIES)}", field=names("--modality"))
    family = family_of(modality, family, names("--family"))
    if not separator:
        raise InputError(None, "the label separator is empty", f"set {names('--separator')}, e.g. to ';'", field=names("--separator"))
    if not path.is_file():
        raise InputError(path, "CSV file not found", f"set {names('--path')} to the CSV or TSV file")
    delimiter = choose_delimiter(path, delimiter, names)
    header, rows = read_table(path, delimiter)
    columns = {"input": input_column, "labels": labels_column, "split": split_column, "id": id_column}
    require_columns(path, header, {"--input-column": input_column, "--labels-column": labels_column, "--split-column": split_column, "--id-column": id_column}, delimiter, names)
    if not rows:
        raise InputError(path, "the file has a header but no data row", "add one line per sample under the header")
    if separator_check:
        labels_at = header.index(labels_column)
        problem = separator_problem(path, labels_column, [fields[labels_at].strip() for _, fields in rows], separator, names)
        if problem:
            raise problem
    samples = read_samples(path, header, rows, columns, separator, modality, verify_images, names)

    labelled = samples["labels"].map(len) > 0
    if not labelled.any():
        raise InputError(
            path, f"no row has a label in column {labels_column!r}",
            f"fill that column with each row's labels joined by {separator!r} (or set the {names('--labels-column')} and {names('--separator')} the file uses)", field=labels_column,
        )  # fmt: skip
    if split_column is None:
        members = fractional_split(list(samples["id"]), fractions, seed)
        split_by_id = {sample_id: name for name, ids in zip(SPLITS, members) for sample_id in ids}
        samples["split"] = samples["id"].map(split_by_id)
    fix_empty = f"give that split rows in column {split_column!r}" if split_column else f"add rows, or change {names('--fractions')}"
    for name in SPLITS:
        in_split = samples["split"] == name
        if not in_split.any():
            raise InputError(path, f"split {name!r} has no row", fix_empty, field=split_column or names("--fractions"))
        if not (in_split & labelled).any():
            raise InputError(path, f"no row of split {name!r} has a label", f"label some of its rows in column {labels_column!r}", field=labels_column)

    content = CONTENT_COLUMN[modality]
    splits = {name: samples.loc[samples["split"] == name, ["id", "labels", content]].reset_index(drop=True) for name in SPLITS}
    root = path.parent
    info = provenance(
        dataset or Path(out).name, FORMAT, root, seed, [path],
        family=family,
        columns={"input": input_column, "labels": labels_column, "split": split_column, "id": id_column},
        separator=separator,
        delimiter=DELIMITER_NAMES.get(delimiter, delimiter),
        split_policy=split_policy(split_column, fractions, seed),
        fractions=None if split_column else list(fractions),
        rows=len(samples),
        options={"separator_check": separator_check, **({"verify_images": verify_images} if modality == "image" else {})},
    )  # fmt: skip
    return write_dataset(out, splits, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-csv --path FILE --out DIR --input-column COL --labels-column COL [options]`."""
    args = cli.parse_args("prepare-csv", argv)
    stats = prepare(
        args.path, args.out, args.input_column, args.labels_column,
        separator=args.separator, split_column=args.split_column, fractions=args.fractions, modality=args.modality,
        family=args.family, seed=args.seed, delimiter=args.delimiter, id_column=args.id_column, dataset=args.dataset,
        verify_images=args.verify_images, separator_check=args.separator_check, names=OptionNames.of_source(args.dataset or Path(args.out).name, args.from_config),
    )  # fmt: skip
    without = sum(stats["splits"][name]["samples_without_labels"] for name in SPLITS)
    print(f"prepare-csv: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} family={stats['family']} samples_without_labels={without}")
    return 0
