"""AAPD parser on a hand-made fixture in the published text_*/label_* format.

Fixture (tests/fixtures/aapd), pooled in train, val, test order:
  aapd-000000 train "we study channel capacity of fading channels"   cs.IT math.IT
  aapd-000001 train "a new optimisation method for deep networks"    cs.LG stat.ML
  aapd-000002 train "graph colouring bounds and algorithms"          math.CO cs.DM
  aapd-000003 val   "neural machine translation with attention"      cs.CL
  aapd-000004 test  "sparse recovery via convex relaxation"          cs.IT math.IT stat.ML
  aapd-000005 test  "quantum error correcting codes"                 quant-ph cs.IT math.IT
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mscl.__main__ import main as mscl_main
from mscl.data import aapd
from mscl.data.manifest import read_labels, read_split, read_stats
from mscl.errors import InputError

EXPECTED = {
    "aapd-000000": (["cs.IT", "math.IT"], "we study channel capacity of fading channels"),
    "aapd-000001": (["cs.LG", "stat.ML"], "a new optimisation method for deep networks"),
    "aapd-000002": (["cs.DM", "math.CO"], "graph colouring bounds and algorithms"),
    "aapd-000003": (["cs.CL"], "neural machine translation with attention"),
    "aapd-000004": (["cs.IT", "math.IT", "stat.ML"], "sparse recovery via convex relaxation"),
    "aapd-000005": (["cs.IT", "math.IT", "quant-ph"], "quantum error correcting codes"),
}


def copy_fixture(fixtures_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the AAPD fixture."""
    return Path(shutil.copytree(fixtures_dir / "aapd", tmp_path / "aapd"))


def manifest(out: Path) -> dict[str, dict[str, tuple[list[str], str]]]:
    """split -> id -> (labels, text) of a prepared dataset."""
    result = {}
    for split in ("train", "val", "test"):
        frame = read_split(out, split)
        result[split] = {row.id: (list(row.labels), row.text) for row in frame.itertuples()}
    return result


def assert_no_output(out: Path) -> None:
    """Nothing (not even a temporary file) was left in the output folder."""
    assert not out.exists() or not any(out.iterdir())


