"""Image checks shared by the image dataset parsers (their options: `mscl.cli.add_image_arguments`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from PIL import Image
from tqdm import tqdm

from mscl.errors import InputError, shown

# The longest image path an error quotes.
SHOWN_PATH = 200

@dataclass(frozen=True)
class ImageScreen:
    """Which referenced images passed the checks, and how many were dropped for which reason."""

    keep: list[bool]
    missing: int
    unreadable: int


def image_checks(verify: bool, on_problem: str, screens: Sequence[ImageScreen]) -> tuple[dict[str, Any], dict[str, int]]:
    """What an image parser records of its image checks: the options (--verify-images,
    --missing-images) and the images its `screens` dropped, missing or unreadable."""
    options = {"verify_images": verify, "missing_images": on_problem}
    dropped = {"missing_images": sum(s.missing for s in screens), "unreadable_images": sum(s.unreadable for s in screens)}
    return options, dropped


def require_path(path: Path, what: str, fix: str) -> Path:
    """Return `path` if it exists, else raise an InputError naming it."""
    if not path.exists():
        raise InputError(path, f"{what} not found", fix)
    return path


def image_problem(path: Path, verify: bool) -> str | None:
    """Why the image at `path` cannot be used, or None when it is fine.

    Existence is always checked; with `verify` the file is also opened and verified by PIL
    (header and, for PNG, chunk checksums) without decoding all pixels.
    """
    if not path.is_file():
        return "missing"
    if verify:
        try:
            with Image.open(path) as image:
                image.verify()
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
            return f"unreadable ({type(error).__name__}: {error})"
    return None


def require_image(root: Path, rel_path: str, verify: bool, listed_in: Path, where: str, field: str) -> None:
    """Raise an InputError unless the image `rel_path` (relative to `root`; an absolute path is
    taken as it is) exists and, with `verify`, opens: the error names `listed_in` (the file that
    lists the image), `where` (its line or row there) and `field` (the column holding it). A
    path with whitespace is not quoted (`mscl.errors.shown`: it may be text of a wrong column)."""
    problem = image_problem(root / rel_path, verify)
    if problem is not None:
        name = shown(rel_path, SHOWN_PATH)
        raise InputError(
            listed_in,
            f"{where}: image {name} is {problem} (looked for {root / rel_path if name == repr(rel_path) else 'it under ' + str(root)})",
            f"correct the path (relative to {root}) or restore the image"
            + ("; --no-verify-images skips opening the images" if verify and problem != "missing" else ""),
            field=field,
        )


def screen_images(
    root: Path,
    rel_paths: Sequence[str],
    *,
    check_exists: bool,
    verify: bool,
    on_problem: str,
    field: str,
) -> ImageScreen:
    """Check each image (relative to `root`); raise on the first bad one or drop and count it.

    `check_exists` False skips all checks (every image kept). `field` names the raw-file
    field that referenced the image, for the error message.
    """
    if not check_exists:
        return ImageScreen(keep=[True] * len(rel_paths), missing=0, unreadable=0)
    keep, missing, unreadable = [], 0, 0
    for rel_path in tqdm(rel_paths, desc="checking images", unit="img", disable=None):
        path = root / rel_path
        problem = image_problem(path, verify)
        if problem is not None and on_problem == "error":
            raise InputError(
                path,
                f"image {problem}",
                "restore the file from the dataset archive, or pass --missing-images drop to drop and "
                "count such images (--no-verify-images skips the check)",
                field=field,
            )
        keep.append(problem is None)
        missing += problem == "missing"
        unreadable += problem is not None and problem != "missing"
    return ImageScreen(keep=keep, missing=missing, unreadable=unreadable)


def keep_screened(root: Path, frame: pd.DataFrame, verify: bool, on_problem: str, field: str) -> tuple[pd.DataFrame, ImageScreen]:
    """The rows of `frame` whose `path` image passes `screen_images` (existence checked and
    opened only when `verify`), and the screen's counts."""
    screen = screen_images(root, list(frame["path"]), check_exists=verify, verify=verify, on_problem=on_problem, field=field)
    return frame[screen.keep].reset_index(drop=True), screen
