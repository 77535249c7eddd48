"""MIMIC-III / MIMIC-IV preparation against hand-built raw files with hand-written expectations.

Fixture layout: tests/fixtures/mimic3/{raw,splits}, tests/fixtures/mimic4/{raw,splits_icd9,
splits_icd10}. Every expected text and label list below was derived by hand from those files
with the rules of GUIDE section 5 (see the comments next to each value).
"""

from __future__ import annotations

import gzip
import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mscl.data import mimic
from mscl.data.manifest import SPLITS, ManifestWriter, read_labels, read_split, read_stats
from mscl.errors import InputError

# --------------------------------------------------------------------------------------------
# Hand-written expectations: MIMIC-III fixture

# 100001: three discharge notes ordered by CHARTDATE (01-09 addendum, 01-10 report, 01-12
# addendum; ROW_IDs 30, 11, 5 show that the date wins over ROW_ID); the nursing note is dropped.
M3_TEXT_100001 = (
    "early addendum written before discharge "
    "admission date discharge date service medicine history y o man with htn dm2 and chest pain "
    "x ray clear pt s bp given 5mg lorazepam 3rd dose "
    "addendum patient s inr follow up in weeks"
)
M3_FULL = {
    "train": {
        # 4019 (twice) -> 401.9, V5861 -> V58.61, E8790 -> E879.0; proc 3893 -> 38.93, 0066 -> 00.66
        "100001": (M3_TEXT_100001, ["00.66", "38.93", "401.9", "E879.0", "V58.61"]),
        # the "12 / 34" addendum cleans to nothing and is left out; 51881 -> 518.81, proc 9604 -> 96.04
        "100004": ("respiratory failure intubated on day", ["518.81", "96.04"]),
        "100005": ("normal newborn kg", ["V30.00"]),
    },
    # 0389 -> 038.9 (leading zero kept); 250 and E849 are too short to dot; proc 966 -> 96.6
    "val": {"100002": ("sepsis cultures positive x2 discharged home", ["038.9", "250", "96.6", "E849"])},
    "test": {"100003": ("chf exacerbation ef diuresed_well", ["401.9", "428.0"])},
}
M3_50 = {
    "train": {"100001": (M3_TEXT_100001, ["38.93", "401.9"])},
    "val": {"100002": ("sepsis cultures positive x2 discharged home", ["038.9"])},
    "test": {"100003": ("chf exacerbation ef diuresed_well", ["401.9", "428.0"])},
}
M3_TOP = ["401.9", "038.9", "428.0", "38.93"]
M3_TRAIN_SPACE = ["00.66", "38.93", "401.9", "518.81", "96.04", "E879.0", "V30.00", "V58.61"]
M3_UNION_SPACE = sorted(M3_TRAIN_SPACE + ["038.9", "250", "96.6", "E849", "428.0"])
# Counts shared by both settings (file-level).
M3_FILE_COUNTS = {
    "non_discharge_notes": 2,  # nursing (ROW_ID 40) and radiology (14)
    "discharge_notes_without_hadm_id": 1,  # ROW_ID 19
    "discharge_notes_of_unlisted_admissions": 1,  # 100008
    "discharge_notes_empty_after_cleaning": 2,  # ROW_IDs 20 and 21
    "code_rows_without_code": 1,  # diagnosis row 15
    "code_rows_without_hadm_id": 1,  # procedure row 5
    "code_rows_other_icd_version": 0,
}
M3_FULL_DROPPED = {
    **M3_FILE_COUNTS,
    "admissions_in_no_split_list": 1,  # 100008
    "listed_admissions_without_discharge_note": 1,  # 100006
    "listed_admissions_with_empty_text": 1,  # 100009
    "listed_admissions_without_codes": 1,  # 100007
}
M3_50_DROPPED = {
    **M3_FILE_COUNTS,
    # 100008 plus the full-only admissions with notes: 100004, 100007, 100009
    "admissions_in_no_split_list": 4,
    "listed_admissions_without_discharge_note": 0,
    "listed_admissions_with_empty_text": 0,
    "listed_admissions_without_codes": 0,
    "admissions_without_top50_label": 1,  # 100005 (V30.00 only)
}

