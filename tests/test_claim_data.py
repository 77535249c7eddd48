"""Claim-check datasets: MULAN yeast (river), debtags (apt lists), Fashion-MNIST canvases.

Fixtures (tests/fixtures/claim), all in the real raw formats:

yeast/yeast.csv.gz   river's header (Att1..Att103, Class1..Class14) and 10 real rows of
                     river 0.26.1's file: its rows 0-3 (MULAN yeast-test.arff) then rows
                     917-922 (the first six of yeast-train.arff). Hand-read values:
                       row 0: Att1 0.004168, Att2 -0.170975, labels Class7 Class8 Class12 Class13
                       row 4: Att1 0.0937,   Att103 0.125632, labels Class3 Class4
debtags/lists/       ..._binary-amd64_Packages (plain), ..._binary-i386_Packages.xz and
                     ..._i18n_Translation-en.gz:
  alpha    amd64: devel::editor implemented-in::c interface::text-mode role::program use::editing
           (Tag wrapped over two lines); i386 repeats alpha with other tags (amd64 sorts first
           and wins); description with a " ." paragraph break
  beta     game::puzzle interface::text-mode role::program use::gameplaying
  gamma    no Tag                                         -> untagged
  delta    role::shared-lib special::auto-inst-parts      -> no label left (excluded facets)
  epsilon  Description-md5 without a translation          -> no translation
  zeta     devel::editor implemented-in::c use::editing x11::application (Tag wrapped)
  eta      (i386 only) game::puzzle interface::text-mode use::gameplaying
  With --min-count 2: x11::application (1 package) falls out; 6 tags remain.
Fashion-MNIST idx files are built by the tests (real headers, constant-valued images so that
every canvas cell can be traced back to its source image).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from mscl.__main__ import main as mscl_main
from mscl.data import debtags, fashion_mnist, yeast
from mscl.data.manifest import read_labels, read_split, read_stats, write_dataset
from mscl.errors import InputError

SPLIT_NAMES = ("train", "val", "test")


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Relative path -> content of every data file under `folder` (versions.json, the record of
    the job that wrote it, names its command and --out: it differs between two folders)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "versions.json"}


def gzip_text(path: Path, text: str) -> None:
    path.write_bytes(gzip.compress(text.encode("ascii"), mtime=0))


# =================================================================================== manifest


def features_frame(ids, vectors, labels=None) -> pd.DataFrame:
    labels = labels or [["a"]] * len(ids)
    return pd.DataFrame({"id": ids, "labels": labels, "features": list(vectors)})


def test_manifest_features_column_round_trips_as_float32(tmp_path):
    splits = {
        "train": features_frame(["t0", "t1"], [[0.1, 2.0, -3.5], [1.0, 0.0, 0.25]], [["a"], ["a", "b"]]),
        "val": features_frame(["v0"], [[4.0, 5.0, 6.0]]),
        "test": features_frame(["s0"], [[7.0, 8.0, 9.0]], [["b"]]),
    }
    stats = write_dataset(tmp_path / "out", splits)
    assert stats["modality"] == "tabular"
    assert stats["feature_dim"] == 3
    train = read_split(tmp_path / "out", "train")
    assert list(train.columns) == ["id", "labels", "features"]
    assert train["features"][0].dtype == np.float32
    np.testing.assert_array_equal(train["features"][0], np.array([0.1, 2.0, -3.5], dtype=np.float32))
    assert read_stats(tmp_path / "out")["feature_dim"] == 3


def test_manifest_rejects_feature_vectors_of_different_lengths_across_splits(tmp_path):
    splits = {
        "train": features_frame(["t0"], [[0.0, 1.0]]),
        "val": features_frame(["v0"], [[0.0, 1.0, 2.0]]),
        "test": features_frame(["s0"], [[0.0, 1.0]]),
    }
    with pytest.raises(InputError, match=r"lengths \[2, 3\]"):
        write_dataset(tmp_path / "out", splits)
    assert not (tmp_path / "out").exists()


def test_manifest_rejects_non_finite_features(tmp_path):
    splits = {
        "train": features_frame(["t0"], [[0.0, float("nan")]]),
        "val": features_frame(["v0"], [[0.0, 1.0]]),
        "test": features_frame(["s0"], [[0.0, 1.0]]),
    }
    with pytest.raises(InputError, match="NaN or infinite"):
        write_dataset(tmp_path / "out", splits)


def test_manifest_rejects_features_next_to_text(tmp_path):
    frame = features_frame(["t0"], [[0.0]]).assign(text=["x"])
    with pytest.raises(InputError, match="exactly one of 'text', 'path' or 'features'"):
        write_dataset(tmp_path / "out", {name: frame for name in SPLIT_NAMES})


# ====================================================================================== yeast

YEAST_FIXTURE = Path(__file__).parent / "fixtures" / "claim" / "yeast" / "yeast.csv.gz"
FIXTURE_TEST_ROWS, FIXTURE_TRAIN_ROWS = 4, 6


def mulan_md5(data_lines: list[str]) -> str:
    """md5 of a MULAN ARFF file with these data lines, written out independently of the parser."""
    header = "@relation MultiLabelData\n\n"
    header += "".join(f"@attribute Att{i} numeric\n" for i in range(1, 104))
    header += "".join(f"@attribute Class{i} {{0,1}}\n" for i in range(1, 15))
    header += "\n@data\n"
    return hashlib.md5((header + "".join(line + "\n" for line in data_lines)).encode("ascii")).hexdigest()


def fixture_layout(**changes) -> yeast.MulanLayout:
    data = gzip.decompress(YEAST_FIXTURE.read_bytes()).decode("ascii").splitlines()[1:]
    fields = {
        "test_rows": FIXTURE_TEST_ROWS,
        "train_rows": FIXTURE_TRAIN_ROWS,
        "test_md5": mulan_md5(data[:FIXTURE_TEST_ROWS]),
        "train_md5": mulan_md5(data[FIXTURE_TEST_ROWS:]),
    }
    return yeast.MulanLayout(**{**fields, **changes})


def test_yeast_mulan_split_parses_values_and_labels(tmp_path):
    out = tmp_path / "yeast"
    stats = yeast.prepare(out, source=YEAST_FIXTURE, seed=0, val_fraction=0.5, layout=fixture_layout())
    assert stats["counts"] == {"train": 3, "val": 3, "test": 4}
    assert stats["mulan_md5_verified"] is True
    assert stats["feature_dim"] == 103 and stats["modality"] == "tabular"
    assert read_labels(out) == [f"Class{i}" for i in range(1, 15)]

    test = read_split(out, "test").set_index("id")
    assert list(test.index) == ["yeast-0000", "yeast-0001", "yeast-0002", "yeast-0003"]
    assert test.loc["yeast-0000", "labels"] == ["Class7", "Class8", "Class12", "Class13"]
    assert test.loc["yeast-0000", "features"][0] == np.float32(0.004168)
    assert test.loc["yeast-0000", "features"][1] == np.float32(-0.170975)

    pool = pd.concat([read_split(out, "train"), read_split(out, "val")]).set_index("id")
    assert sorted(pool.index) == [f"yeast-{i:04d}" for i in range(4, 10)]
    assert pool.loc["yeast-0004", "labels"] == ["Class3", "Class4"]
    assert pool.loc["yeast-0004", "features"][0] == np.float32(0.0937)
    assert pool.loc["yeast-0004", "features"][102] == np.float32(0.125632)


def test_yeast_val_carve_out_is_seeded(tmp_path):
    def val_ids(seed: int, name: str) -> list[str]:
        yeast.prepare(tmp_path / name, source=YEAST_FIXTURE, seed=seed, val_fraction=0.5, layout=fixture_layout())
        return list(read_split(tmp_path / name, "val")["id"])

    assert val_ids(0, "a") == val_ids(0, "b")
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    carved = {tuple(val_ids(seed, f"s{seed}")) for seed in range(6)}
    assert len(carved) > 1  # the seed matters
    assert all(set(ids) <= {f"yeast-{i:04d}" for i in range(4, 10)} for ids in carved)  # never from test


def test_yeast_refuses_rows_that_do_not_rebuild_mulan_files(tmp_path):
    with pytest.raises(InputError, match="yeast-train.arff") as caught:
        yeast.prepare(tmp_path / "out", source=YEAST_FIXTURE, layout=fixture_layout(train_md5="0" * 32))
    assert str(YEAST_FIXTURE) in str(caught.value) and "--split seeded" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_yeast_mulan_split_needs_2417_rows_seeded_fallback_does_not(tmp_path, capsys):
    out = tmp_path / "out"
    assert mscl_main(["prepare-yeast", "--out", str(out), "--source", str(YEAST_FIXTURE)]) == 1
    assert "917 (yeast-test.arff) + 1500 (yeast-train.arff)" in capsys.readouterr().err
    args = ["prepare-yeast", "--out", str(out), "--source", str(YEAST_FIXTURE), "--split", "seeded", "--seed", "3"]
    assert mscl_main(args) == 0
    stats = read_stats(out)
    assert stats["mulan_md5_verified"] is False
    # 10 rows: test round(10 * 917/2417) = 4, val round(6 * 0.2) = 1, train 5
    assert stats["counts"] == {"train": 5, "val": 1, "test": 4}


def test_yeast_wrong_column_count_names_file_and_line(tmp_path):
    lines = gzip.decompress(YEAST_FIXTURE.read_bytes()).decode("ascii").splitlines()
    lines[3] = lines[3].rsplit(",", 1)[0]  # drop Class14 of data line 3 (file line 4)
    bad = tmp_path / "yeast.csv.gz"
    gzip_text(bad, "\n".join(lines) + "\n")
    with pytest.raises(InputError, match="line 4 has 116 columns, the header 117") as caught:
        yeast.prepare(tmp_path / "out", source=bad, layout=fixture_layout())
    assert caught.value.path == str(bad) and "pip install" in caught.value.fix


def test_yeast_wrong_header_and_missing_file(tmp_path):
    bad = tmp_path / "yeast.csv"
    bad.write_text("a,b\n1,0\n", encoding="ascii")  # plain (not gzipped) CSV is read too
    with pytest.raises(InputError, match="header has 2 columns"):
        yeast.prepare(tmp_path / "out", source=bad)
    with pytest.raises(InputError, match="not found") as caught:
        yeast.prepare(tmp_path / "out", source=tmp_path / "absent.csv.gz")
    assert "pip install river" in caught.value.fix


def test_yeast_missing_river_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(yeast, "SOURCE_PACKAGE", "mscl_no_such_package_for_test")
    with pytest.raises(InputError, match="not installed") as caught:
        yeast.prepare(tmp_path / "out")
    assert "pip install river" in caught.value.fix


def test_yeast_real_river_file_is_mulan_test_then_train(tmp_path):
    """river's yeast.csv.gz rebuilds MULAN's two ARFF files (md5), test rows first."""
    stats = yeast.prepare(tmp_path / "yeast", seed=0)
    assert stats["mulan_md5_verified"] is True
    assert stats["counts"] == {"train": 1200, "val": 300, "test": 917}
    assert stats["feature_dim"] == 103 and stats["num_labels"] == 14
    test = read_split(tmp_path / "yeast", "test")
    assert test["id"].iloc[0] == "yeast-0000" and test["features"].iloc[0][0] == np.float32(0.004168)


# ==================================================================================== debtags

DEBTAGS_LISTS = Path(__file__).parent / "fixtures" / "claim" / "debtags" / "lists"
KEPT = ["devel::editor", "game::puzzle", "implemented-in::c", "interface::text-mode", "use::editing", "use::gameplaying"]
EXPECTED_LABELS = {
    "alpha": ["devel::editor", "implemented-in::c", "interface::text-mode", "use::editing"],
    "beta": ["game::puzzle", "interface::text-mode", "use::gameplaying"],
    "eta": ["game::puzzle", "interface::text-mode", "use::gameplaying"],
    "zeta": ["devel::editor", "implemented-in::c", "use::editing"],
}


def documented_split(name: str, seed: int) -> str:
    """The documented rule, written out independently: sha256('<seed>:<name>'), 8 bytes, 0.7/0.1/0.2."""
    position = int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big") / 2**64
    return "train" if position < 0.7 else "val" if position < 0.8 else "test"


def covering_seed(names) -> int:
    """The first seed whose hash split gives every split at least one of `names`."""
    return next(s for s in range(1000) if {documented_split(n, s) for n in names} == set(SPLIT_NAMES))


def debtags_manifest(out: Path) -> dict[str, dict[str, tuple[list[str], str]]]:
    result = {}
    for split in SPLIT_NAMES:
        frame = read_split(out, split)
        result[split] = {row.id: (list(row.labels), row.text) for row in frame.itertuples()}
    return result


def test_debtags_join_labels_text_and_drops(tmp_path):
    seed = covering_seed(EXPECTED_LABELS)
    out = tmp_path / "debtags"
    stats = debtags.prepare(DEBTAGS_LISTS, out, min_count=2, seed=seed)
    got = debtags_manifest(out)
    for name, labels in EXPECTED_LABELS.items():
        assert got[documented_split(name, seed)][name][0] == labels
    assert sorted(name for split in got.values() for name in split) == sorted(EXPECTED_LABELS)
    texts = {name: text for split in got.values() for name, (_, text) in split.items()}
    assert texts["alpha"] == "text editor for the console Alpha is a small editor. It edits files. Second paragraph here."
    assert texts["zeta"] == "graphical editor Zeta edits files in a window. It supports plugins."
    assert read_labels(out) == KEPT
    assert stats["dropped"] == {"untagged_packages": 1, "no_translation": 1, "no_label_left": 1, "not_sampled": 0}
    assert stats["join"] == {"package_stanzas": 8, "package_names": 7, "tagged_names": 6, "translations": 6, "joined": 5}
    assert stats["label_space"]["tags_on_joined_packages"] == 10
    assert stats["label_space"]["tags_in_allowed_facets"] == 7
    assert stats["label_space"]["tags_kept"] == 6


def test_debtags_label_space_options(tmp_path):
    seed = covering_seed(["alpha", "beta", "eta"])
    stats = debtags.prepare(DEBTAGS_LISTS, tmp_path / "a", min_count=3, seed=seed)
    assert read_labels(tmp_path / "a") == ["interface::text-mode"]
    assert stats["total"] == 3 and stats["dropped"]["no_label_left"] == 2  # delta, zeta

    seed = covering_seed(EXPECTED_LABELS)  # delta still has no tag carried by 2 packages
    debtags.prepare(DEBTAGS_LISTS, tmp_path / "b", min_count=2, excluded_facets=(), seed=seed)
    assert "role::program" in read_labels(tmp_path / "b")
    labels = {name: lab for split in debtags_manifest(tmp_path / "b").values() for name, (lab, _) in split.items()}
    assert labels["beta"] == ["game::puzzle", "interface::text-mode", "role::program", "use::gameplaying"]


def documented_sample(name: str, seed: int, fraction: float) -> bool:
    """The documented subsample rule, written out: sha256('sample:<seed>:<name>') < fraction."""
    return int.from_bytes(hashlib.sha256(f"{seed}:sample:{name}".encode()).digest()[:8], "big") / 2**64 < fraction


def test_debtags_sample_fraction_keeps_hash_chosen_packages_in_their_splits(tmp_path):
    # A (seed, fraction) whose sample drops a package yet leaves every split one.
    seed, fraction = next(
        (s, f)
        for s in range(1000)
        for f in (0.5, 0.7, 0.9)
        if sum(documented_sample(n, s, f) for n in EXPECTED_LABELS) < len(EXPECTED_LABELS)
        and {documented_split(n, s) for n in EXPECTED_LABELS if documented_sample(n, s, f)} == set(SPLIT_NAMES)
    )
    stats = debtags.prepare(DEBTAGS_LISTS, tmp_path / "s", min_count=2, seed=seed, sample_fraction=fraction)
    got = debtags_manifest(tmp_path / "s")
    kept = sorted(name for name in EXPECTED_LABELS if documented_sample(name, seed, fraction))
    assert sorted(name for split in got.values() for name in split) == kept
    for name in kept:
        assert name in got[documented_split(name, seed)]
    assert read_labels(tmp_path / "s") == KEPT  # the label space is fixed before sampling
    assert stats["dropped"]["not_sampled"] == len(EXPECTED_LABELS) - len(kept)
    with pytest.raises(InputError, match="--sample-fraction"):
        debtags.prepare(DEBTAGS_LISTS, tmp_path / "bad", min_count=2, seed=seed, sample_fraction=0.0)


def test_debtags_is_deterministic_and_split_by_name_hash(tmp_path):
    seed = covering_seed(EXPECTED_LABELS)
    debtags.prepare(DEBTAGS_LISTS, tmp_path / "a", min_count=2, seed=seed)
    assert mscl_main(["prepare-debtags", "--lists", str(DEBTAGS_LISTS), "--out", str(tmp_path / "b"), "--min-count", "2", "--seed", str(seed)]) == 0
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    assert debtags.split_of("alpha", seed, (0.7, 0.1, 0.2)) == documented_split("alpha", seed)


def test_debtags_reads_lz4_lists_like_apt_writes_them(tmp_path):
    lists = tmp_path / "lists"
    lists.mkdir()
    for path in DEBTAGS_LISTS.iterdir():
        if path.suffix == "":
            subprocess.run(["lz4", "-q", str(path), str(lists / (path.name + ".lz4"))], check=True)
        else:
            shutil.copy(path, lists / path.name)
    seed = covering_seed(EXPECTED_LABELS)
    debtags.prepare(lists, tmp_path / "lz4", min_count=2, seed=seed)
    debtags.prepare(DEBTAGS_LISTS, tmp_path / "plain", min_count=2, seed=seed)
    for split in SPLIT_NAMES:
        assert read_split(tmp_path / "lz4", split).equals(read_split(tmp_path / "plain", split))


def test_debtags_packages_without_any_tag_is_an_error(tmp_path):
    lists = tmp_path / "lists"
    lists.mkdir()
    packages = lists / "x_binary-amd64_Packages"
    packages.write_text("Package: a\nDescription: a\nDescription-md5: 0\n\nPackage: b\nDescription: b\n", encoding="utf-8")
    shutil.copy(next(DEBTAGS_LISTS.glob("*Translation-en*")), lists)
    with pytest.raises(InputError, match="no package stanza has a Tag: field") as caught:
        debtags.prepare(lists, tmp_path / "out")
    assert caught.value.path == str(packages) and "apt-get update" in caught.value.fix


def test_debtags_missing_translation_or_corrupt_file(tmp_path):
    lists = tmp_path / "lists"
    shutil.copytree(DEBTAGS_LISTS, lists)
    translation = next(lists.glob("*Translation-en*"))
    translation.unlink()
    with pytest.raises(InputError, match="no \\*_Translation-en index") as caught:
        debtags.prepare(lists, tmp_path / "out")
    assert "apt-get -o Acquire::Languages=en update" in caught.value.fix

    translation.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot decompress") as caught:
        debtags.prepare(lists, tmp_path / "out")
    assert caught.value.path == str(translation)
    with pytest.raises(InputError, match="apt lists folder not found"):
        debtags.prepare(tmp_path / "absent", tmp_path / "out")


def test_debtags_continuation_line_without_field_is_an_error(tmp_path):
    path = tmp_path / "Packages"
    with pytest.raises(InputError, match="line 1 continues a field"):
        list(debtags.iter_stanzas(" orphan continuation\n", path))


# ============================================================================== fashion-mnist

N_TRAIN_SOURCE, N_TEST_SOURCE, SIDE = 60, 20, 28


def idx_bytes(magic: int, array: np.ndarray) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_fashion_root(root: Path) -> None:
    """Constant-valued images: train image i has value i + 1 (class i % 10), t10k image j has
    value 100 + j (class j % 10), so every canvas cell names its source image."""
    root.mkdir(parents=True, exist_ok=True)
    for source, count, first_value in (("train", N_TRAIN_SOURCE, 1), ("t10k", N_TEST_SOURCE, 100)):
        values = np.arange(first_value, first_value + count)
        images = np.broadcast_to(values[:, None, None], (count, SIDE, SIDE))
        labels = np.arange(count) % 10
        (root / f"{source}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(0x803, images), mtime=0))
        (root / f"{source}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(0x801, labels), mtime=0))


def canvas_items(png: Path) -> list[int]:
    """Pixel values of the non-empty 28x28 cells of a 56x56 canvas (each cell one constant)."""
    pixels = np.asarray(Image.open(png))
    assert pixels.shape == (56, 56)
    values = []
    for row in (0, 28):
        for col in (0, 28):
            cell = pixels[row : row + 28, col : col + 28]
            assert (cell == cell[0, 0]).all()
            if cell[0, 0]:
                values.append(int(cell[0, 0]))
    return values


def test_fashion_mnist_idx_reader_checks_magic_and_sizes(tmp_path):
    good = tmp_path / "train-labels-idx1-ubyte.gz"
    good.write_bytes(gzip.compress(idx_bytes(0x801, np.array([3, 1, 4])), mtime=0))
    np.testing.assert_array_equal(fashion_mnist.read_idx(good, 0x801), [3, 1, 4])
    with pytest.raises(InputError, match="magic number is 0x00000801, expected 0x00000803") as caught:
        fashion_mnist.read_idx(good, 0x803)
    assert caught.value.path == str(good) and "apt-get install --reinstall dataset-fashion-mnist" in caught.value.fix
    short = tmp_path / "short.gz"
    short.write_bytes(gzip.compress(idx_bytes(0x801, np.array([3, 1, 4]))[:-1], mtime=0))
    with pytest.raises(InputError, match="holds 2 data bytes, the header \\(3,\\) says 3"):
        fashion_mnist.read_idx(short, 0x801)


def test_fashion_mnist_canvases_trace_back_to_their_split_pools(tmp_path):
    root, out = tmp_path / "fmnist", tmp_path / "out"
    write_fashion_root(root)
    stats = fashion_mnist.prepare(root, out, train_canvases=40, test_canvases=15, val_fraction=0.25, seed=7)
    assert stats["counts"] == {"train": 40, "val": 10, "test": 15}
    assert stats["root"] == str(out.resolve()) and stats["num_labels"] == 10
    assert stats["source_images"]["pool"] == {"train": 40, "val": 20, "test": 20}  # 2 of 6 per class held out
    used = {}
    for split in SPLIT_NAMES:
        frame = read_split(out, split)
        assert frame["path"].str.startswith(f"images/{split}/").all()
        used[split] = set()
        for row in frame.itertuples():
            values = canvas_items(Path(stats["root"]) / row.path)
            assert 1 <= len(values) <= 4
            if split == "test":
                assert all(100 <= v < 120 for v in values)
                classes = {(v - 100) % 10 for v in values}
            else:
                assert all(1 <= v <= N_TRAIN_SOURCE for v in values)
                classes = {(v - 1) % 10 for v in values}
            assert row.labels == [fashion_mnist.CLASS_NAMES[c] for c in sorted(classes)]
            used[split] |= set(values)
    assert not used["train"] & used["val"]  # held-out train images only ever appear in val
    assert not list(tmp_path.glob(".out.*"))  # no staging folder left behind


def test_fashion_mnist_is_deterministic_and_streams_are_per_split(tmp_path):
    root = tmp_path / "fmnist"
    write_fashion_root(root)
    fashion_mnist.prepare(root, tmp_path / "a", train_canvases=20, test_canvases=10, seed=1)
    assert mscl_main(["prepare-fashion-mnist", "--root", str(root), "--out", str(tmp_path / "b"), "--train-canvases", "20", "--test-canvases", "10", "--seed", "1"]) == 0
    a, b = tree_bytes(tmp_path / "a"), tree_bytes(tmp_path / "b")
    stats_a, stats_b = json.loads(a.pop("stats.json")), json.loads(b.pop("stats.json"))
    assert a == b
    assert {k: v for k, v in stats_a.items() if k != "root"} == {k: v for k, v in stats_b.items() if k != "root"}
    # more train canvases leave the test canvases untouched
    fashion_mnist.prepare(root, tmp_path / "c", train_canvases=30, test_canvases=10, seed=1)
    c = tree_bytes(tmp_path / "c")
    assert {k: v for k, v in c.items() if "/test/" in k} == {k: v for k, v in a.items() if "/test/" in k}
    # rerunning onto an existing folder replaces it
    fashion_mnist.prepare(root, tmp_path / "a", train_canvases=10, test_canvases=5, seed=1)
    assert len(list((tmp_path / "a" / "images" / "train").iterdir())) == 10


def test_fashion_mnist_missing_or_bad_files(tmp_path, capsys):
    root = tmp_path / "fmnist"
    write_fashion_root(root)
    (root / "t10k-labels-idx1-ubyte.gz").unlink()
    args = ["prepare-fashion-mnist", "--root", str(root), "--out", str(tmp_path / "out"), "--train-canvases", "10", "--test-canvases", "5"]
    assert mscl_main(args) == 1
    err = capsys.readouterr().err
    assert "t10k-labels-idx1-ubyte.gz" in err and "apt-get install dataset-fashion-mnist" in err
    assert not (tmp_path / "out").exists()

    images = root / "train-images-idx3-ubyte.gz"
    images.write_bytes(gzip.compress(idx_bytes(0x801, np.zeros(5)), mtime=0))
    with pytest.raises(InputError, match="expected 0x00000803") as caught:
        fashion_mnist.prepare(root, tmp_path / "out", train_canvases=10, test_canvases=5)
    assert caught.value.path == str(images)


def test_image_pixels_are_each_canvas_block_means_in_manifest_order(tmp_path):
    """Constant-valued cells make the expected 28 x 28 vector known by hand: each 2 x 2 block
    of a 56-px canvas lies inside one cell, so its mean is that cell's value (0 if empty)."""
    root, images, pixels = tmp_path / "fmnist", tmp_path / "images", tmp_path / "pixels"
    write_fashion_root(root)
    fashion_mnist.prepare(root, images, train_canvases=12, test_canvases=6, val_fraction=0.25, seed=3)
    assert mscl_main(["image-pixels", "--data", str(images), "--size", "28", "--out", str(pixels)]) == 0
    stats = read_stats(pixels)
    assert stats["feature_dim"] == 28 * 28 and stats["modality"] == "tabular"
    assert stats["pixels"]["size"] == 28 and stats["image_manifest"]["format"] == fashion_mnist.FORMAT
    assert read_labels(pixels) == read_labels(images)
    for split in SPLIT_NAMES:
        source, converted = read_split(images, split), read_split(pixels, split)
        assert converted["id"].tolist() == source["id"].tolist()
        assert [list(x) for x in converted["labels"]] == [list(x) for x in source["labels"]]
        for row, vector in zip(source.itertuples(), converted["features"]):
            canvas = np.asarray(Image.open(images / row.path), dtype=np.float64)
            expected = np.zeros((28, 28))
            for top in (0, 14):
                for left in (0, 14):
                    expected[top : top + 14, left : left + 14] = canvas[2 * top, 2 * left] / 255.0  # the cell's constant
            np.testing.assert_allclose(np.asarray(vector).reshape(28, 28), expected, atol=1e-6)


