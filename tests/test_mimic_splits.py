"""The fixed MIMIC split lists: paper counts, sha256 verification, copy and download paths."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading
from pathlib import Path
from typing import Iterator

import pytest

from mscl.data import mimic_splits
from mscl.errors import InputError

# Paper, Table "Statistics of datasets": train / val / test per setting.
PAPER_COUNTS = {
    "mimic3": {"full": (47_723, 1_631, 3_372), "50": (8_066, 1_573, 1_729)},
    "mimic4_icd9": {"full": (188_533, 7_110, 13_709), "50": (170_664, 6_406, 12_405)},
    "mimic4_icd10": {"full": (110_442, 4_017, 7_851), "50": (104_077, 3_805, 7_368)},
}


@pytest.mark.parametrize("version", mimic_splits.VERSIONS)
def test_real_lists_match_the_paper_counts(mimic_split_lists: Path, version: str) -> None:
    lists = mimic_splits.load_split_lists(mimic_split_lists / version)
    for setting, (train, val, test) in PAPER_COUNTS[version].items():
        assert (len(lists[setting]["train"]), len(lists[setting]["val"]), len(lists[setting]["test"])) == (train, val, test)
    assert len(lists["top50"]) == 50
    # the 50 setting is a subset of the full setting, split by split
    for split in ("train", "val", "test"):
        assert lists["50"][split] <= lists["full"][split]


def test_known_first_codes(mimic_split_lists: Path) -> None:
    """Dotted ICD-9 top-50 lists, undotted ICD-10 list (first lines read from the files by eye)."""
    assert mimic_splits.load_split_lists(mimic_split_lists / "mimic3")["top50"][:3] == ["038.9", "244.9", "250.00"]
    assert mimic_splits.load_split_lists(mimic_split_lists / "mimic4_icd10")["top50"][:3] == ["J189", "I129", "G4700"]


def test_embedded_hashes_match_the_shared_checksum_file(mimic_split_lists: Path) -> None:
    listed = {}
    for line in (mimic_split_lists / "SHA256SUMS.txt").read_text().splitlines():
        digest, path = line.split()[:2]
        listed[path] = digest
    embedded = {f"{version}/{name}": pinned.sha256 for version, files in mimic_splits.SOURCES.items() for name, pinned in files.items()}
    assert embedded == listed


def test_pinned_urls() -> None:
    base = "https://raw.githubusercontent.com"
    sources = mimic_splits.SOURCES
    assert sources["mimic3"]["dev_50_hadm_ids.csv"].url(base) == (
        f"{base}/jamesmullenbach/caml-mimic/44a47455070d3d5c6ee69fb5305e32caec104960/mimicdata/mimic3/dev_50_hadm_ids.csv"
    )
    assert sources["mimic3"]["top50_code_list.txt"].url(base) == (
        f"{base}/MiuLab/PLM-ICD/410655073b70b7cc41b7dbd600c95d72bd11a4d3/data/mimic3/ALL_CODES_50.txt"
    )
    assert sources["mimic4_icd10"]["top50_code_list.txt"].url(base) == (
        f"{base}/thomasnguyen92/MIMIC-IV-ICD-data-processing/076ac16b54b758701a2b1b8e2d0c2fdae945457c"
        "/mimicdata/mimic4_icd10/top50_icd10_code_list.txt"
    )


def test_copy_from_local_folder_verifies(mimic_split_lists: Path, tmp_path: Path) -> None:
    out = mimic_splits.fetch_split_lists("mimic3", tmp_path / "lists", source=mimic_split_lists / "mimic3")
    assert sorted(p.name for p in out.iterdir()) == sorted(mimic_splits.ALL_FILES)
    for name in mimic_splits.ALL_FILES:
        assert (out / name).read_bytes() == (mimic_split_lists / "mimic3" / name).read_bytes()
    # the parent folder (holding mimic3/, mimic4_icd9/, ...) is accepted too
    again = mimic_splits.fetch_split_lists("mimic4_icd10", tmp_path / "icd10", source=mimic_split_lists)
    assert len(mimic_splits.load_split_lists(again)["full"]["test"]) == 7_851
    assert sorted(p.name for p in tmp_path.iterdir()) == ["icd10", "lists"]  # no staging left


def tampered_copy(mimic_split_lists: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the mimic3 lists whose dev_full list lost its last line; returns (folder, new sha)."""
    source = tmp_path / "tampered"
    shutil.copytree(mimic_split_lists / "mimic3", source)
    path = source / "dev_full_hadm_ids.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    return source, hashlib.sha256(path.read_bytes()).hexdigest()


