"""Errors that reach users: each names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad or missing input. Never put note text (PHI) in the message."""

    def __init__(self, path: str | Path | None, problem: str, fix: str, field: str | None = None):
        self.path = None if path is None else str(path)
        self.field = field
        self.problem = problem
        self.fix = fix
        where = f"{self.path}" if self.path else "<input>"
        if field:
            where += f" (field {field!r})"
        super().__init__(f"{where}: {problem}. Fix: {fix}")