def test_image_pixels_refuses_a_manifest_without_images_and_a_bad_size(tmp_path, capsys):
    tabular = tmp_path / "tabular"
    write_dataset(tabular, {split: features_frame([f"{split}-0"], [[0.5, 1.0]]) for split in SPLIT_NAMES})
    assert mscl_main(["image-pixels", "--data", str(tabular), "--size", "8", "--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert "train.parquet" in err and "no 'path' column" in err and not (tmp_path / "a").exists()
    root = tmp_path / "fmnist"
    write_fashion_root(root)
    fashion_mnist.prepare(root, tmp_path / "images", train_canvases=4, test_canvases=2, val_fraction=0.25, seed=0)
    assert mscl_main(["image-pixels", "--data", str(tmp_path / "images"), "--size", "0", "--out", str(tmp_path / "b")]) == 1
    assert "--size 0" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_every_apt_get_update_in_the_repository_keeps_the_english_descriptions():
    """A plain `apt-get update` on an image with Acquire::Languages "none" deletes the
    Translation-en indexes, the debtags source of the claim check, for every later run on the
    machine (it happened twice: start_local_slurm.sh, then .ci/slurm_check.sh). Every script,
    Makefile and CI file that updates apt must ask for the English descriptions."""
    repo = Path(__file__).resolve().parents[1]
    files = [repo / "Makefile", *repo.glob(".ci/*"), *repo.glob("tools/**/*.sh"), *repo.glob("workflow/**/*.smk")]
    updates = []
    for path in files:
        if path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if re.search(r"(?:^|[\s;&|(])apt-get\b.*\bupdate\b", code):  # a command, not a quoted message
                    updates.append((path.relative_to(repo), number, code))
    assert updates, "no apt-get update found: the search itself is broken"
    plain = [(str(path), number) for path, number, code in updates if "Acquire::Languages=en" not in code]
    assert not plain, f"apt-get update without -o Acquire::Languages=en: {plain}"
