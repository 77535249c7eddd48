"""A full disk during a checkpoint or manifest write: the previous file stays intact, nothing
half written is left, and the error names the file and the problem.

The disk is a small tmpfs mounted for the test (root only). Where mounting is not possible the
tests skip, saying why; they run wherever `mount -t tmpfs` works (the CI container runs as root).
"""

from __future__ import annotations

import gc
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from mscl.data.manifest import read_labels, read_split, write_dataset
from mscl.errors import InputError
from mscl.train.runtime import load_checkpoint, save_checkpoint

DISK_KIB = 512


@pytest.fixture
def small_disk(tmp_path: Path):
    """A DISK_KIB tmpfs at tmp_path/disk, unmounted afterwards; skip if it cannot be mounted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_KIB}k", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or mounted.returncode}): the full-disk tests need root")
    try:
        yield disk
    finally:
        gc.collect()  # the failed writer's file objects, kept alive by the caught exception's frames
        subprocess.run(["umount", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Fill the disk to the last block with one file."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as error:
        assert error.errno == 28, error
    finally:
        os.close(descriptor)
    return filler


def hidden(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*"))


def test_a_full_disk_during_a_checkpoint_write_keeps_the_previous_checkpoint(small_disk):
    checkpoint = small_disk / "run" / "checkpoint.pt"
    previous = {"epoch": 3, "weights": torch.arange(100.0)}
    save_checkpoint(checkpoint, previous)
    fill(small_disk)
    with pytest.raises(InputError) as raised:
        save_checkpoint(checkpoint, {"epoch": 4, "weights": torch.randn(20_000)})  # 80 KB
    message = str(raised.value)
    assert str(checkpoint) in message and "no space left on the device" in message and "Fix: free space" in message
    kept = load_checkpoint(checkpoint)
    assert kept["epoch"] == 3 and torch.equal(kept["weights"], previous["weights"])
    assert hidden(small_disk) == []


def test_a_full_disk_during_a_manifest_write_keeps_the_previous_manifest(small_disk):
    def splits(rows: int, text: str) -> dict[str, pd.DataFrame]:
        return {
            split: pd.DataFrame({"id": [f"{split}{i}" for i in range(rows)], "labels": [["a"] if i % 2 else ["a", "b"] for i in range(rows)], "text": [text] * rows})
            for split in ("train", "val", "test")
        }

    out = small_disk / "processed" / "aapd"
    write_dataset(out, splits(3, "short"))
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    fill(small_disk)
    noise = "".join(np.random.default_rng(0).choice(list("abcdefghij "), size=4000))  # does not compress away
    with pytest.raises(InputError) as raised:
        write_dataset(out, splits(200, noise))
    message = str(raised.value)
    assert str(out) in message and "no space left on the device" in message and "Fix: free space" in message
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert len(read_split(out, "train")) == 3 and read_labels(out) == ["a", "b"]
    assert hidden(small_disk) == []


def test_an_interrupt_during_a_write_on_a_full_disk_stays_an_interrupt(small_disk):
    """SIGTERM's SystemExit(143) keeps its exit status: a full disk is not blamed for it."""
    from mscl.io import atomic_path

    fill(small_disk)
    with pytest.raises(SystemExit) as raised, atomic_path(small_disk / "checkpoint.pt") as tmp:
        tmp.write_bytes(b"")
        raise SystemExit(143)
    assert raised.value.code == 143 and hidden(small_disk) == []