# --------------------------------------------------------------------------------------------
# Hand-written expectations: MIMIC-IV fixture

# 20000001: same charttime, note_seq 9 before 10 (numeric, not text order); the AR note is dropped.
M4_TEXT_1 = "name ___ unit no ___ chief complaint fever icd era stay second part same time seq"
# 20000002: the 01-01 note (seq 5) precedes the 01-02 note (seq 3): charttime wins over note_seq.
M4_TEXT_2 = "earlier note hypertension type dm e11"
M4_ICD9_FULL = {
    "train": {
        "20000001": (M4_TEXT_1, ["00.66", "401.9", "V58.61"]),
        "20000007": ("mixed coding stay", ["428.0"]),  # its ICD-10 code I5022 is ignored
    },
    "val": {"20000003": ("val icd9 stay", ["038.9"])},
    "test": {"20000004": ("test icd9 stay", ["38.93", "E879.0"])},
}
M4_ICD9_50 = {
    "train": {"20000001": (M4_TEXT_1, ["401.9"])},
    "val": {"20000003": ("val icd9 stay", ["038.9"])},
    "test": {"20000004": ("test icd9 stay", ["E879.0"])},
}
M4_ICD10_FULL = {
    # ICD-10 stays undotted, E119 included (the E-code dot rule is ICD-9 only)
    "train": {
        "20000002": (M4_TEXT_2, ["02HV33Z", "E119", "I10", "Z87891"]),
        "20000007": ("mixed coding stay", ["I5022"]),
    },
    "val": {"20000005": ("val icd10 stay", ["I10"])},
    "test": {"20000006": ("test icd10 stay", ["E119"])},
}
M4_ICD10_50 = {
    "train": {"20000002": (M4_TEXT_2, ["E119", "I10"])},
    "val": {"20000005": ("val icd10 stay", ["I10"])},
    "test": {"20000006": ("test icd10 stay", ["E119"])},
}


# --------------------------------------------------------------------------------------------
# Helpers


def prepared(out_dir: Path) -> dict[str, dict[str, tuple[str, list[str]]]]:
    """{split: {id: (text, labels)}} of a prepared folder, ids in file order."""
    result = {}
    for split in SPLITS:
        frame = read_split(out_dir, split)
        result[split] = {row.id: (row.text, list(row.labels)) for row in frame.itertuples()}
    return result


def ids_in_order(out_dir: Path, split: str) -> list[str]:
    return list(read_split(out_dir, split)["id"])


def copy_tree(source: Path, dest: Path, gzip_csv: bool = False) -> Path:
    """Copy a raw fixture folder, optionally gzipping every .csv into .csv.gz."""
    for path in source.rglob("*"):
        if path.is_dir():
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if gzip_csv and path.suffix == ".csv":
            with open(path, "rb") as raw, gzip.open(f"{target}.gz", "wb") as packed:
                shutil.copyfileobj(raw, packed)
        else:
            shutil.copyfile(path, target)
    return dest


def run_mimic3(fixtures_dir: Path, tmp_path: Path, root: Path | None = None, **kwargs) -> tuple[dict, Path, Path]:
    out_full, out_50 = tmp_path / "out" / "full", tmp_path / "out" / "50"
    stats = mimic.prepare_mimic(
        "mimic3",
        root or fixtures_dir / "mimic3" / "raw",
        fixtures_dir / "mimic3" / "splits",
        out_full,
        out_50,
        **kwargs,
    )
    return stats, out_full, out_50


@pytest.fixture
def mimic3_run(fixtures_dir: Path, tmp_path: Path) -> tuple[dict, Path, Path]:
    return run_mimic3(fixtures_dir, tmp_path, chunk_rows=3)


# --------------------------------------------------------------------------------------------
# Pure rules


@pytest.mark.parametrize(
    ("raw", "dotted"),
    [("4019", "401.9"), ("V5861", "V58.61"), ("E8790", "E879.0"), ("0389", "038.9"), ("250", "250"), ("E849", "E849"), ("V10", "V10")],
)
def test_dot_diagnosis(raw: str, dotted: str) -> None:
    assert mimic.dot_diagnosis(raw) == dotted


