"""AF_UNIX socket paths: Linux's length limit, and the short folder used instead of a TMPDIR so
deep that a socket under it could not be bound (a cluster job's scratch, pytest's tmp_path)."""

from __future__ import annotations

import os
import tempfile

SOCKET_PATH_MAX = 107  # bytes of an AF_UNIX socket path (Linux sun_path, less its NUL)
SHORT_TMPDIR = "/tmp"  # where socket folders go when one under TMPDIR would be too long
# What multiprocessing binds under the temporary folder when a process first hands a file
# descriptor to another (`multiprocessing.resource_sharer`): pymp-XXXXXXXX/listener-XXXXXXXX.
MULTIPROCESSING_LISTENER = os.path.join("pymp-" + "x" * 8, "listener-" + "x" * 8)


def socket_base(relative: str) -> str:
    """TMPDIR, or SHORT_TMPDIR when the socket path `relative` under TMPDIR would be longer than
    AF_UNIX allows."""
    base = tempfile.gettempdir()
    return base if len(os.fsencode(os.path.join(base, relative))) <= SOCKET_PATH_MAX else SHORT_TMPDIR


def shorten_multiprocessing_tempdir() -> None:
    """Point this process's temporary folder at SHORT_TMPDIR if multiprocessing's socket under
    TMPDIR would be too long to bind. A DataLoader worker hands every batch's tensors to the
    training process through such a socket; under a deep TMPDIR its bind fails in the worker's
    queue thread, the batch is lost and the training process waits for it forever."""
    tempfile.tempdir = socket_base(MULTIPROCESSING_LISTENER)
