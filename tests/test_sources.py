"""The raw-source layout checks the workflow runs before any job (`mscl.data.sources`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mscl.data.sources import LAYOUTS, missing_parts, source_problem, split_folder_problem

FIXTURE_ROOTS = {
    "coco": "coco",
    "voc": "voc",
    "nuswide": "nuswide",
    "aapd": "aapd",
    "mimic3": "mimic3/raw",
    "mimic4": "mimic4/raw",
}


@pytest.mark.parametrize("source", sorted(LAYOUTS))
def test_the_real_format_fixtures_pass_the_layout_check(source: str, fixtures_dir: Path) -> None:
    assert source_problem(source, fixtures_dir / FIXTURE_ROOTS[source]) is None


def test_a_missing_or_non_folder_root_is_named(tmp_path: Path) -> None:
    assert source_problem("coco", tmp_path / "nowhere") == f"{str(tmp_path / 'nowhere')!r} does not exist"
    (tmp_path / "file").write_text("")
    assert source_problem("coco", tmp_path / "file") == f"{str(tmp_path / 'file')!r} is not a folder"


def test_missing_parts_are_listed_and_compressed_tables_count(tmp_path: Path) -> None:
    (tmp_path / "NOTEEVENTS.csv.gz").write_bytes(b"")
    (tmp_path / "DIAGNOSES_ICD.csv").write_text("")
    assert missing_parts("mimic3", tmp_path) == ["PROCEDURES_ICD.csv|PROCEDURES_ICD.csv.gz"]
    assert source_problem("mimic3", tmp_path) == f"{str(tmp_path)!r} lacks PROCEDURES_ICD.csv or PROCEDURES_ICD.csv.gz"


def test_split_folders_need_every_list_of_every_version(tmp_path: Path, mimic_split_lists: Path) -> None:
    assert split_folder_problem("mimic3", mimic_split_lists) is None
    assert split_folder_problem("mimic4", mimic_split_lists) is None
    (tmp_path / "mimic3").mkdir()
    (tmp_path / "mimic3" / "top50_code_list.txt").write_text("")
    problem = split_folder_problem("mimic3", tmp_path)
    assert problem == f"{str(tmp_path)!r} lacks mimic3/train_full_hadm_ids.csv, mimic3/train_50_hadm_ids.csv, mimic3/dev_full_hadm_ids.csv and 3 more"
    assert split_folder_problem("mimic4", tmp_path / "absent") == f"{str(tmp_path / 'absent')!r} is not an existing folder"
