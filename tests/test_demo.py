"""Tests of `make-demo`: real raw formats, determinism, atomic output, and parser round trips."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import mscl.__main__ as cli
import mscl.demo as demo
from mscl.data.manifest import read_split
from mscl.demo.mimic import dotted_icd9

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
LETTERS = ["alfa", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
           "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]
CLASSES = DIGITS + LETTERS  # the image demos' 30 classes, in class order
# Small sizes keep the whole module to a few seconds of generation.
SAMPLES = {"coco": 90, "voc": 80, "nuswide": 90, "aapd": 150, "mimic3": 120, "mimic4": 160}
TARGETS = {"coco": 2.9, "voc": 1.5, "nuswide": 2.4, "aapd": 2.4}
MIMIC3_NOTE_HEADER = '"ROW_ID","SUBJECT_ID","HADM_ID","CHARTDATE","CHARTTIME","STORETIME","CATEGORY","DESCRIPTION","CGID","ISERROR","TEXT"'
MIMIC3_CODE_HEADER = '"ROW_ID","SUBJECT_ID","HADM_ID","SEQ_NUM","ICD9_CODE"'
DOTTED_ICD9 = re.compile(r"\d{3}(\.\d{1,2})?|V\d{2}(\.\d{1,2})?|E\d{3}(\.\d)?|\d{2}\.\d{1,2}")


# ------------------------------------------------------------------------------- helpers


def tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def read_text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8")


def csv_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_text(path), newline="")))


def id_lists(folder: Path) -> dict[str, set[int]]:
    lists = {}
    for split in ("train", "dev", "test"):
        for setting in ("full", "50"):
            lines = (folder / f"{split}_{setting}_hadm_ids.csv").read_text().splitlines()
            lists[f"{split}_{setting}"] = {int(line) for line in lines}
    return lists


def codes_by_admission(rows: list[dict[str, str]], column: str, dot: bool, procedure: bool) -> dict[int, set[str]]:
    codes: dict[int, set[str]] = {}
    for row in rows:
        if row[column]:
            code = dotted_icd9(row[column], procedure) if dot else row[column]
            codes.setdefault(int(row["HADM_ID" if "HADM_ID" in row else "hadm_id"]), set()).add(code)
    return codes


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every demo kind generated once with seed 0."""
    base = tmp_path_factory.mktemp("demo")
    for kind, samples in SAMPLES.items():
        demo.make_demo(kind, base / kind, seed=0, samples=samples)
    return {kind: base / kind for kind in SAMPLES}


def info(root: Path) -> dict:
    return json.loads((root / "demo_info.json").read_text())


# ------------------------------------------------------------------------------ helpers' values


def test_long_tail_weights_are_normalised_zipf() -> None:
    # exponent 1 over 3 classes: 1, 1/2, 1/3 normalised by 11/6
    assert np.allclose(demo.long_tail_weights(3, 1.0), [6 / 11, 3 / 11, 2 / 11])


def test_label_count_schedule_hits_the_binomial_allocation() -> None:
    # target 2.5 -> p = 0.5; pmf 1/8,3/8,3/8,1/8 of 6 samples = 0.75,2.25,2.25,0.75 -> 1,2,2,1
    schedule = demo.label_count_schedule(np.random.default_rng(0), 6, 2.5)
    assert sorted(schedule.tolist()) == [1, 2, 2, 3, 3, 4]


def test_icd9_chapters_and_dots() -> None:
    ranges = demo.icd9_chapter_ranges()
    assert [demo.icd9_chapter_of(c, ranges) for c in ("0389", "4019", "V5861", "E8790", "7806")] == [1, 7, 18, 19, 16]
    assert dotted_icd9("4019", False) == "401.9"
    assert dotted_icd9("V5861", False) == "V58.61"
    assert dotted_icd9("E8790", False) == "E879.0"
    assert dotted_icd9("486", False) == "486"
    assert dotted_icd9("3893", True) == "38.93"
    assert dotted_icd9("0066", True) == "00.66"


def test_gzip_output_has_no_timestamp() -> None:
    data = demo.gzip_bytes(b"a,b\n1,2\n")
    assert data[4:8] == b"\x00\x00\x00\x00"  # MTIME field of the gzip header
    assert gzip.decompress(data) == b"a,b\n1,2\n"


# ----------------------------------------------------------------------- determinism, atomicity


