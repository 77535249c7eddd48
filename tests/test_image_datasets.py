"""MS-COCO, PASCAL VOC and NUS-WIDE parsers and the split helpers, on hand-made real-format fixtures.

Fixture contents (see tests/fixtures/{coco,voc,nuswide}):
- COCO: categories 18 dog, 1 person, 90 toothbrush, 3 car (listed out of id order);
  train2014 images 9 (dog, person, dog), 25 (toothbrush), 30 (no annotation);
  val2014 images 42 (car), 73 (toothbrush, person, car), 74 (dog), 133 (no annotation).
- VOC: trainval 000005 (chair, pottedplant[difficult], chair), 000007 (car; <filename> 000007.png),
  000009 (person, horse, person[difficult]); test 000001 (person, dog), 000002 (train),
  000004 (car[difficult] only), 000006 (pottedplant, diningtable, chair[difficult]; no <filename>).
- NUS-WIDE: concepts sky, animal, water; 7 Imagelist lines (CRLF, Windows paths); line 4
  (airport\\0002) is absent on disk, line 5 (beach\\0001) has no label.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mscl.__main__ import main as mscl_main
from mscl.data import coco, images, nuswide, voc
from mscl.data.aapd import DEFAULT_FRACTIONS as AAPD_FRACTIONS
from mscl.data.manifest import read_labels, read_split, read_stats
from mscl.data.splitting import check_fractions, fractional_split, halve, seeded_order, split_sizes
from mscl.errors import InputError, OptionNames


def copy_fixture(fixtures_dir: Path, name: str, tmp_path: Path) -> Path:
    """A writable copy of one fixture dataset."""
    return Path(shutil.copytree(fixtures_dir / name, tmp_path / name))


def manifest(out: Path) -> dict[str, dict[str, tuple[list[str], str]]]:
    """split -> id -> (labels, path) of a prepared dataset."""
    result = {}
    for split in ("train", "val", "test"):
        frame = read_split(out, split)
        result[split] = {row.id: (list(row.labels), row.path) for row in frame.itertuples()}
    return result


def assert_no_output(out: Path) -> None:
    """Nothing (not even a temporary file) was left in the output folder."""
    assert not out.exists() or not any(out.iterdir())


def corrupt(fixtures_dir: Path, target: Path) -> None:
    """Overwrite an image with the fixture's non-image bytes."""
    shutil.copyfile(fixtures_dir / "coco" / "corrupt.jpg", target)


# ----------------------------------------------------------------------------- splitting


def test_split_sizes_round_cumulative_boundaries_half_up():
    assert split_sizes(10, (0.6, 0.2, 0.2)) == [6, 2, 2]
    assert split_sizes(7, (0.6, 0.2, 0.2)) == [4, 2, 1]  # boundaries 4.2 -> 4, 5.6 -> 6
    assert split_sizes(10, (0.25, 0.25, 0.5)) == [3, 2, 5]  # boundary 2.5 rounds up to 3
    # The paper's AAPD proportions 37.8k/6.7k/11.3k applied to the 55,840 pooled documents:
    # boundaries 55840*37.8/55.8 = 37827.1 and 55840*44.5/55.8 = 44531.9.
    assert split_sizes(55_840, AAPD_FRACTIONS) == [37_827, 6_705, 11_308]


def test_split_helpers_ignore_input_order_and_depend_on_seed():
    ids = [f"id{i:03d}" for i in range(100)]
    assert seeded_order(ids, 3) == seeded_order(list(reversed(ids)), 3)
    assert seeded_order(ids, 3) != seeded_order(ids, 4)
    assert sorted(seeded_order(ids, 3)) == ids
    parts = fractional_split(ids, (0.6, 0.2, 0.2), seed=5)
    assert [len(p) for p in parts] == [60, 20, 20]
    assert sorted(sum(parts, [])) == ids
    assert fractional_split(ids[::-1], (0.6, 0.2, 0.2), seed=5) == parts


def test_halve_gives_the_odd_id_to_the_second_half():
    first, second = halve(["e", "d", "c", "b", "a"], seed=1)
    assert (len(first), len(second)) == (2, 3)
    assert sorted(first + second) == ["a", "b", "c", "d", "e"]
    assert halve(["a", "b", "c", "d", "e"], seed=1) == (first, second)