def test_tampered_file_fails_and_leaves_nothing(mimic_split_lists: Path, tmp_path: Path) -> None:
    source, actual = tampered_copy(mimic_split_lists, tmp_path)
    out = tmp_path / "out" / "lists"
    with pytest.raises(InputError) as caught:
        mimic_splits.fetch_split_lists("mimic3", out, source=source)
    message = str(caught.value)
    assert "dev_full_hadm_ids.csv" in message
    assert "5bc77377a675b17631844f6253ecec5c0b2b39c294aebe34aebbd2c733d8efb4" in message  # expected
    assert actual in message
    assert "--no-verify" in message and "Fix:" in message
    assert not out.exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_no_verify_accepts_custom_lists(mimic_split_lists: Path, tmp_path: Path) -> None:
    source, _ = tampered_copy(mimic_split_lists, tmp_path)
    assert mimic_splits.main(["--version", "mimic3", "--out", str(tmp_path / "out"), "--source", str(source), "--no-verify"]) == 0
    assert len(mimic_splits.load_split_lists(tmp_path / "out")["full"]["val"]) == 1_630


def test_missing_source_file(mimic_split_lists: Path, tmp_path: Path) -> None:
    source = tmp_path / "partial"
    shutil.copytree(mimic_split_lists / "mimic3", source)
    (source / "top50_code_list.txt").unlink()
    with pytest.raises(InputError, match="top50_code_list.txt"):
        mimic_splits.fetch_split_lists("mimic3", tmp_path / "out", source=source)
    assert not (tmp_path / "out").exists()


def test_load_rejects_incomplete_or_bad_folder(mimic_split_lists: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="fetch-mimic-splits"):
        mimic_splits.load_split_lists(tmp_path)
    shutil.copytree(mimic_split_lists / "mimic3", tmp_path / "bad")
    (tmp_path / "bad" / "test_50_hadm_ids.csv").write_text("100001\n1e5\n")
    with pytest.raises(InputError, match="line 2"):
        mimic_splits.load_split_lists(tmp_path / "bad")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture
def mirror(mimic_split_lists: Path, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A local HTTP server laid out like raw.githubusercontent.com for the mimic3 files."""
    tree = tmp_path / "mirror"
    for name, pinned in mimic_splits.SOURCES["mimic3"].items():
        target = tree / pinned.repo / pinned.commit / pinned.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mimic_split_lists / "mimic3" / name, target)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(tree)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield tree, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_download_verifies(mirror, mimic_split_lists: Path, tmp_path: Path, monkeypatch) -> None:
    _, base = mirror
    monkeypatch.setattr(mimic_splits, "RAW_BASE", base)
    assert mimic_splits.main(["--version", "mimic3", "--out", str(tmp_path / "got"), "--timeout", "5"]) == 0
    for name in mimic_splits.ALL_FILES:
        assert (tmp_path / "got" / name).read_bytes() == (mimic_split_lists / "mimic3" / name).read_bytes()


def test_download_of_tampered_file_fails(mirror, tmp_path: Path, monkeypatch) -> None:
    tree, base = mirror
    monkeypatch.setattr(mimic_splits, "RAW_BASE", base)
    pinned = mimic_splits.SOURCES["mimic3"]["top50_code_list.txt"]
    (tree / pinned.repo / pinned.commit / pinned.path).write_text("401.9\n")
    with pytest.raises(InputError) as caught:
        mimic_splits.fetch_split_lists("mimic3", tmp_path / "got", timeout_s=5)
    assert pinned.url(base) in str(caught.value) and "sha256 mismatch" in str(caught.value)
    assert not (tmp_path / "got").exists()


def test_offline_download_gives_the_fix(tmp_path: Path, monkeypatch) -> None:
    # Port 9 on loopback (discard) has no listener here: the connection is refused at once.
    monkeypatch.setattr(mimic_splits, "RAW_BASE", "http://127.0.0.1:9")
    with pytest.raises(InputError) as caught:
        mimic_splits.fetch_split_lists("mimic3", tmp_path / "got", timeout_s=2)
    assert "download failed" in str(caught.value) and "--source" in str(caught.value)
    assert not (tmp_path / "got").exists()
