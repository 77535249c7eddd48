"""Atomic file output: nothing half written is ever left at the destination path.

Files and folders are built under a hidden temporary name beside their destination and
renamed onto it when complete. The name carries the writer's pid,
`.{name}.tmp-{pid}-{random}`: a writer killed outright (SIGKILL, the OOM killer) cannot
remove its temporary, so the next writer of the same destination removes every temporary
whose process is gone (`remove_stale_temporaries`). A full disk during a write is an
InputError naming the file; the previous file stays.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterator

from mscl.errors import InputError
from mscl.interrupt import alive

TEMPORARY_MARK = ".tmp-"  # .{name}.tmp-{pid}-{random}
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def temporary_prefix(dest: Path) -> str:
    """The start of every temporary name of `dest` made by this process."""
    return f".{dest.name}{TEMPORARY_MARK}{os.getpid()}-"


def remove_stale_temporaries(dest: str | Path) -> list[Path]:
    """Remove the temporary files and folders beside `dest` whose writer process is gone;
    return what was removed. A live writer's temporary is left alone."""
    dest = Path(dest)
    prefix = f".{dest.name}{TEMPORARY_MARK}"
    try:
        entries = [entry for entry in dest.parent.iterdir() if entry.name.startswith(prefix)]
    except FileNotFoundError:
        return []
    removed = []
    for entry in entries:
        pid = entry.name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or alive(int(pid)):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def staging_folder(dest: str | Path) -> Path:
    """A new hidden folder beside `dest` (mode 0700) to build it in, once stale ones of `dest`
    are removed. The caller renames it onto `dest` when complete, or removes it."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(dest)
    return Path(tempfile.mkdtemp(prefix=temporary_prefix(dest), dir=dest.parent))


@contextlib.contextmanager
def atomic_path(dest: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on success it is renamed onto `dest`.

    The temporary file lives in the same directory so that `os.replace` is atomic (same
    filesystem). On any exception the temporary file is removed and `dest` is untouched; a
    full disk becomes an InputError that names `dest`.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(dest)
    fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(dest), suffix=suffix or ".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600 files; give the result the permissions a plain open() would.
        os.chmod(tmp_path, 0o666 & ~_current_umask())
        os.replace(tmp_path, dest)
    except BaseException as error:
        # Before the temporary's blocks are freed; never for SystemExit or KeyboardInterrupt.
        full = isinstance(error, Exception) and no_space(error, dest.parent)
        tmp_path.unlink(missing_ok=True)
        if full:
            raise disk_full(dest, error) from error
        raise


def disk_full(dest: Path, error: BaseException) -> InputError:
    return InputError(
        dest, f"no space left on the device while writing it ({type(error).__name__}: {str(error)[:200]}); the previous version, if any, is unchanged",
        f"free space on the file system that holds {dest.parent} (or move paths.* in the config elsewhere), then rerun",
    )


@contextlib.contextmanager
def naming_a_full_disk(dest: Path) -> Iterator[None]:
    """Turn a full disk or quota while the block writes `dest` into an InputError naming `dest`."""
    try:
        yield
    except Exception as error:
        if no_space(error, dest.parent if dest.parent.exists() else None):
            raise disk_full(dest, error) from error
        raise


def no_space(error: BaseException, folder: Path | None = None) -> bool:
    """Whether `error` comes from a full disk or quota: an ENOSPC/EDQUOT OSError in its chain
    (pyarrow and Python raise those), or, for writers that drop the errno (torch.save raises
    "unexpected pos" RuntimeErrors), no block left on the file system holding `folder`."""
    seen = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in NO_SPACE:
            return True
        if isinstance(cause, InputError) and "no space left on the device" in str(cause):
            return True
        cause = cause.__cause__ or cause.__context__
    if folder is None:
        return False
    try:
        stats = os.statvfs(folder)
    except OSError:
        return False
    return stats.f_bavail == 0 or stats.f_bfree == 0


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(dest: str | Path, text: str) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_json(path: str | Path, what: str, fix_missing: str, fix_broken: str) -> Any:
    """The JSON document at `path`; a missing file or invalid JSON is an InputError naming the
    file (`what` it is) and the fix."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, f"{what} not found", fix_missing) from None
    except json.JSONDecodeError as error:
        raise InputError(path, f"not valid JSON ({error.msg} at line {error.lineno})", fix_broken) from None


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