@pytest.mark.parametrize(("raw", "dotted"), [("3893", "38.93"), ("0066", "00.66"), ("966", "96.6"), ("99", "99")])
def test_dot_procedure(raw: str, dotted: str) -> None:
    assert mimic.dot_procedure(raw) == dotted


def test_icd10_codes_stay_undotted() -> None:
    assert mimic.format_code("E119", "diagnosis", "10") == "E119"
    assert mimic.format_code("02HV33Z", "procedure", "10") == "02HV33Z"
    assert mimic.format_code("E119", "diagnosis", "9") == "E119"  # 4 characters: not longer than 4


def test_clean_text() -> None:
    text = 'BP 140/90, "Pt\'s" x-ray;\n1.5mg 3rd   Café ½ __a__'
    # 140, 90, 1 and ½ are numeric; 5mg and 3rd are not; \w keeps underscores and accents
    assert mimic.clean_text(text) == "bp pt s x ray 5mg 3rd café __a__"
    assert mimic.clean_text("12 / 34 [**2150-1-3**]") == ""


# --------------------------------------------------------------------------------------------
# MIMIC-III end to end


def test_mimic3_full_setting(mimic3_run) -> None:
    stats, out_full, _ = mimic3_run
    assert prepared(out_full) == M3_FULL
    assert read_labels(out_full) == M3_TRAIN_SPACE
    full = read_stats(out_full)
    assert full["counts"] == {"train": 3, "val": 1, "test": 1}
    assert full["num_labels"] == 8
    assert full["dropped"] == M3_FULL_DROPPED
    assert full["label_space"] == "train"
    assert full["listed_admissions"] == {"train": 4, "val": 2, "test": 2}
    # val: 038.9, 250, 96.6, E849 are not train codes; test: 428.0
    assert full["splits"]["val"]["out_of_vocabulary_occurrences"] == 4
    assert full["splits"]["test"]["out_of_vocabulary_occurrences"] == 1
    assert full["avg_labels"] == pytest.approx((5 + 2 + 1 + 4 + 2) / 5)
    assert stats["full"] == full


def test_mimic3_50_setting(mimic3_run) -> None:
    _, _, out_50 = mimic3_run
    assert prepared(out_50) == M3_50
    assert read_labels(out_50) == M3_TOP  # vocabulary keeps the list's order
    stats = read_stats(out_50)
    assert stats["dropped"] == M3_50_DROPPED
    assert stats["counts"] == {"train": 1, "val": 1, "test": 1}
    assert stats["dataset"] == "mimic3_50"


def test_mimic3_union_label_space(fixtures_dir: Path, tmp_path: Path) -> None:
    _, out_full, _ = run_mimic3(fixtures_dir, tmp_path, label_space="union")
    assert read_labels(out_full) == M3_UNION_SPACE
    assert len(M3_UNION_SPACE) == 13
    stats = read_stats(out_full)
    assert stats["splits"]["val"]["out_of_vocabulary_occurrences"] == 0
    assert prepared(out_full) == M3_FULL


def test_rows_are_sorted_by_admission_and_scratch_is_removed(mimic3_run) -> None:
    _, out_full, _ = mimic3_run
    assert ids_in_order(out_full, "train") == ["100001", "100004", "100005"]
    assert sorted(p.name for p in out_full.parent.iterdir()) == ["50", "full"]  # no scratch, no staging


def test_chunk_size_does_not_change_output(fixtures_dir: Path, tmp_path: Path) -> None:
    _, one_by_one, _ = run_mimic3(fixtures_dir, tmp_path / "a", chunk_rows=1, code_chunk_rows=2)
    _, all_at_once, _ = run_mimic3(fixtures_dir, tmp_path / "b", chunk_rows=1000)
    assert prepared(one_by_one) == prepared(all_at_once) == M3_FULL