def test_same_seed_gives_identical_files_and_other_seed_differs(made: dict[str, Path], tmp_path: Path) -> None:
    for kind, samples in SAMPLES.items():
        demo.make_demo(kind, tmp_path / kind, seed=0, samples=samples)
        assert tree_hashes(tmp_path / kind) == tree_hashes(made[kind]), kind
    demo.make_demo("mimic3", tmp_path / "other", seed=1, samples=SAMPLES["mimic3"])
    assert tree_hashes(tmp_path / "other") != tree_hashes(made["mimic3"])


def test_existing_output_is_replaced_and_a_failure_leaves_it_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "aapd"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    assert cli.main(["make-demo", "aapd", "--out", str(out), "--seed", "2", "--samples", "50"]) == 0
    assert not (out / "stale.txt").exists() and (out / "text_train").exists()
    before = tree_hashes(out)

    def broken(folder: Path, seed: int, samples: int) -> dict:
        (folder / "text_train").write_text("half written\n")
        raise RuntimeError("disk full")

    monkeypatch.setattr("mscl.demo.text.make_aapd", broken)
    with pytest.raises(RuntimeError):
        demo.make_demo("aapd", out, seed=3, samples=50)
    assert tree_hashes(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aapd"]  # no temporary sibling left


def test_cli_rejects_too_few_samples(tmp_path: Path) -> None:
    assert cli.main(["make-demo", "coco", "--out", str(tmp_path / "x"), "--samples", "5"]) == 1
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------------ label statistics


@pytest.mark.parametrize("kind", ["coco", "voc", "nuswide", "aapd"])
def test_cardinality_near_target_and_classes_long_tailed(made: dict[str, Path], kind: str) -> None:
    summary = info(made[kind])
    assert abs(summary["label_cardinality"] - TARGETS[kind]) <= 0.4
    frequency = summary["label_frequency"]
    assert max(frequency.values()) >= 3 * min(frequency.values())


# ------------------------------------------------------------------------------- image formats


def test_coco_files_follow_the_instances_format(made: dict[str, Path]) -> None:
    root = made["coco"]
    docs = {s: json.loads((root / "annotations" / f"instances_{s}2014.json").read_text()) for s in ("train", "val")}
    assert len(docs["train"]["images"]) == 52 and len(docs["val"]["images"]) == 38  # 58% and 42% of 90
    unannotated = 0
    for split, doc in docs.items():
        assert {"images", "annotations", "categories"} <= set(doc)
        ids = [c["id"] for c in doc["categories"]]
        assert [c["name"] for c in doc["categories"]] == CLASSES
        assert ids != list(range(1, 31)) and len(set(ids)) == 30  # non-contiguous like real COCO
        assert {c["supercategory"] for c in doc["categories"]} == {"digit", "letter"}
        images = {im["id"]: im for im in doc["images"]}
        for annotation in doc["annotations"]:
            assert annotation["image_id"] in images and annotation["category_id"] in ids
            x, y, w, h = annotation["bbox"]
            assert w > 0 and h > 0 and x + w <= 32 and y + h <= 32
        unannotated += len(set(images) - {a["image_id"] for a in doc["annotations"]})
        for image in doc["images"]:
            assert re.fullmatch(rf"COCO_{split}2014_\d{{12}}\.png", image["file_name"])
            assert image["file_name"] == f"COCO_{split}2014_{image['id']:012d}.png"
        with Image.open(root / f"{split}2014" / doc["images"][0]["file_name"]) as picture:
            assert picture.size == (32, 32) and picture.mode == "RGB"
    assert unannotated >= 2


def test_voc_files_follow_the_voc2007_format(made: dict[str, Path]) -> None:
    root = made["voc"]
    sets = {name: (root / "ImageSets" / "Main" / f"{name}.txt").read_text().split() for name in ("trainval", "test")}
    assert not set(sets["trainval"]) & set(sets["test"])
    assert len(sets["trainval"]) == len(sets["test"]) == 40
    difficult = 0
    for image_id in sets["trainval"] + sets["test"]:
        assert re.fullmatch(r"\d{6}", image_id)
        annotation = ET.parse(root / "Annotations" / f"{image_id}.xml").getroot()
        assert annotation.tag == "annotation"
        assert (root / "JPEGImages" / annotation.findtext("filename")).is_file()
        assert [annotation.findtext(f"size/{t}") for t in ("width", "height", "depth")] == ["32", "32", "3"]
        objects = annotation.findall("object")
        assert 1 <= len(objects) <= 4
        for obj in objects:
            assert obj.findtext("name") in CLASSES and obj.findtext("difficult") in {"0", "1"}
            box = [int(obj.findtext(f"bndbox/{t}")) for t in ("xmin", "ymin", "xmax", "ymax")]
            assert 1 <= box[0] <= box[2] <= 32 and 1 <= box[1] <= box[3] <= 32
            difficult += obj.findtext("difficult") == "1"
    assert difficult >= 1


def test_nuswide_files_follow_the_nuswide_format(made: dict[str, Path]) -> None:
    root = made["nuswide"]
    listed = (root / "ImageList" / "Imagelist.txt").read_text().splitlines()
    assert len(listed) == 90 and all("\\" in line and "/" not in line for line in listed)
    assert (root / "Concepts81.txt").read_text().splitlines() == CLASSES
    columns = [(root / "Groundtruth" / "AllLabels" / f"Labels_{c}.txt").read_text().splitlines() for c in CLASSES]
    assert all(len(column) == 90 and set(column) <= {"0", "1"} for column in columns)
    rows = list(zip(*columns))
    assert sum(1 for row in rows if "1" not in row) >= 2  # unlabelled images
    on_disk = [(root / "Flickr" / Path(*line.split("\\"))).is_file() for line in listed]
    assert on_disk.count(False) == 2
    assert all("1" in row for row, present in zip(rows, on_disk) if not present)  # missing ones are labelled


# --------------------------------------------------------------------------------- AAPD


def test_aapd_files_are_aligned_lowercase_token_lines(made: dict[str, Path]) -> None:
    root = made["aapd"]
    from mscl.demo.text import CHAPTER_SLUGS

    for split, size in (("train", 120), ("val", 15), ("test", 15)):
        texts = (root / f"text_{split}").read_text().splitlines()
        labels = (root / f"label_{split}").read_text().splitlines()
        assert len(texts) == len(labels) == size
        for text, label_line in zip(texts, labels):
            assert text == text.lower() and text.strip() == text and "  " not in text and text
            assert 1 <= len(label_line.split()) <= 4 and set(label_line.split()) <= set(CHAPTER_SLUGS.values())


# --------------------------------------------------------------------------------- MIMIC


def check_split_lists(folder: Path, codes: dict[int, set[str]], coded_admissions: set[int]) -> None:
    """Disjoint lists, *_50 within *_full, top-50 = most frequent train codes, 50 = has a top-50 code."""
    lists = id_lists(folder)
    full = [lists[f"{s}_full"] for s in ("train", "dev", "test")]
    assert all(part for part in full)
    assert not (full[0] & full[1] or full[0] & full[2] or full[1] & full[2])
    top50 = (folder / "top50_code_list.txt").read_text().splitlines()
    assert len(top50) == len(set(top50)) == 50
    frequency = Counter(code for hadm in lists["train_full"] for code in codes[hadm])
    assert min(frequency[c] for c in top50) >= max(n for c, n in frequency.items() if c not in top50)
    for split in ("train", "dev", "test"):
        assert lists[f"{split}_50"] <= lists[f"{split}_full"]
        for hadm in lists[f"{split}_full"]:
            assert (hadm in lists[f"{split}_50"]) == bool(codes[hadm] & set(top50))
    assert coded_admissions - set().union(*full)  # some admissions are in no list


def test_mimic3_files_follow_the_mimic3_format(made: dict[str, Path]) -> None:
    root = made["mimic3"]
    assert (root / "DIAGNOSES_ICD.csv").read_bytes()[:2] != b"\x1f\x8b"  # plain CSV
    assert (root / "NOTEEVENTS.csv.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert read_text(root / "NOTEEVENTS.csv.gz").splitlines()[0] == MIMIC3_NOTE_HEADER
    for name in ("DIAGNOSES_ICD.csv", "PROCEDURES_ICD.csv.gz"):
        assert read_text(root / name).splitlines()[0] == MIMIC3_CODE_HEADER

    notes = csv_rows(root / "NOTEEVENTS.csv.gz")
    discharge = [n for n in notes if n["CATEGORY"] == "Discharge summary"]
    assert {"Nursing/other", "Radiology"} & {n["CATEGORY"] for n in notes}
    assert any(not n["HADM_ID"] for n in notes)
    texts = [n["TEXT"] for n in discharge]
    assert all("\n" in t for t in texts) and any('"' in t for t in texts) and all("," in t for t in texts)
    report_date = {n["HADM_ID"]: n["CHARTDATE"] for n in discharge if n["DESCRIPTION"] == "Report"}
    addenda = [n for n in discharge if n["DESCRIPTION"] == "Addendum"]
    assert any(a["CHARTDATE"] < report_date[a["HADM_ID"]] for a in addenda)
    assert any(a["CHARTDATE"] > report_date[a["HADM_ID"]] for a in addenda)

    dx_rows, proc_rows = csv_rows(root / "DIAGNOSES_ICD.csv"), csv_rows(root / "PROCEDURES_ICD.csv.gz")
    dx_codes = {r["ICD9_CODE"] for r in dx_rows}
    assert "" in dx_codes  # rows without a code, as in the real table
    assert any(c.startswith("0") for c in dx_codes) and any(c[:1] == "V" for c in dx_codes) and any(c[:1] == "E" for c in dx_codes)
    assert dx_codes - {""} <= set(demo.icd_descriptions("icd9_dx"))
    assert {r["ICD9_CODE"] for r in proc_rows} <= set(demo.icd_descriptions("icd9_proc"))

    noted = {int(h) for h in report_date if h}
    codes = codes_by_admission(dx_rows, "ICD9_CODE", True, False)
    for hadm, proc in codes_by_admission(proc_rows, "ICD9_CODE", True, True).items():
        codes.setdefault(hadm, set()).update(proc)
    assert set(codes) - noted and noted - set(codes)  # admissions without notes, notes without codes
    counts = [len(c) for c in codes.values()]
    assert min(counts) >= 9 and max(counts) <= 22 and 14 <= np.mean(counts) <= 17
    top50 = (root / "splits" / "mimic3" / "top50_code_list.txt").read_text().splitlines()
    assert all(DOTTED_ICD9.fullmatch(code) for code in top50)
    check_split_lists(root / "splits" / "mimic3", codes, set(codes))


def test_mimic4_files_follow_the_mimic4_format(made: dict[str, Path]) -> None:
    root = made["mimic4"]
    assert read_text(root / "note" / "discharge.csv.gz").splitlines()[0] == "note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text"
    dx_text = read_text(root / "hosp" / "diagnoses_icd.csv.gz")
    assert dx_text.splitlines()[0] == "subject_id,hadm_id,seq_num,icd_code,icd_version"
    assert read_text(root / "hosp" / "procedures_icd.csv.gz").splitlines()[0] == "subject_id,hadm_id,seq_num,chartdate,icd_code,icd_version"
    assert re.search(r"^\d+,\d+,\d+,0\w+,9$", dx_text, re.MULTILINE)  # a leading-zero code written bare

    notes = csv_rows(root / "note" / "discharge.csv.gz")
    assert {n["note_type"] for n in notes} == {"DS", "AD"}
    assert all("\n" in n["text"] for n in notes)
    assert all(n["note_id"] == f"{n['subject_id']}-{n['note_type']}-{n['note_seq']}" for n in notes)

    rows = csv_rows(root / "hosp" / "diagnoses_icd.csv.gz") + csv_rows(root / "hosp" / "procedures_icd.csv.gz")
    versions: dict[int, set[str]] = {}
    for row in rows:
        versions.setdefault(int(row["hadm_id"]), set()).add(row["icd_version"])
        assert "." not in row["icd_code"]
    assert all(len(v) == 1 for v in versions.values())
    assert {v for vs in versions.values() for v in vs} == {"9", "10"}
    icd10_dx = {r["icd_code"] for r in csv_rows(root / "hosp" / "diagnoses_icd.csv.gz") if r["icd_version"] == "10"}
    assert icd10_dx <= set(demo.icd_descriptions("icd10_dx"))

    for version in ("9", "10"):
        codes: dict[int, set[str]] = {}
        for row in rows:
            if row["icd_version"] == version:
                procedure = "chartdate" in row
                code = dotted_icd9(row["icd_code"], procedure) if version == "9" else row["icd_code"]
                codes.setdefault(int(row["hadm_id"]), set()).add(code)
        folder = root / "splits" / f"mimic4_icd{version}"
        top50 = (folder / "top50_code_list.txt").read_text().splitlines()
        assert all(("." not in c) if version == "10" else DOTTED_ICD9.fullmatch(c) for c in top50)
        check_split_lists(folder, codes, set(codes))


# --------------------------------------------------------------------------- parser round trips


@pytest.mark.parametrize("kind", ["coco", "voc", "nuswide", "aapd"])
def test_parsers_read_the_demo(made: dict[str, Path], tmp_path: Path, kind: str) -> None:
    assert cli.main([f"prepare-{kind}", "--root", str(made[kind]), "--out", str(tmp_path), "--seed", "0"]) == 0
    for split in ("train", "val", "test"):
        assert len(read_split(tmp_path, split)) > 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    if kind == "coco":
        assert sum(stats["dropped"]["unannotated_images"].values()) == info(made[kind])["images_without_annotation"]
    if kind == "nuswide":
        assert stats["dropped"]["missing_images"] == 2


@pytest.mark.parametrize("version", ["mimic3", "mimic4_icd9", "mimic4_icd10"])
def test_mimic_parser_reads_the_demo(made: dict[str, Path], tmp_path: Path, version: str) -> None:
    root = made["mimic3" if version == "mimic3" else "mimic4"]
    argv = ["prepare-mimic", "--version", version, "--root", str(root), "--splits", str(root / "splits" / version)]
    assert cli.main(argv + ["--out-full", str(tmp_path / "full"), "--out-50", str(tmp_path / "50")]) == 0
    lists = id_lists(root / "splits" / version)
    for setting in ("full", "50"):
        for split, listed in (("train", "train"), ("val", "dev"), ("test", "test")):
            frame = read_split(tmp_path / setting, split)
            assert len(frame) > 0 and set(frame["id"].astype(int)) == lists[f"{listed}_{setting}"]


# ------------------------------------------------------------------------------ glyph classes


def test_glyph_pool_has_every_class_with_real_ink() -> None:
    from mscl.demo import images

    pool = images.load_glyph_pool()
    assert list(images.CLASS_NAMES) == CLASSES and len(pool) == len(CLASSES)
    for name, glyphs in zip(CLASSES, pool):
        assert glyphs.ndim == 3 and glyphs.shape[1:] == (images.CELL_PX, images.CELL_PX)
        assert glyphs.min() >= 0 and glyphs.max() <= 1
        ink = (glyphs > images.INK_THRESHOLD).sum(axis=(1, 2))
        assert ink.min() > 0, f"{name} has a blank glyph"
    # Letters: every font x size x rotation is its own glyph, and letters differ from each other.
    letters = pool[len(DIGITS) :]
    variants = len(images.LETTER_FONTS) * len(images.LETTER_SIZES_PX) * len(images.LETTER_ROTATIONS_DEG)
    assert all(len(glyphs) == variants for glyphs in letters)
    assert len({glyphs[0].tobytes() for glyphs in letters}) == len(letters)
    # Digits: the real scans, 2x upscaled (each 2x2 block constant).
    digits = pool[0]
    assert np.array_equal(digits[:, ::2, ::2], digits[:, 1::2, 1::2])


def test_canvas_labels_are_the_distinct_classes_drawn() -> None:
    from mscl.demo import images

    rng = np.random.default_rng(3)
    pool = images.load_glyph_pool()
    canvas = images.compose_canvas(rng, pool, [25, 3, 25])
    assert canvas.labels == [CLASSES[3], CLASSES[25]]
    assert len(canvas.objects) == 3 and canvas.pixels.shape == (32, 32, 3)


def test_demo_image_test_splits_hold_at_least_500_images() -> None:
    """The default sizes (mscl.demo.KINDS) give >= 500 test images through each parser's split."""
    from mscl import demo
    from mscl.demo import images

    coco = demo.KINDS["coco"][2]
    val2014 = coco - round(coco * images.COCO_TRAIN2014_FRACTION)
    labelled_val = val2014 - round(images.COCO_EMPTY_FRACTION * coco)  # at most all empties fall in val
    assert labelled_val // 2 >= 500
    assert demo.KINDS["voc"][2] // 2 // 2 >= 500
    nuswide = demo.KINDS["nuswide"][2]
    on_disk = nuswide - round(images.NUSWIDE_UNLABELLED_FRACTION * nuswide) - images.NUSWIDE_MISSING_IMAGES
    assert int(on_disk * 0.2) >= 500
