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