def test_csv_and_csv_gz_give_identical_output(fixtures_dir: Path, tmp_path: Path) -> None:
    plain = copy_tree(fixtures_dir / "mimic3" / "raw", tmp_path / "plain")
    packed = copy_tree(fixtures_dir / "mimic3" / "raw", tmp_path / "packed", gzip_csv=True)
    assert sorted(p.name for p in packed.iterdir()) == ["DIAGNOSES_ICD.csv.gz", "NOTEEVENTS.csv.gz", "PROCEDURES_ICD.csv.gz"]
    _, full_a, fifty_a = run_mimic3(fixtures_dir, tmp_path / "a", root=plain)
    _, full_b, fifty_b = run_mimic3(fixtures_dir, tmp_path / "b", root=packed)
    for a, b in ((full_a, full_b), (fifty_a, fifty_b)):
        for split in SPLITS:
            pd.testing.assert_frame_equal(read_split(a, split), read_split(b, split))
        assert read_labels(a) == read_labels(b)
        skip = {"root", "sources"}
        stats_a, stats_b = read_stats(a), read_stats(b)
        assert {k: v for k, v in stats_a.items() if k not in skip} == {k: v for k, v in stats_b.items() if k not in skip}
    assert "NOTEEVENTS.csv.gz" in read_stats(full_b)["sources"]


def test_cli_writes_both_settings_and_logs_no_text(fixtures_dir: Path, tmp_path: Path, caplog) -> None:
    from mscl.__main__ import main

    caplog.set_level(logging.INFO)

    argv = [
        "prepare-mimic", "--version", "mimic3", "--root", str(fixtures_dir / "mimic3" / "raw"),
        "--splits", str(fixtures_dir / "mimic3" / "splits"), "--out-full", str(tmp_path / "full"),
        "--out-50", str(tmp_path / "50"), "--label-space", "union", "--chunk-rows", "2",
    ]  # fmt: skip
    assert main(argv) == 0
    assert read_labels(tmp_path / "full") == M3_UNION_SPACE
    assert prepared(tmp_path / "50") == M3_50
    assert "mimic3 full: 13 labels (union)" in caplog.text
    assert not any(word.lower() in caplog.text.lower() for word in NOTE_WORDS)


# --------------------------------------------------------------------------------------------
# MIMIC-IV end to end


@pytest.mark.parametrize(
    ("version", "splits", "full", "fifty", "other_version_rows", "unlisted_notes"),
    [
        # ICD-10 rows skipped: 6 diagnoses + 1 procedure; notes of 20000002 (2), 20000005, 20000006
        ("mimic4_icd9", "splits_icd9", M4_ICD9_FULL, M4_ICD9_50, 7, 4),
        # ICD-9 rows skipped: 5 diagnoses + 2 procedures; notes of 20000001 (2), 20000003, 20000004
        ("mimic4_icd10", "splits_icd10", M4_ICD10_FULL, M4_ICD10_50, 7, 4),
    ],
)
def test_mimic4_versions(fixtures_dir: Path, tmp_path: Path, version, splits, full, fifty, other_version_rows, unlisted_notes) -> None:
    root = copy_tree(fixtures_dir / "mimic4" / "raw", tmp_path / "raw", gzip_csv=True)
    stats = mimic.prepare_mimic(version, root, fixtures_dir / "mimic4" / splits, tmp_path / "full", tmp_path / "50", chunk_rows=2)
    assert prepared(tmp_path / "full") == full
    assert prepared(tmp_path / "50") == fifty
    dropped = stats["full"]["dropped"]
    assert dropped["non_discharge_notes"] == 1
    assert dropped["code_rows_other_icd_version"] == other_version_rows
    assert dropped["discharge_notes_of_unlisted_admissions"] == unlisted_notes
    assert dropped["admissions_in_no_split_list"] == 3
    assert stats["full"]["icd_version"] == ("9" if version == "mimic4_icd9" else "10")
    assert set(stats["full"]["sources"]) == {"note/discharge.csv.gz", "hosp/diagnoses_icd.csv.gz", "hosp/procedures_icd.csv.gz"}


# --------------------------------------------------------------------------------------------
# Bad input: clear InputError, nothing left behind, never any note text

# Every word of the fixture note texts that is not also a column name or common English.
NOTE_WORDS = ("lorazepam", "sepsis", "cardiomegaly", "newborn", "Orphan", "exacerbation", "Respiratory", "fever", "Hypertension")


