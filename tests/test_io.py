"""Atomic writes: all or nothing, with ordinary file permissions."""

from __future__ import annotations

import os
import stat

import pytest

from mscl.io import atomic_path, write_json


def test_atomic_path_replaces_on_success_with_umask_permissions(tmp_path):
    dest = tmp_path / "sub" / "out.txt"
    old_mask = os.umask(0o022)
    try:
        with atomic_path(dest) as tmp:
            tmp.write_text("new")
            assert not dest.exists()
    finally:
        os.umask(old_mask)
    assert dest.read_text() == "new"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o644
    assert [p.name for p in dest.parent.iterdir()] == ["out.txt"]


def test_atomic_path_leaves_old_file_and_no_temp_on_failure(tmp_path):
    dest = tmp_path / "out.json"
    write_json(dest, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(dest) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert dest.read_text().strip().startswith("{") and '"a": 1' in dest.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_killed_writers_temporaries_are_removed_by_the_next_write_a_live_ones_kept(tmp_path):
    """SIGKILL mid-write leaves `.{name}.tmp-{pid}-*` behind (no cleanup can run): the next
    atomic write or staging folder of the same destination removes it, once its process is
    gone; a temporary of a live writer, or of another destination, stays."""
    import subprocess
    import sys

    from mscl.io import remove_stale_temporaries, staging_folder

    dest = tmp_path / "checkpoint.pt"
    dest.write_text("epoch 1")
    writer = subprocess.run(
        [sys.executable, "-c",
         "import os, sys\nfrom mscl.io import atomic_path, staging_folder\n"
         f"staging_folder({str(tmp_path / 'manifest')!r}).joinpath('train.parquet').write_text('half')\n"
         f"with atomic_path({str(dest)!r}) as tmp:\n    tmp.write_text('epoch 2, half written')\n    os.kill(os.getpid(), 9)\n"],
    )
    assert writer.returncode == -9
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert [name.split(".tmp-")[0] for name in left] == [".checkpoint.pt", ".manifest"]
    live = tmp_path / f".checkpoint.pt.tmp-{os.getpid()}-live.tmp"
    other = tmp_path / ".encoder.pt.tmp-999999999-x.tmp"
    live.write_text("being written"), other.write_text("another file's")
    with atomic_path(dest) as tmp:
        tmp.write_text("epoch 2")
    staging_folder(tmp_path / "manifest").rmdir()
    assert dest.read_text() == "epoch 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".encoder.pt.tmp-999999999-x.tmp", live.name, "checkpoint.pt"])
    assert remove_stale_temporaries(tmp_path / "encoder.pt") == [other] and live.exists()