def test_original_policy_keeps_the_published_split(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    stats = aapd.prepare(fixtures_dir / "aapd", out, seed=0, policy="original")
    got = manifest(out)
    assert got["train"] == {k: EXPECTED[k] for k in ("aapd-000000", "aapd-000001", "aapd-000002")}
    assert got["val"] == {"aapd-000003": EXPECTED["aapd-000003"]}
    assert got["test"] == {k: EXPECTED[k] for k in ("aapd-000004", "aapd-000005")}
    assert read_labels(out) == ["cs.CL", "cs.DM", "cs.IT", "cs.LG", "math.CO", "math.IT", "quant-ph", "stat.ML"]
    assert stats["modality"] == "text" and stats["policy"] == "original" and stats["fractions"] is None
    assert stats["source_counts"] == {"train": 3, "val": 1, "test": 2}
    assert stats["avg_labels"] == pytest.approx(13 / 6)  # 2 + 2 + 2 + 1 + 3 + 3 labels
    assert set(stats["sources"]) == {"text_train", "label_train", "text_val", "label_val", "text_test", "label_test"}


def test_resplit_pools_all_documents_in_the_paper_proportions(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    stats = aapd.prepare(fixtures_dir / "aapd", out, seed=0)
    got = manifest(out)
    # 6 documents: boundaries 6*37.8/55.8 = 4.06 -> 4 and 6*44.5/55.8 = 4.78 -> 5.
    assert [len(got[s]) for s in ("train", "val", "test")] == [4, 1, 1]
    assert {**got["train"], **got["val"], **got["test"]} == EXPECTED
    assert stats["policy"] == "resplit" and stats["seed"] == 0
    assert stats["fractions"] == pytest.approx([37.8 / 55.8, 6.7 / 55.8, 11.3 / 55.8])
    assert "seed 0" in stats["split_policy"]


def test_resplit_is_seeded(fixtures_dir, tmp_path):
    def val_ids(seed: int, name: str) -> tuple[str, ...]:
        aapd.prepare(fixtures_dir / "aapd", tmp_path / name, seed=seed)
        return tuple(read_split(tmp_path / name, "val")["id"])

    assert val_ids(2, "a") == val_ids(2, "b")
    assert len({val_ids(seed, f"s{seed}") for seed in range(10)}) > 1


def test_cli_takes_policy_fractions_and_seed(fixtures_dir, tmp_path):
    out = tmp_path / "out"
    argv = ["prepare-aapd", "--root", str(fixtures_dir / "aapd"), "--out", str(out), "--seed", "9", "--fractions", "0.5", "0.25", "0.25"]
    assert mscl_main(argv) == 0
    stats = read_stats(out)
    assert stats["counts"] == {"train": 3, "val": 2, "test": 1}  # boundaries 3.0 and 4.5 -> 5
    assert stats["seed"] == 9 and stats["fractions"] == [0.5, 0.25, 0.25]
    with pytest.raises(SystemExit):
        mscl_main(["prepare-aapd", "--root", str(fixtures_dir / "aapd"), "--out", str(out), "--policy", "shuffle"])


def test_line_count_mismatch_names_both_files(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, tmp_path)
    (root / "label_val").write_text("cs.CL\ncs.LG\n")
    with pytest.raises(InputError) as error:
        aapd.prepare(root, tmp_path / "out", seed=0)
    message = str(error.value)
    assert str(root / "text_val") in message and str(root / "label_val") in message
    assert "1 lines" in message and "has 2" in message
    assert_no_output(tmp_path / "out")


@pytest.mark.parametrize("missing", ["label_test", "text_train"])
def test_missing_file_is_named(fixtures_dir, tmp_path, missing):
    root = copy_fixture(fixtures_dir, tmp_path)
    (root / missing).unlink()
    with pytest.raises(InputError, match="not found") as error:
        aapd.prepare(root, tmp_path / "out", seed=0)
    assert error.value.path == str(root / missing)
    assert_no_output(tmp_path / "out")


def test_missing_root_and_bad_fractions_are_input_errors(fixtures_dir, tmp_path):
    with pytest.raises(InputError, match="root folder not found"):
        aapd.prepare(tmp_path / "absent", tmp_path / "out", seed=0)
    with pytest.raises(InputError) as error:
        aapd.prepare(fixtures_dir / "aapd", tmp_path / "out", seed=0, fractions=(0.7, 0.2, 0.2))
    assert error.value.field == "--fractions"
    assert_no_output(tmp_path / "out")


def test_documents_without_text_or_labels_are_dropped_and_counted(fixtures_dir, tmp_path):
    root = copy_fixture(fixtures_dir, tmp_path)
    # Windows line endings must not leak into texts or labels.
    (root / "text_test").write_bytes(b"sparse recovery via convex relaxation\r\n\r\n")
    (root / "label_test").write_bytes(b"cs.IT math.IT stat.ML\r\nquant-ph\r\n")
    (root / "label_train").write_text("cs.IT math.IT\n\nmath.CO cs.DM\n")
    stats = aapd.prepare(root, tmp_path / "out", seed=0, policy="original")
    assert stats["dropped"] == {"documents_without_text": 1, "documents_without_labels": 1}
    got = manifest(tmp_path / "out")
    assert got["train"] == {k: EXPECTED[k] for k in ("aapd-000000", "aapd-000002")}
    assert got["test"] == {"aapd-000004": EXPECTED["aapd-000004"]}


def test_id_width_grows_past_a_million_documents():
    assert aapd.id_width(55_840) == 6
    assert aapd.id_width(1_000_001) == 7