def assert_clean_failure(error: InputError, tmp_path: Path, *fragments: str) -> None:
    """The message names what is expected, holds no note text, and no output was left."""
    message = str(error)
    for fragment in fragments:
        assert fragment in message, message
    for word in NOTE_WORDS:
        assert word.lower() not in message.lower(), message
    assert "Fix:" in message
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())


def broken_root(fixtures_dir: Path, tmp_path: Path, name: str, edit) -> Path:
    """A copy of the MIMIC-III raw fixture with `name` rewritten by `edit(text) -> text`."""
    root = copy_tree(fixtures_dir / "mimic3" / "raw", tmp_path / "raw")
    path = root / name
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return root


def test_missing_root(fixtures_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=tmp_path / "nowhere")
    assert_clean_failure(caught.value, tmp_path, "nowhere", "--root")


def test_missing_file_names_both_extensions(fixtures_dir: Path, tmp_path: Path) -> None:
    root = copy_tree(fixtures_dir / "mimic3" / "raw", tmp_path / "raw")
    (root / "PROCEDURES_ICD.csv").unlink()
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    assert_clean_failure(caught.value, tmp_path, "PROCEDURES_ICD.csv and PROCEDURES_ICD.csv.gz")


def test_missing_column(fixtures_dir: Path, tmp_path: Path) -> None:
    root = broken_root(fixtures_dir, tmp_path, "NOTEEVENTS.csv", lambda t: t.replace('"CATEGORY"', '"KIND"', 1))
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    assert_clean_failure(caught.value, tmp_path, "NOTEEVENTS.csv", "CATEGORY")
    assert caught.value.field == "CATEGORY"


@pytest.mark.parametrize(
    ("original", "replacement", "row", "problem"),
    [
        ('"4280"', "4280.0", 8, "saved as a number"),  # the ".0" suffix of a float column
        ('"0389"', "389.0", 5, "saved as a number"),  # leading zero lost and ".0" gained
        ('"V5861"', '"V58.61"', 2, "already dotted"),  # a pre-processed file, not the raw one
    ],
)
def test_codes_saved_as_numbers(fixtures_dir: Path, tmp_path: Path, original: str, replacement: str, row: int, problem: str) -> None:
    root = broken_root(fixtures_dir, tmp_path, "DIAGNOSES_ICD.csv", lambda t: t.replace(original, replacement))
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    assert_clean_failure(caught.value, tmp_path, "DIAGNOSES_ICD.csv", "ICD9_CODE", f"data row {row}", problem)


def test_hadm_id_saved_as_float(fixtures_dir: Path, tmp_path: Path) -> None:
    root = broken_root(fixtures_dir, tmp_path, "NOTEEVENTS.csv", lambda t: t.replace(",100003,", ",100003.0,", 1))
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    # data row 6 is ROW_ID 13, the first note of 100003 (row 5 holds the multi-line 100002 note)
    assert_clean_failure(caught.value, tmp_path, "NOTEEVENTS.csv", "HADM_ID", "data row 6", "saved as a number")


def test_headerless_note_file_is_not_quoted(fixtures_dir: Path, tmp_path: Path) -> None:
    """Without the header row pandas reads the first note as column names; they must not be echoed."""
    root = broken_root(fixtures_dir, tmp_path, "NOTEEVENTS.csv", lambda t: t.split("\n", 1)[1])
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    assert_clean_failure(caught.value, tmp_path, "NOTEEVENTS.csv", "header row missing")
    for fragment in ("Admission Date", "MEDICINE", "Discharge summary"):
        assert fragment not in str(caught.value)

def test_hadm_id_shifted_text_is_not_echoed(fixtures_dir: Path, tmp_path: Path) -> None:
    """A malformed HADM_ID holding note-like words must not be quoted in the error."""
    root = broken_root(fixtures_dir, tmp_path, "NOTEEVENTS.csv", lambda t: t.replace(",100005,", ",newborn lorazepam,", 1))
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    assert_clean_failure(caught.value, tmp_path, "HADM_ID", "data row 10")