@pytest.mark.parametrize("fractions", [(0.5, 0.5, 0.5), (0.8, 0.2, 0.0), (1.2, -0.1, -0.1)])
def test_bad_fractions_are_input_errors_naming_the_option(fractions):
    with pytest.raises(InputError) as error:
        check_fractions(fractions)
    assert error.value.field == "--fractions"


# ----------------------------------------------------------------------------- MS-COCO


def test_coco_manifest_matches_the_hand_written_expectation(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    stats = coco.prepare(fixtures_dir / "coco", out, seed=0)
    got = manifest(out)
    assert got["train"] == {
        "9": (["person", "dog"], "train2014/COCO_train2014_000000000009.jpg"),
        "25": (["toothbrush"], "train2014/COCO_train2014_000000000025.jpg"),
    }
    assert {**got["val"], **got["test"]} == {
        "42": (["car"], "val2014/COCO_val2014_000000000042.jpg"),
        "73": (["person", "car", "toothbrush"], "val2014/COCO_val2014_000000000073.jpg"),
        "74": (["dog"], "val2014/COCO_val2014_000000000074.jpg"),
    }
    assert (len(got["val"]), len(got["test"])) == (1, 2)
    assert read_labels(out) == ["person", "car", "dog", "toothbrush"]  # category ids 1, 3, 18, 90
    assert stats["dropped"] == {"unannotated_images": {"train2014": 1, "val2014": 1}, "missing_images": 0, "unreadable_images": 0}
    assert stats["num_labels"] == 4
    assert stats["avg_labels"] == pytest.approx(8 / 5)  # labels 2 + 1 + 1 + 3 + 1 over 5 images
    assert stats["seed"] == 0 and stats["dataset"] == "coco"
    assert "seed 0" in stats["split_policy"]
    assert Path(stats["root"]).is_absolute()
    assert set(stats["sources"]) == {"annotations/instances_train2014.json", "annotations/instances_val2014.json"}


def test_coco_split_is_seeded(fixtures_dir, tmp_path):
    def val_ids(seed: int, name: str) -> list[str]:
        coco.prepare(fixtures_dir / "coco", tmp_path / name, seed=seed, verify_images=False)
        return sorted(read_split(tmp_path / name, "val")["id"])

    assert val_ids(7, "a") == val_ids(7, "b")
    assert read_stats(tmp_path / "a")["seed"] == 7
    assert len({tuple(val_ids(seed, f"s{seed}")) for seed in range(10)}) > 1


def test_coco_cli_writes_the_manifest_and_reports_errors(fixtures_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert mscl_main(["prepare-coco", "--root", str(fixtures_dir / "coco"), "--out", str(out), "--seed", "3"]) == 0
    assert read_stats(out)["seed"] == 3
    assert mscl_main(["prepare-coco", "--root", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2")]) == 1
    assert "nowhere" in capsys.readouterr().err
    assert_no_output(tmp_path / "o2")


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda root: (root / "annotations/instances_val2014.json").unlink(), "instances_val2014.json"),
        (lambda root: (root / "annotations/instances_train2014.json").write_text("{not json"), "not valid JSON"),
    ],
)
def test_coco_missing_or_broken_annotation_file_is_named(fixtures_dir, tmp_path, edit, expected):
    root = copy_fixture(fixtures_dir, "coco", tmp_path)
    edit(root)
    with pytest.raises(InputError, match=expected):
        coco.prepare(root, tmp_path / "out", seed=0)
    assert_no_output(tmp_path / "out")


def edit_json(path: Path, change) -> None:
    """Apply `change` to the parsed JSON at `path` and write it back."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d.pop("annotations"), "annotations"),
        (lambda d: d["images"][0].pop("file_name"), "file_name"),
        (lambda d: d["annotations"][0].pop("category_id"), "category_id"),
        (lambda d: d["annotations"][0].update(category_id=2), "category_id"),  # id 2 is not a category
        (lambda d: d["annotations"][0].update(image_id=999), "image_id"),
        (lambda d: d.update(annotations=[]), "annotations"),  # nothing annotated: empty dataset
    ],
)
def test_coco_bad_json_content_names_file_and_field(fixtures_dir, tmp_path, change, field):
    root = copy_fixture(fixtures_dir, "coco", tmp_path)
    path = root / "annotations/instances_train2014.json"
    edit_json(path, change)
    with pytest.raises(InputError) as error:
        coco.prepare(root, tmp_path / "out", seed=0)
    assert error.value.path == str(path) and error.value.field == field
    assert_no_output(tmp_path / "out")


def test_coco_category_mismatch_between_files_is_an_error(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, "coco", tmp_path)
    edit_json(root / "annotations/instances_val2014.json", lambda d: d["categories"][0].update(name="wolf"))
    with pytest.raises(InputError, match="categories differ"):
        coco.prepare(root, tmp_path / "out", seed=0)


def test_coco_missing_image_is_an_error_or_dropped_and_counted(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, "coco", tmp_path)
    image = root / "val2014/COCO_val2014_000000000074.jpg"
    image.unlink()
    with pytest.raises(InputError) as error:
        coco.prepare(root, tmp_path / "out", seed=0)
    # The file that lists the image, and the image by its path there.
    assert error.value.path == str(root / "annotations/instances_val2014.json") and error.value.field == "file_name"
    assert "image 'val2014/COCO_val2014_000000000074.jpg' is missing" in str(error.value) and "--missing-images to drop" in error.value.fix
    assert_no_output(tmp_path / "out")

    stats = coco.prepare(root, tmp_path / "dropped", seed=0, missing_images="drop")
    assert stats["dropped"]["missing_images"] == 1 and "unreadable_image_paths" not in stats["dropped"]
    assert stats["counts"] == {"train": 2, "val": 1, "test": 1}


def test_an_empty_split_names_the_input_that_left_it_empty(fixtures_dir, tmp_path):
    """val2014 down to one image (the others dropped as missing): halving it leaves val empty,
    and the error names val2014's annotation file, not the output folder."""
    root = copy_fixture(fixtures_dir, "coco", tmp_path)
    for name in ("COCO_val2014_000000000042.jpg", "COCO_val2014_000000000073.jpg"):
        (root / "val2014" / name).unlink()
    with pytest.raises(InputError, match=r"leaves split 'val' empty \(train 2, val 0, test 1 samples\)") as error:
        coco.prepare(root, tmp_path / "out", seed=0, missing_images="drop")
    assert error.value.path == str(root / "annotations/instances_val2014.json") and "val2014/" in error.value.fix
    assert_no_output(tmp_path / "out")


def test_images_are_decoded_in_full_in_parallel_and_every_bad_one_is_named(fixtures_dir, tmp_path):
    """The shared check (mscl.data.images) on 40 images by 4 threads: a JPEG cut short (whose
    header opens) and a missing file, named in order by their lines, however the pool schedules."""
    good = (fixtures_dir / "coco" / "train2014" / "COCO_train2014_000000000009.jpg").read_bytes()
    entries = []
    for i in range(40):
        (tmp_path / f"{i}.jpg").write_bytes(good[: len(good) // 2] if i == 17 else good)
        entries.append((f"line {i + 2}", f"{i}.jpg"))
    (tmp_path / "31.jpg").unlink()
    problems = images.image_problems(tmp_path, [path for _, path in entries], verify=True, workers=4)
    assert [i for i, problem in enumerate(problems) if problem] == [17, 31]
    assert problems[17].startswith("unreadable (OSError: ") and problems[31] == "missing"
    assert images.image_problems(tmp_path, [path for _, path in entries], verify=False)[17] is None  # presence only
    with pytest.raises(InputError) as error:
        images.require_images(tmp_path, entries, True, tmp_path / "list.csv", "image", OptionNames("sources.mine"))
    message = str(error.value)
    assert "2 images that cannot be used" in message and message.index("line 19: image '17.jpg' is unreadable") < message.index("line 33: image '31.jpg' is missing")
    assert "`sources.mine.verify_images: false` (--no-verify-images) skips decoding them" in error.value.fix


def test_coco_unreadable_image_is_caught_only_when_verifying(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, "coco", tmp_path)
    image = root / "train2014/COCO_train2014_000000000025.jpg"
    corrupt(fixtures_dir, image)
    with pytest.raises(InputError, match="image 'train2014/COCO_train2014_000000000025.jpg' is unreadable") as error:
        coco.prepare(root, tmp_path / "out", seed=0)
    assert error.value.path == str(root / "annotations/instances_train2014.json")
    assert_no_output(tmp_path / "out")

    assert coco.prepare(root, tmp_path / "unchecked", seed=0, verify_images=False)["counts"]["train"] == 2
    dropped = coco.prepare(root, tmp_path / "dropped", seed=0, missing_images="drop")
    assert dropped["dropped"]["unreadable_images"] == 1 and dropped["counts"]["train"] == 1
    assert dropped["dropped"]["unreadable_image_paths"] == ["train2014/COCO_train2014_000000000025.jpg"]


# ----------------------------------------------------------------------------- PASCAL VOC

VOC_TEST_POOL_INCLUDE = {
    "000001": (["dog", "person"], "JPEGImages/000001.jpg"),
    "000002": (["train"], "JPEGImages/000002.jpg"),
    "000004": (["car"], "JPEGImages/000004.jpg"),
    "000006": (["chair", "diningtable", "pottedplant"], "JPEGImages/000006.jpg"),  # no <filename>: <id>.jpg
}


def test_voc_include_difficult_manifest(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    stats = voc.prepare(fixtures_dir / "voc", out, seed=0)
    got = manifest(out)
    assert got["train"] == {
        "000005": (["chair", "pottedplant"], "JPEGImages/000005.jpg"),
        "000007": (["car"], "JPEGImages/000007.png"),  # the file named by <filename>
        "000009": (["horse", "person"], "JPEGImages/000009.jpg"),
    }
    assert {**got["val"], **got["test"]} == VOC_TEST_POOL_INCLUDE
    assert (len(got["val"]), len(got["test"])) == (2, 2)
    assert read_labels(out) == list(voc.VOC_CLASSES) and len(voc.VOC_CLASSES) == 20
    assert read_labels(out)[:3] == ["aeroplane", "bicycle", "bird"]
    assert stats["dropped"]["images_without_kept_objects"] == {"trainval": 0, "test": 0}
    assert "difficult count as labels" in stats["split_policy"] and stats["options"]["difficult"] == "include"


def test_voc_exclude_difficult_drops_and_counts_images_left_unlabelled(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    stats = voc.prepare(fixtures_dir / "voc", out, seed=0, difficult="exclude")
    got = manifest(out)
    assert got["train"] == {
        "000005": (["chair"], "JPEGImages/000005.jpg"),
        "000007": (["car"], "JPEGImages/000007.png"),
        "000009": (["horse", "person"], "JPEGImages/000009.jpg"),  # one person is not difficult
    }
    assert {**got["val"], **got["test"]} == {
        "000001": (["dog", "person"], "JPEGImages/000001.jpg"),
        "000002": (["train"], "JPEGImages/000002.jpg"),
        "000006": (["diningtable", "pottedplant"], "JPEGImages/000006.jpg"),
    }
    assert (len(got["val"]), len(got["test"])) == (1, 2)
    assert stats["dropped"]["images_without_kept_objects"] == {"trainval": 0, "test": 1}
    assert "ignored" in stats["split_policy"]


@pytest.mark.parametrize(
    "xml_id, original, name, hint",
    [
        ("000007", "car", "digit_7", ""),  # a foreign name among the 20 classes
        ("000002", "train", "Train", "VOC writes it 'train'"),  # an edited name: the case
        ("000009", "horse", "Horse", "VOC writes it 'horse'"),
    ],
)
def test_voc_class_names_outside_the_20_are_refused(fixtures_dir, tmp_path, xml_id, original, name, hint):
    """Before, such a name silently changed the label set to the sorted names seen."""
    root = copy_fixture(fixtures_dir, "voc", tmp_path)
    xml = root / f"Annotations/{xml_id}.xml"
    xml.write_text(xml.read_text().replace(f"<name>{original}</name>", f"<name>{name}</name>"))
    with pytest.raises(InputError, match=f"object name '{name}' is not one of the 20 VOC classes") as error:
        voc.prepare(root, tmp_path / "out", seed=0)
    assert error.value.path == str(xml) and error.value.field == "object/name" and hint in str(error.value)
    assert_no_output(tmp_path / "out")


def test_voc_format_with_a_class_set_of_its_own_keeps_its_sorted_names(fixtures_dir, tmp_path):
    """No name is a VOC class (the demo's glyph classes): the dataset's own classes, sorted."""
    root = copy_fixture(fixtures_dir, "voc", tmp_path)
    for xml in (root / "Annotations").iterdir():
        text = xml.read_text()
        for name in voc.VOC_CLASSES:
            text = text.replace(f"<name>{name}</name>", f"<name>glyph_{name}</name>")
        xml.write_text(text)
    stats = voc.prepare(root, tmp_path / "out", seed=0)
    expected = ["car", "chair", "diningtable", "dog", "horse", "person", "pottedplant", "train"]
    assert read_labels(tmp_path / "out") == [f"glyph_{name}" for name in expected]
    assert stats["classes"] == "a class set of its own (no VOC class name)"


def assert_split_is_seeded(prepare, root: Path, tmp_path: Path, split: str) -> None:
    """The same seed gives the same `split`; ten seeds do not all give the same one."""

    def ids(seed: int, name: str) -> tuple[str, ...]:
        prepare(root, tmp_path / name, seed=seed, verify_images=False)
        return tuple(sorted(read_split(tmp_path / name, split)["id"]))

    assert ids(11, "a") == ids(11, "b")
    assert len({ids(seed, f"s{seed}") for seed in range(10)}) > 1


def test_voc_split_is_seeded(fixtures_dir, tmp_path):
    assert_split_is_seeded(voc.prepare, fixtures_dir / "voc", tmp_path, "val")


def test_voc_cli_takes_the_difficult_policy(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    assert mscl_main(["prepare-voc", "--root", str(fixtures_dir / "voc"), "--out", str(out), "--difficult", "exclude", "--no-verify-images"]) == 0
    stats = read_stats(out)
    assert stats["options"] == {"difficult": "exclude", "verify_images": False, "missing_images": "error"}


@pytest.mark.parametrize(
    "edit, named, expected",
    [
        (lambda r: (r / "ImageSets/Main/test.txt").unlink(), "ImageSets/Main/test.txt", "not found"),
        (lambda r: (r / "Annotations/000002.xml").unlink(), "Annotations/000002.xml", "not found"),
        (lambda r: (r / "Annotations/000009.xml").write_text("<annotation><object>"), "Annotations/000009.xml", "not valid XML"),
        (lambda r: (r / "Annotations/000001.xml").write_text("<annotation><object><difficult>0</difficult></object></annotation>"), "Annotations/000001.xml", "no <name>"),
        (lambda r: (r / "ImageSets/Main/test.txt").write_text("000001\n000005\n"), "ImageSets/Main/test.txt", "also in trainval"),
        (lambda r: (r / "JPEGImages/000007.png").unlink(), "ImageSets/Main/trainval.txt", "image 'JPEGImages/000007.png' is missing"),
        (lambda r: (r / "ImageSets/Main/trainval.txt").write_text("\n"), "ImageSets/Main/trainval.txt", "lists no image"),
    ],
)
def test_voc_bad_input_names_the_file(fixtures_dir, tmp_path, edit, named, expected):
    root = copy_fixture(fixtures_dir, "voc", tmp_path)
    edit(root)
    with pytest.raises(InputError, match=expected) as error:
        voc.prepare(root, tmp_path / "out", seed=0)
    assert error.value.path == str(root / named)
    assert_no_output(tmp_path / "out")


def test_voc_unreadable_image_is_an_error(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, "voc", tmp_path)
    corrupt(fixtures_dir, root / "JPEGImages/000002.jpg")
    with pytest.raises(InputError, match="unreadable"):
        voc.prepare(root, tmp_path / "out", seed=0)
    assert_no_output(tmp_path / "out")


# ----------------------------------------------------------------------------- NUS-WIDE

NUSWIDE_KEPT = {
    "actor/0001_2124494179": (["sky"], "Flickr/actor/0001_2124494179.jpg"),
    "actor/0002_174174086": (["animal", "water"], "Flickr/actor/0002_174174086.jpg"),
    "airport/0001_1000001": (["sky", "water"], "Flickr/airport/0001_1000001.jpg"),
    "beach/0002_1000004": (["animal"], "Flickr/beach/0002_1000004.jpg"),
    "beach/0003_1000005": (["water"], "Flickr/beach/0003_1000005.jpg"),
}


@pytest.mark.parametrize(
    "listed",
    ["actor\\0001_2124494179.jpg", "C:\\ImageData\\Flickr\\actor\\0001_2124494179.jpg", "actor/0001_2124494179.jpg"],
)
def test_nuswide_windows_paths_map_under_flickr(listed):
    assert nuswide.image_relpath(listed) == "Flickr/actor/0001_2124494179.jpg"
    assert nuswide.sample_id(nuswide.image_relpath(listed)) == "actor/0001_2124494179"


def test_nuswide_manifest_keeps_present_labelled_images(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    stats = nuswide.prepare(fixtures_dir / "nuswide", out, seed=0)
    got = manifest(out)
    assert {**got["train"], **got["val"], **got["test"]} == NUSWIDE_KEPT
    assert [len(got[s]) for s in ("train", "val", "test")] == [3, 1, 1]  # 60/20/20 of 5
    assert read_labels(out) == ["sky", "animal", "water"]  # Concepts81.txt order
    assert stats["dropped"] == {"unlabelled_images": 1, "missing_images": 1, "unreadable_images": 0}
    assert stats["listed_images"] == 7 and stats["fractions"] == [0.6, 0.2, 0.2]
    assert stats["avg_labels"] == pytest.approx(7 / 5)


def test_nuswide_fractions_and_seed_are_configurable(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    assert mscl_main(["prepare-nuswide", "--root", str(fixtures_dir / "nuswide"), "--out", str(out), "--seed", "4", "--fractions", "0.4", "0.4", "0.2"]) == 0
    stats = read_stats(out)
    assert stats["counts"] == {"train": 2, "val": 2, "test": 1}  # boundaries 2.0 and 4.0 of 5
    assert stats["seed"] == 4 and "0.4/0.4/0.2" in stats["split_policy"]
    assert_split_is_seeded(nuswide.prepare, fixtures_dir / "nuswide", tmp_path, "train")


def test_nuswide_absent_image_is_an_error_when_asked(fixtures_dir, tmp_path):
    root = fixtures_dir / "nuswide"
    with pytest.raises(InputError, match="missing") as error:
        nuswide.prepare(root, tmp_path / "out", seed=0, missing_images="error")
    assert error.value.path == str(root / "ImageList/Imagelist.txt") and "image 'Flickr/airport/0002_1000002.jpg' is missing" in str(error.value)
    assert_no_output(tmp_path / "out")


def test_nuswide_unreadable_image_is_dropped_and_counted_unless_unchecked(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, "nuswide", tmp_path)
    corrupt(fixtures_dir, root / "Flickr/beach/0003_1000005.jpg")
    stats = nuswide.prepare(root, tmp_path / "out", seed=0)
    assert stats["dropped"] == {"unlabelled_images": 1, "missing_images": 1, "unreadable_images": 1, "unreadable_image_paths": ["Flickr/beach/0003_1000005.jpg"]}
    # Without --verify-images only presence is checked: the corrupt file stays, the absent one does not.
    unchecked = nuswide.prepare(root, tmp_path / "unchecked", seed=0, verify_images=False)
    assert unchecked["total"] == 5 and unchecked["dropped"]["missing_images"] == 1


@pytest.mark.parametrize(
    "edit, named, expected",
    [
        (lambda r: (r / "Groundtruth/AllLabels/Labels_water.txt").write_text("0\n1\n1\n0\n"), "Groundtruth/AllLabels/Labels_water.txt", "4 label lines but .* 7 images"),
        (lambda r: (r / "Groundtruth/AllLabels/Labels_sky.txt").write_text("1\n0\n2\n1\n0\n0\n0\n"), "Groundtruth/AllLabels/Labels_sky.txt", "line 3"),
        (lambda r: (r / "Groundtruth/AllLabels/Labels_animal.txt").unlink(), "Groundtruth/AllLabels/Labels_animal.txt", "not found"),
        (lambda r: (r / "ImageList/Imagelist.txt").unlink(), "ImageList/Imagelist.txt", "not found"),
        (lambda r: (r / "Concepts81.txt").write_text("\n"), "Concepts81.txt", "no concept"),
        (lambda r: shutil.rmtree(r / "Flickr"), "ImageList/Imagelist.txt", "no image it lists is both labelled and present"),
    ],
)
def test_nuswide_bad_input_names_the_file(fixtures_dir, tmp_path, edit, named, expected):
    root = copy_fixture(fixtures_dir, "nuswide", tmp_path)
    edit(root)
    with pytest.raises(InputError, match=expected) as error:
        nuswide.prepare(root, tmp_path / "out", seed=0)
    assert error.value.path == str(root / named if named else root)
    assert_no_output(tmp_path / "out")


def test_missing_root_is_named_for_every_image_parser(tmp_path):
    for prepare in (coco.prepare, voc.prepare, nuswide.prepare):
        with pytest.raises(InputError, match="root folder not found") as error:
            prepare(tmp_path / "absent", tmp_path / "out", seed=0)
        assert error.value.path == str(tmp_path / "absent")
    assert_no_output(tmp_path / "out")
