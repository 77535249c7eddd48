"""Atomic file output: nothing half written is ever left at the destination path."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterator

from mscl.errors import InputError


@contextlib.contextmanager
def atomic_path(dest: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on success it is renamed onto `dest`.

    The temporary file lives in the same directory so that `os.replace` is atomic (same
    filesystem). On any exception the temporary file is removed and `dest` is untouched.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix or ".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600 files; give the result the permissions a plain open() would.
        os.chmod(tmp_path, 0o666 & ~_current_umask())
        os.replace(tmp_path, dest)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(dest: str | Path, text: str) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(dest: str | Path, obj: Any) -> None:
    write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def sha256_file(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_bytes), b""):
            digest.update(block)
    return digest.hexdigest()


def read_maybe_gzipped(path: Path, what: str, fix_missing: str, fix_broken: str) -> bytes:
    """The bytes of `path`, gunzipped when they start with the gzip magic; a missing file or a
    broken gzip stream is an InputError naming the file and the fix."""
    if not path.is_file():
        raise InputError(path, f"{what} not found", fix_missing)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise InputError(path, f"not a readable gzip file ({error})", fix_broken) from error
    return raw