def test_empty_result(fixtures_dir: Path, tmp_path: Path) -> None:
    """The MIMIC-IV ICD-9 lists against the MIMIC-III files match no admission."""
    with pytest.raises(InputError) as caught:
        mimic.prepare_mimic(
            "mimic3", fixtures_dir / "mimic3" / "raw", fixtures_dir / "mimic4" / "splits_icd9", tmp_path / "out" / "full", tmp_path / "out" / "50"
        )
    assert_clean_failure(caught.value, tmp_path, "full train", "--splits")


def test_missing_split_lists(fixtures_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        mimic.prepare_mimic("mimic3", fixtures_dir / "mimic3" / "raw", tmp_path / "no-lists", tmp_path / "out" / "full", tmp_path / "out" / "50")
    assert_clean_failure(caught.value, tmp_path, "fetch-mimic-splits")


def test_unterminated_quote_is_reported_without_text(fixtures_dir: Path, tmp_path: Path) -> None:
    root = broken_root(fixtures_dir, tmp_path, "NOTEEVENTS.csv", lambda t: t + '22,912,100010,2159-01-01,,,"Discharge summary","Report",,,"cut off lorazepam\n')
    with pytest.raises(InputError) as caught:
        run_mimic3(fixtures_dir, tmp_path, root=root)
    assert_clean_failure(caught.value, tmp_path, "NOTEEVENTS.csv", "unreadable CSV")


def test_cli_reports_error_without_traceback(fixtures_dir: Path, tmp_path: Path, capsys) -> None:
    from mscl.__main__ import main

    argv = [
        "prepare-mimic", "--version", "mimic3", "--root", str(tmp_path / "nowhere"), "--splits", str(fixtures_dir / "mimic3" / "splits"),
        "--out-full", str(tmp_path / "out" / "full"), "--out-50", str(tmp_path / "out" / "50"),
    ]  # fmt: skip
    assert main(argv) == 1
    assert "raw MIMIC root folder not found" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# The streaming manifest writer the MIMIC preparation is built on


def chunk(ids: list[str], labels: list[list[str]]) -> pd.DataFrame:
    return pd.DataFrame({"id": ids, "labels": labels, "text": [f"t{i}" for i in ids]})


def test_manifest_writer_streams_chunks(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with ManifestWriter(out, labels=["b", "a"], info={"source": "hand"}) as writer:
        writer.add("train", chunk(["1", "2"], [["a"], ["a", "b"]]))
        writer.add("train", chunk(["3"], [[]]))
        writer.add("val", chunk(["4"], [["c"]]))  # "c" is outside the vocabulary
        writer.add("test", chunk(["5"], [["b"]]))
        assert not out.exists()  # nothing visible before close
        stats = writer.close()
    assert list(read_split(out, "train")["id"]) == ["1", "2", "3"]
    assert read_labels(out) == ["b", "a"]
    assert stats["counts"] == {"train": 3, "val": 1, "test": 1}
    assert stats["avg_labels"] == pytest.approx(5 / 5)  # label occurrences 1+2+0+1+1 over 5 samples
    assert stats["splits"]["train"]["label_frequency"] == {"a": 2, "b": 1}
    assert stats["splits"]["train"]["samples_without_labels"] == 1
    assert stats["splits"]["val"]["out_of_vocabulary_occurrences"] == 1
    assert read_stats(out) == stats and stats["source"] == "hand"


def test_manifest_writer_failure_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="two splits"):
        with ManifestWriter(tmp_path / "ds") as writer:
            writer.add("train", chunk(["1"], [["a"]]))
            writer.add("test", chunk(["1"], [["a"]]))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", ["02703E6", "0T9B70Z", "E8790", "V5861", "0066"])
def test_real_codes_with_an_e_are_not_mistaken_for_numbers(code: str) -> None:
    """ICD-10-PCS codes like 02703E6 are digits, an E and digits: not an exponent."""
    mimic.check_code_strings(pd.Series([code]), Path("PROCEDURES_ICD.csv"), "icd_code")


@pytest.mark.parametrize("code", ["4.019e3", "401.0", "4019."])
def test_spreadsheet_numbers_are_rejected(code: str) -> None:
    with pytest.raises(InputError, match="looks saved as a number"):
        mimic.check_code_strings(pd.Series([code]), Path("DIAGNOSES_ICD.csv"), "ICD9_CODE")
