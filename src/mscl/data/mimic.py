"""MIMIC-III / MIMIC-IV discharge summaries -> cleaned manifests for the full and top-50 settings.

`python -m mscl prepare-mimic --version {mimic3,mimic4_icd9,mimic4_icd10} --root RAW_ROOT
--splits DIR --out-full DIR --out-50 DIR [--label-space train|union] [--chunk-rows N]`

Rules (MIMIC-III follows CAML, Mullenbach et al. 2018; MIMIC-IV follows Nguyen et al. 2023):
- notes: keep discharge summaries (MIMIC-III CATEGORY "Discharge summary", reports and
  addenda; MIMIC-IV note_type "DS"); all notes of one admission are joined by a space in
  date order (MIMIC-III CHARTDATE then ROW_ID; MIMIC-IV charttime, note_seq, note_id);
- text: tokens of regex `\\w+`, purely numeric tokens dropped, lowercased, single spaces;
- codes: read as strings and checked against the shape of their table and ICD version (a code
  re-saved as a number, `0066` -> `66`, is refused); ICD-9 dotted (diagnoses after 3
  characters, after 4 for E codes; procedures after 2; only if longer), ICD-10 kept undotted;
  deduplicated and sorted per admission; diagnoses and procedures share one label space;
- splits: the fixed public HADM_ID lists (`fetch-mimic-splits`); the 50 setting keeps the
  labels in the fixed top-50 list and drops admissions left with none;
- every dropped row or admission is counted in stats.json `info["dropped"]`.

The note file (several GB for MIMIC-IV) is streamed: chunks are cleaned and spilled to a
temporary SQLite database beside the output, then read back admission by admission in sort
order and appended to the split files, so memory does not grow with the note file. Note text
never appears in logs or errors: those name the file, data row, column and fix.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import shutil
import sqlite3
import zlib
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd
from tqdm import tqdm

from mscl import cli
from mscl.defaults import (
    MIMIC_CHUNK_ROWS as DEFAULT_CHUNK_ROWS,
    MIMIC_LABEL_SPACES as LABEL_SPACES,
)
from mscl.data.manifest import SPLITS, ManifestWriter
from mscl.data.mimic_splits import VERSIONS, load_split_lists
from mscl.errors import InputError
from mscl.io import sha256_file, staging_folder

log = logging.getLogger(__name__)

# A code row is ~50 bytes against ~2-10 KB for a note, so code files are read in chunks this
# many times larger (100k rows at the default: a few MB).
CODE_ROWS_PER_NOTE_ROW = 20
FLUSH_ROWS = 1_000  # admissions buffered per output split before a parquet row group is written
FLUSH_CHARS = 16 * 2**20  # ... or this many characters of text (16 Mi characters), whichever first
# Skipped rows, counted in stats.json "dropped" (always present, zero or not).
CODE_ROW_COUNTS = ("code_rows_without_hadm_id", "code_rows_other_icd_version", "code_rows_without_code")
NOTE_COUNTS = (
    "non_discharge_notes",
    "discharge_notes_without_hadm_id",
    "discharge_notes_of_unlisted_admissions",
    "discharge_notes_empty_after_cleaning",
    "discharge_notes_used",
)
TOKEN = re.compile(r"\w+")
HEADER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")  # what a real column name looks like
FIX_RAW = "use the unmodified CSV export of the MIMIC release (PhysioNet), .csv or .csv.gz"
FIX_NUMBERS = (
    "re-export the file keeping codes and IDs as text (pandas: read_csv(..., dtype=str)); "
    "codes saved as numbers lose leading zeros and gain '.0'"
)


@dataclass(frozen=True)
class NoteColumns:
    """Where the note file lives under the root and which columns it uses."""

    stem: str  # path under the root without .csv / .csv.gz
    hadm: str
    category: str
    keep: str  # category value of discharge summaries
    text: str
    date: str  # first sort key (ISO date or date-time string)
    sequence: str  # second sort key (integer)
    tiebreak: str | None  # third sort key (string), if the release has one

    def columns(self) -> list[str]:
        names = [self.hadm, self.category, self.date, self.sequence, self.tiebreak, self.text]
        return [name for name in names if name is not None]


@dataclass(frozen=True)
class CodeColumns:
    """One code file (diagnoses or procedures) and its columns."""

    stem: str
    hadm: str
    code: str
    kind: str  # "diagnosis" or "procedure": decides the dot position of ICD-9 codes
    version: str | None  # icd_version column (MIMIC-IV) or None (MIMIC-III is ICD-9 only)

    def columns(self) -> list[str]:
        return [name for name in (self.hadm, self.code, self.version) if name is not None]


@dataclass(frozen=True)
class Release:
    notes: NoteColumns
    codes: tuple[CodeColumns, ...]
    icd_version: str  # "9" or "10": which code rows to keep and how to format them
    semantics: str


MIMIC3 = Release(
    notes=NoteColumns("NOTEEVENTS", "HADM_ID", "CATEGORY", "Discharge summary", "TEXT", "CHARTDATE", "ROW_ID", None),
    codes=(
        CodeColumns("DIAGNOSES_ICD", "HADM_ID", "ICD9_CODE", "diagnosis", None),
        CodeColumns("PROCEDURES_ICD", "HADM_ID", "ICD9_CODE", "procedure", None),
    ),
    icd_version="9",
    semantics="CAML (Mullenbach et al. 2018)",
)
_MIMIC4_NOTES = NoteColumns("note/discharge", "hadm_id", "note_type", "DS", "text", "charttime", "note_seq", "note_id")


def _mimic4(icd_version: str) -> Release:
    return Release(
        notes=_MIMIC4_NOTES,
        codes=(
            CodeColumns("hosp/diagnoses_icd", "hadm_id", "icd_code", "diagnosis", "icd_version"),
            CodeColumns("hosp/procedures_icd", "hadm_id", "icd_code", "procedure", "icd_version"),
        ),
        icd_version=icd_version,
        semantics="Nguyen et al. 2023 (MIMIC-IV-ICD)",
    )


RELEASES: dict[str, Release] = {"mimic3": MIMIC3, "mimic4_icd9": _mimic4("9"), "mimic4_icd10": _mimic4("10")}


# ---------------------------------------------------------------------------------------------
# Pure rules


def clean_text(text: str) -> str:
    """Tokens of `\\w+` without purely numeric ones, lowercased, joined by single spaces."""
    return " ".join(token for token in TOKEN.findall(text) if not token.isnumeric()).lower()


def dot_diagnosis(code: str) -> str:
    """ICD-9-CM diagnosis: dot after 3 characters (4 for E codes), only if the code is longer."""
    split_at = 4 if code.startswith("E") else 3
    return f"{code[:split_at]}.{code[split_at:]}" if len(code) > split_at else code


def dot_procedure(code: str) -> str:
    """ICD-9-CM procedure: dot after 2 characters, only if the code is longer."""
    return f"{code[:2]}.{code[2:]}" if len(code) > 2 else code


def format_code(code: str, kind: str, icd_version: str) -> str:
    """Label name of a raw code: ICD-9 dotted by kind, ICD-10 unchanged."""
    if icd_version == "10":
        return code
    return dot_diagnosis(code) if kind == "diagnosis" else dot_procedure(code)


def admission_label_sets(codes: Mapping[int, Sequence[str]], keep: set[str] | None) -> dict[int, tuple[str, ...]]:
    """Sorted, deduplicated labels per admission, restricted to `keep` if given; empty sets dropped."""
    result = {}
    for hadm, labels in codes.items():
        kept = tuple(sorted({label for label in labels if keep is None or label in keep}))
        if kept:
            result[hadm] = kept
    return result


# ---------------------------------------------------------------------------------------------
# Reading raw files


def find_raw_file(root: Path, stem: str) -> Path:
    """`<root>/<stem>.csv`, else `<root>/<stem>.csv.gz`; an InputError naming both if neither exists."""
    candidates = [root / f"{stem}.csv", root / f"{stem}.csv.gz"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise InputError(
        candidates[0],
        f"raw file not found: looked for {candidates[0].name} and {candidates[1].name} in {candidates[0].parent}",
        f"pass --root the folder of the MIMIC release holding {stem}.csv or {stem}.csv.gz",
        field="--root",
    )


def check_columns(path: Path, needed: Sequence[str]) -> None:
    """Raise unless the CSV header holds every needed column (names are case-sensitive)."""
    try:
        header = list(pd.read_csv(path, nrows=0, dtype=str).columns)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, EOFError, OSError) as error:
        raise InputError(path, f"cannot read the CSV header ({type(error).__name__})", FIX_RAW) from None
    missing = [name for name in needed if name not in header]
    if missing:
        # Without its header row, pandas takes the first record (note text included) as the
        # column names: quote the header only if every name looks like a column name (PHI).
        if all(HEADER_NAME.fullmatch(name) for name in header):
            found = f"the header has {header}"
        else:
            found = f"the first line is not a header ({len(header)} fields; is the header row missing?)"
        raise InputError(path, f"missing column(s) {missing}; {found}", FIX_RAW, field=missing[0])


def _parser_position(error: Exception) -> str:
    """'line N' / 'row N' from a pandas parser message; the message itself is not repeated (PHI)."""
    where = re.findall(r"(?:line|row) \d+", str(error))
    return f" near {where[0]}" if where else ""


def read_chunks(path: Path, columns: Sequence[str], chunk_rows: int) -> Iterator[pd.DataFrame]:
    """Stream a CSV as string chunks (empty fields are ""); the index counts data rows from 0."""
    try:
        with pd.read_csv(path, usecols=list(columns), dtype=str, na_filter=False, chunksize=chunk_rows) as reader:
            yield from reader
    except (pd.errors.ParserError, UnicodeDecodeError, EOFError, OSError, zlib.error) as error:
        raise InputError(path, f"unreadable CSV ({type(error).__name__}{_parser_position(error)})", FIX_RAW) from None


def _first_row(mask: pd.Series) -> int:
    """1-based data row number (header excluded) of the first True in `mask`."""
    return int(mask.idxmax()) + 1


def parse_hadm_ids(values: pd.Series, path: Path, column: str) -> tuple[pd.Series, pd.Series]:
    """(empty mask, int64 ids with 0 where empty); a non-integer ID raises without showing it."""
    stripped = values.str.strip()
    empty = stripped == ""
    bad = ~empty & ~stripped.str.fullmatch(r"\d+")
    if bad.any():
        looks_like_float = stripped[bad].str.fullmatch(r"\d+\.\d*").any()
        raise InputError(
            path,
            f"{column} at data row {_first_row(bad)} is not an integer"
            + (" (it has a decimal point: saved as a number?)" if looks_like_float else ""),
            FIX_NUMBERS if looks_like_float else FIX_RAW,
            field=column,
        )
    return empty, stripped.where(~empty, "0").astype("int64")


def parse_sequence(values: pd.Series, path: Path, column: str) -> pd.Series:
    """Integer sort key column (ROW_ID / note_seq); an empty or non-integer value raises."""
    stripped = values.str.strip()
    bad = ~stripped.str.fullmatch(r"\d+")
    if bad.any():
        raise InputError(path, f"{column} at data row {_first_row(bad)} is not an integer", FIX_RAW, field=column)
    return stripped.astype("int64")


# A float column writes each code as a whole number with a decimal point ('4019.0', '389.0',
# '4019.') or in scientific notation ('4.019e3'). An exponent counts only after a decimal point:
# real ICD-10-PCS codes such as 02703E6 are digits, an E and digits.
INTEGER_AS_FLOAT = r"\d+\.0*(?:[eE][+-]?\d+)?|\d*\.\d*[eE][+-]?\d+"


def check_code_strings(codes: pd.Series, path: Path, column: str) -> None:
    """Raise if raw codes look saved as numbers ('4019.0', '4.019e3') or already dotted ('401.9').

    Both have a dot. A file of floats writes whole numbers, so its dotted values all end in
    '.0'; a value such as '401.9' or 'V58.61' (or a letter before the dot) comes from an
    already dotted file. A lone '401.0' could be either: when no value of the chunk settles it,
    it is reported as a number.
    """
    with_dot = codes.str.contains(".", regex=False)
    if not with_dot.any():
        return
    dotted = with_dot & ~codes.str.fullmatch(INTEGER_AS_FLOAT)
    if dotted.any():
        raise InputError(
            path,
            f"code {codes[dotted].iloc[0][:12]!r} at data row {_first_row(dotted)} is already dotted",
            "pass the raw, undotted code file of the release; dots are added here",
            field=column,
        )
    row = _first_row(with_dot)
    raise InputError(path, f"code {codes[with_dot].iloc[0][:12]!r} at data row {row} looks saved as a number", FIX_NUMBERS, field=column)


@dataclass(frozen=True)
class CodeShape:
    """What the raw (undotted) codes of one table and ICD version look like."""

    system: str  # the code system's name, for messages
    pattern: str  # full-match regex of a valid raw code
    described: str  # the pattern in words
    shortest_digits: int  # an all-digit code shorter than this lost leading zeros


# From the code systems' definitions: ICD-9-CM diagnoses are 3-5 digits, V + 2-4 digits or
# E + 3-4 digits; ICD-9-CM procedures 3-4 digits; ICD-10-CM diagnoses a letter, a digit and
# 1-5 letters or digits; ICD-10-PCS procedures exactly 7 letters or digits, never I or O.
CODE_SHAPES = {
    ("diagnosis", "9"): CodeShape("ICD-9-CM diagnosis", r"\d{3,5}|V\d{2,4}|E\d{3,4}", "3-5 digits, V and 2-4 digits, or E and 3-4 digits", 3),
    ("procedure", "9"): CodeShape("ICD-9-CM procedure", r"\d{3,4}", "3-4 digits", 3),
    ("diagnosis", "10"): CodeShape("ICD-10-CM diagnosis", r"[A-Z]\d[0-9A-Z]{1,5}", "a letter, a digit and 1-5 letters or digits", 3),
    ("procedure", "10"): CodeShape("ICD-10-PCS procedure", r"[0-9A-HJ-NP-Z]{7}", "7 letters or digits", 7),
}


def check_code_shapes(codes: pd.Series, path: Path, column: str, kind: str, icd_version: str) -> None:
    """Raise at the first code that cannot be a raw code of its table (`kind`) and ICD version.

    An all-digit code shorter than the shortest valid one ('66' for procedure 0066, '38' for
    diagnosis 038) is what a re-save through pandas or a spreadsheet leaves when it reads the
    codes as numbers and drops their leading zeros. A dropped zero that leaves a valid length
    ('389' from 0389) cannot be told from a real code: docs/preprocessing.md says so.
    """
    shape = CODE_SHAPES[kind, icd_version]
    bad = ~codes.str.fullmatch(shape.pattern)
    if not bad.any():
        return
    code = codes[bad].iloc[0]
    where = f"code {code[:12]!r} at data row {_first_row(bad)} is not a valid {shape.system} code ({shape.described})"
    if code.isdigit() and len(code) < shape.shortest_digits:
        raise InputError(path, f"{where}: it lost its leading zeros, as when the file is saved with codes read as numbers", FIX_NUMBERS, field=column)
    raise InputError(
        path, where, f"{FIX_RAW}; check that {path.name} is the {kind} table of ICD version {icd_version} that --version expects", field=column
    )


def check_icd_versions(versions: pd.Series, path: Path, column: str) -> None:
    """Raise at the first icd_version that is not 9 or 10, saying why it is not."""
    bad = ~versions.isin(["9", "10"])
    if not bad.any():
        return
    value, row = versions[bad].iloc[0], _first_row(bad)
    if value == "":
        raise InputError(path, f"{column} at data row {row} is empty; every code row of the release has 9 or 10", FIX_RAW, field=column)
    if re.fullmatch(r"(?:9|10)\.0*", value):
        raise InputError(path, f"{column} at data row {row} is {value[:12]!r}: saved as a number", FIX_NUMBERS, field=column)
    raise InputError(path, f"{column} at data row {row} is {value[:12]!r}, not 9 or 10", FIX_RAW, field=column)


def read_codes(
    release: Release, files: Mapping[str, Path], listed: set[int], chunk_rows: int
) -> tuple[dict[int, list[str]], Counter]:
    """Label names per listed admission (with repeats) and the counts of skipped code rows."""
    codes: dict[int, list[str]] = {}
    # (kind, raw code) -> label name; reusing one str object per distinct code keeps the
    # per-admission lists small (memory grows with admissions, not with code rows).
    names: dict[tuple[str, str], str] = {}
    counts: Counter = Counter(dict.fromkeys(CODE_ROW_COUNTS, 0))
    for spec in release.codes:
        path = files[spec.stem]
        for chunk in tqdm(read_chunks(path, spec.columns(), chunk_rows), desc=path.name, unit="chunk", disable=None):
            empty_hadm, hadm = parse_hadm_ids(chunk[spec.hadm], path, spec.hadm)
            counts["code_rows_without_hadm_id"] += int(empty_hadm.sum())
            keep = ~empty_hadm
            if spec.version is not None:
                version = chunk[spec.version].str.strip()
                check_icd_versions(version[keep], path, spec.version)
                other = keep & (version != release.icd_version)
                counts["code_rows_other_icd_version"] += int(other.sum())
                keep &= ~other
            code = chunk[spec.code].str.strip()
            no_code = keep & (code == "")
            counts["code_rows_without_code"] += int(no_code.sum())
            keep &= ~no_code
            check_code_strings(code[keep], path, spec.code)
            check_code_shapes(code[keep], path, spec.code, spec.kind, release.icd_version)
            keep &= hadm.isin(listed)
            for admission, raw in zip(hadm[keep].tolist(), code[keep].tolist()):
                key = (spec.kind, raw)
                name = names.get(key) or names.setdefault(key, format_code(raw, spec.kind, release.icd_version))
                codes.setdefault(admission, []).append(name)
    return codes, counts


# ---------------------------------------------------------------------------------------------
# Streaming the notes through a temporary SQLite database


def open_spill(directory: Path) -> sqlite3.Connection:
    """A scratch database for cleaned notes; no journal or fsync (it is thrown away)."""
    db = sqlite3.connect(directory / "notes.sqlite")
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("CREATE TABLE notes (hadm_id INTEGER, date TEXT, sequence INTEGER, tiebreak TEXT, text TEXT)")
    return db


@dataclass
class NoteScan:
    """What streaming the note file found (admission sets hold listed admissions only)."""

    counts: Counter = field(default_factory=lambda: Counter(dict.fromkeys(NOTE_COUNTS, 0)))
    unlisted_admissions: set[int] = field(default_factory=set)
    with_notes: set[int] = field(default_factory=set)
    with_text: set[int] = field(default_factory=set)


def spill_notes(path: Path, spec: NoteColumns, listed: set[int], chunk_rows: int, db: sqlite3.Connection) -> NoteScan:
    """Clean the discharge summaries of listed admissions chunk by chunk into `db`."""
    scan = NoteScan()
    for chunk in tqdm(read_chunks(path, spec.columns(), chunk_rows), desc=path.name, unit="chunk", disable=None):
        discharge = chunk[spec.category].str.strip() == spec.keep
        scan.counts["non_discharge_notes"] += int((~discharge).sum())
        chunk = chunk[discharge]
        empty, hadm = parse_hadm_ids(chunk[spec.hadm], path, spec.hadm)
        scan.counts["discharge_notes_without_hadm_id"] += int(empty.sum())
        in_list = ~empty & hadm.isin(listed)
        scan.unlisted_admissions.update(hadm[~empty & ~in_list].tolist())
        scan.counts["discharge_notes_of_unlisted_admissions"] += int((~empty & ~in_list).sum())
        chunk, hadm = chunk[in_list], hadm[in_list]
        scan.with_notes.update(hadm.tolist())
        sequence = parse_sequence(chunk[spec.sequence], path, spec.sequence)
        tiebreak = chunk[spec.tiebreak].str.strip() if spec.tiebreak else pd.Series("", index=chunk.index)
        cleaned = chunk[spec.text].map(clean_text)
        nonempty = cleaned != ""
        scan.counts["discharge_notes_empty_after_cleaning"] += int((~nonempty).sum())
        scan.counts["discharge_notes_used"] += int(nonempty.sum())
        scan.with_text.update(hadm[nonempty].tolist())
        rows = zip(
            hadm[nonempty].tolist(),
            chunk.loc[nonempty, spec.date].str.strip().tolist(),
            sequence[nonempty].tolist(),
            tiebreak[nonempty].tolist(),
            cleaned[nonempty].tolist(),
        )
        db.executemany("INSERT INTO notes VALUES (?, ?, ?, ?, ?)", rows)
        db.commit()
    db.execute("CREATE INDEX notes_order ON notes (hadm_id, date, sequence, tiebreak)")
    db.commit()
    return scan


def check_discharge_rows(scan: NoteScan, path: Path, spec: NoteColumns) -> None:
    """Fail when not one row of the note file is a discharge summary: another note file (such
    as MIMIC-IV-Note's radiology.csv.gz) stands in its place. Checked before the splits are
    planned, so the message names the file instead of reporting empty splits."""
    discharge_rows = sum(scan.counts[key] for key in NOTE_COUNTS if key != "non_discharge_notes")
    if discharge_rows == 0:
        raise InputError(
            path,
            f"no row is a discharge summary: {spec.category} is never {spec.keep!r} in its {scan.counts['non_discharge_notes']} rows",
            f"put the release's discharge notes at {spec.stem}.csv or {spec.stem}.csv.gz under --root "
            "(MIMIC-III: NOTEEVENTS; MIMIC-IV-Note: note/discharge.csv.gz, not note/radiology.csv.gz)",
            field=spec.category,
        )


def admission_texts(db: sqlite3.Connection) -> Iterator[tuple[int, str]]:
    """(hadm_id, its notes joined by a space in note order), ascending hadm_id, one at a time."""
    rows = db.execute("SELECT hadm_id, text FROM notes ORDER BY hadm_id, date, sequence, tiebreak")
    for hadm, group in itertools.groupby(rows, key=itemgetter(0)):
        yield hadm, " ".join(text for _, text in group)


# ---------------------------------------------------------------------------------------------
# Deciding what each setting keeps (ids and labels only, no text)


@dataclass
class SettingPlan:
    """One output folder: which admission goes to which split with which labels."""

    name: str  # "full" or "50"
    out_dir: Path
    split_of: dict[int, str]
    labels: dict[int, tuple[str, ...]]
    vocabulary: list[str]
    info: dict[str, Any]


def plan_setting(
    name: str,
    out_dir: Path,
    lists: Mapping[str, set[int]],
    codes: Mapping[int, tuple[str, ...]],
    scan: NoteScan,
    top50: Sequence[str] | None,
    label_space: str,
) -> SettingPlan:
    """Assign the admissions of one setting's lists and count every one that is dropped.

    `codes` holds the non-empty, sorted label set of every listed admission that has codes.
    """
    listed = set().union(*lists.values())
    label_sets = codes if top50 is None else admission_label_sets(codes, set(top50))
    candidates = listed & scan.with_text
    with_codes = {hadm for hadm in candidates if hadm in codes}
    kept = {hadm for hadm in with_codes if hadm in label_sets}
    split_of = {hadm: split for split in SPLITS for hadm in lists[split] if hadm in kept}
    dropped = {
        **{key: int(value) for key, value in sorted(scan.counts.items()) if key != "discharge_notes_used"},
        "admissions_in_no_split_list": len(scan.unlisted_admissions) + len(scan.with_notes - listed),
        "listed_admissions_without_discharge_note": len(listed - scan.with_notes),
        "listed_admissions_with_empty_text": len((listed & scan.with_notes) - scan.with_text),
        "listed_admissions_without_codes": len(candidates - with_codes),
    }
    if top50 is not None:
        dropped["admissions_without_top50_label"] = len(with_codes - kept)
        vocabulary = list(top50)
    else:
        space = kept if label_space == "union" else {hadm for hadm in kept if split_of[hadm] == "train"}
        vocabulary = sorted({label for hadm in space for label in label_sets[hadm]})
    info = {
        "setting": name,
        "listed_admissions": {split: len(lists[split]) for split in SPLITS},
        "label_space": "fixed top-50 list" if top50 is not None else label_space,
        "dropped": dropped,
    }
    return SettingPlan(name, out_dir, split_of, {hadm: label_sets[hadm] for hadm in kept}, vocabulary, info)


def check_not_empty(plan: SettingPlan, root: Path, version: str) -> None:
    """Fail before writing anything if a split of this setting would be empty."""
    present = Counter(plan.split_of.values())
    for split in SPLITS:
        if present[split] == 0:
            raise InputError(
                root,
                f"no admission of the {plan.name} {split} split has a discharge summary and codes",
                f"check that --root holds the complete raw files and --splits the lists of --version {version}",
                field=f"{plan.name} {split}",
            )


# ---------------------------------------------------------------------------------------------
# Writing


@dataclass
class RowBuffer:
    """Rows of one output split waiting to become a parquet row group."""

    ids: list[str] = field(default_factory=list)
    labels: list[list[str]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    chars: int = 0

    def add(self, hadm: int, labels: Sequence[str], text: str) -> None:
        self.ids.append(str(hadm))
        self.labels.append(list(labels))
        self.texts.append(text)
        self.chars += len(text)

    def full(self) -> bool:
        return len(self.ids) >= FLUSH_ROWS or self.chars >= FLUSH_CHARS

    def take(self) -> pd.DataFrame:
        frame = pd.DataFrame({"id": self.ids, "labels": self.labels, "text": self.texts})
        self.ids, self.labels, self.texts, self.chars = [], [], [], 0
        return frame


def write_settings(db: sqlite3.Connection, plans: Sequence[SettingPlan], admissions: int) -> dict[str, dict[str, Any]]:
    """Stream admissions in hadm_id order into every setting's folder; return stats per setting."""
    with contextlib.ExitStack() as stack:
        writers = {
            plan.name: stack.enter_context(ManifestWriter(plan.out_dir, labels=plan.vocabulary, info=plan.info))
            for plan in plans
        }
        buffers = {(plan.name, split): RowBuffer() for plan in plans for split in SPLITS}
        progress = tqdm(admission_texts(db), total=admissions, desc="admissions", unit="adm", disable=None)
        for hadm, text in progress:
            for plan in plans:
                split = plan.split_of.get(hadm)
                if split is None:
                    continue
                buffer = buffers[plan.name, split]
                buffer.add(hadm, plan.labels[hadm], text)
                if buffer.full():
                    writers[plan.name].add(split, buffer.take())
        for (name, split), buffer in buffers.items():
            if buffer.ids:
                writers[name].add(split, buffer.take())
        return {plan.name: writers[plan.name].close() for plan in plans}


# ---------------------------------------------------------------------------------------------
# The whole preparation


def locate_inputs(release: Release, root: Path) -> dict[str, Path]:
    """Raw file per stem, each with its header checked."""
    if not root.is_dir():
        raise InputError(root, "raw MIMIC root folder not found", "pass --root the folder of the downloaded release", field="--root")
    files = {release.notes.stem: find_raw_file(root, release.notes.stem)}
    files.update({spec.stem: find_raw_file(root, spec.stem) for spec in release.codes})
    check_columns(files[release.notes.stem], release.notes.columns())
    for spec in release.codes:
        check_columns(files[spec.stem], spec.columns())
    return files


def prepare_mimic(
    version: str,
    root: str | Path,
    splits_dir: str | Path,
    out_full: str | Path,
    out_50: str | Path,
    label_space: str = "train",
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    code_chunk_rows: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Prepare both settings of one MIMIC version in one pass; return {"full": stats, "50": stats}.

    `chunk_rows` note rows are held in memory at a time; code files are read
    `code_chunk_rows` rows at a time (default CODE_ROWS_PER_NOTE_ROW * chunk_rows).
    """
    if version not in RELEASES:
        raise InputError(None, f"unknown version {version!r}", f"use one of {list(VERSIONS)}", field="--version")
    if label_space not in LABEL_SPACES:
        raise InputError(None, f"unknown label space {label_space!r}", f"use one of {list(LABEL_SPACES)}", field="--label-space")
    if chunk_rows < 1:
        raise InputError(None, f"chunk size {chunk_rows} is not positive", "pass --chunk-rows N with N >= 1", field="--chunk-rows")
    root, out_full, out_50 = Path(root), Path(out_full), Path(out_50)
    if out_full.resolve() == out_50.resolve():
        raise InputError(out_full, "--out-full and --out-50 are the same folder", "give the two settings different folders", field="--out-50")
    release = RELEASES[version]
    files = locate_inputs(release, root)
    lists = load_split_lists(splits_dir)
    listed = set().union(*lists["full"].values(), *lists["50"].values())

    base_info = provenance(version, release, root, files, splits_dir)
    code_lists, code_counts = read_codes(release, files, listed, code_chunk_rows or CODE_ROWS_PER_NOTE_ROW * chunk_rows)
    codes = admission_label_sets(code_lists, None)
    del code_lists  # free the per-row lists before the notes are streamed
    scratch = staging_folder(out_full)  # the notes' spill database, removed at the end
    try:
        db = open_spill(scratch)
        try:
            scan = spill_notes(files[release.notes.stem], release.notes, listed, chunk_rows, db)
            check_discharge_rows(scan, files[release.notes.stem], release.notes)
            scan.counts.update(code_counts)
            plans = [
                plan_setting("full", out_full, lists["full"], codes, scan, None, label_space),
                plan_setting("50", out_50, lists["50"], codes, scan, lists["top50"], label_space),
            ]
            for plan in plans:
                check_not_empty(plan, root, version)
                plan.info = {**base_info, "dataset": f"{version}_{plan.name}", **plan.info}
                log.info("%s %s: %d labels (%s)", version, plan.name, len(plan.vocabulary), plan.info["label_space"])
            stats = write_settings(db, plans, len(scan.with_text))
        finally:
            db.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name, setting_stats in stats.items():
        log.info("%s %s: counts %s, dropped %s", version, name, setting_stats["counts"], setting_stats["dropped"])
    return stats


def provenance(version: str, release: Release, root: Path, files: Mapping[str, Path], splits_dir: str | Path) -> dict[str, Any]:
    """Provenance fields of stats.json shared by both settings: sources with sha256, rules, lists."""
    return {
        "format": f"{version} raw CSV ({release.semantics} semantics)",
        "root": str(root.resolve()),
        "sources": {path.relative_to(root).as_posix(): sha256_file(path) for path in files.values()},
        "split_policy": f"fixed public HADM_ID lists from {Path(splits_dir).resolve()}",
        "text_rule": "discharge summaries joined in date order; tokens \\w+, numeric dropped, lowercased",
        "icd_version": release.icd_version,
    }


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("prepare-mimic", argv)
    logging.basicConfig(level=logging.INFO, format="prepare-mimic: %(message)s")
    prepare_mimic(args.version, args.root, args.splits, args.out_full, args.out_50, args.label_space, args.chunk_rows)
    return 0
