"""The image check every image preparation shares: COCO, VOC, NUS-WIDE, and the CSV and manifest
sources of one's own (their options: `mscl.cli.add_image_arguments`, `add_own_dataset_arguments`).

One standard for every format: each image a manifest will list is there and, unless the user
turns the check off (`--no-verify-images`, the config's `verify_images: false`), decodes in full
with Pillow, the decoder the training loader uses (`mscl.train.decode.open_rgb`): a file cut
short, a JPEG with a broken scan or a PNG with a bad chunk is found while the dataset is prepared,
not by a GPU job hours later. Decoding is the slow part (about 1-5 ms per photo-sized image on
one core); Pillow releases the GIL while it decodes, so the images are decoded by a pool of
threads, one per CPU this process may use (`python -m mscl bench images` measures it).

A bad image is refused with its path (and the line or row that lists it), every bad one of a
list in one message; the image parsers' `--missing-images drop` drops and counts them instead,
and stats.json lists each image dropped as undecodable by its path.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from PIL import Image

from mscl.errors import InputError, OptionNames, shown

# The longest image path an error quotes.
SHOWN_PATH = 200
# How many bad images one error lists (the count says how many more there are).
SHOWN_BAD_IMAGES = 10
MISSING = "missing"
# How many dropped missing images a preparation names in its log (it counts them all).
LOGGED_MISSING = 20


def decode_workers() -> int:
    """The CPUs this process may run on (a cluster job's allocation, not the node's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def image_problem(path: Path, verify: bool) -> str | None:
    """Why the image at `path` cannot be used ("missing", or "unreadable (<error>)"), or None
    when it is fine. Existence is always checked; with `verify` every pixel is decoded."""
    if not path.is_file():
        return MISSING
    if verify:
        try:
            with Image.open(path) as image:
                image.load()
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
            return f"unreadable ({type(error).__name__}: {str(error)[:200]})"
    return None


def image_problems(root: Path, rel_paths: Sequence[str], verify: bool, workers: int | None = None) -> list[str | None]:
    """`image_problem` of each image (relative to `root`; an absolute path as it is), in order,
    decoded by a pool of `workers` threads (default: `decode_workers()`)."""
    paths = [root / rel_path for rel_path in rel_paths]
    workers = workers or decode_workers()
    if not verify or workers == 1 or len(paths) < 2:
        return [image_problem(path, verify) for path in paths]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda path: image_problem(path, verify), paths, chunksize=64))


@dataclass(frozen=True)
class BadImage:
    """An image that cannot be used: where it is listed (a line or row; '' for a whole list),
    its path as listed, and why."""

    where: str
    rel_path: str
    problem: str

    def describe(self, root: Path) -> str:
        name = shown(self.rel_path, SHOWN_PATH)
        looked = f" (looked for {root / self.rel_path})" if self.problem == MISSING and name == repr(self.rel_path) else ""
        return f"{self.where + ': ' if self.where else ''}image {name} is {self.problem}{looked}"


def bad_images_error(listed_in: Path, root: Path, bad: Sequence[BadImage], fix: str, field: str) -> InputError:
    """One error for every bad image of a list: the first SHOWN_BAD_IMAGES by path, and the count."""
    more = f"; and {len(bad) - SHOWN_BAD_IMAGES} more" if len(bad) > SHOWN_BAD_IMAGES else ""
    count = "an image that cannot be used" if len(bad) == 1 else f"{len(bad)} images that cannot be used"
    listed = "; ".join(image.describe(root) for image in bad[:SHOWN_BAD_IMAGES])
    return InputError(listed_in, f"{count} (paths relative to {root}): {listed}{more}", fix, field=field)


def require_images(
    root: Path, entries: Sequence[tuple[str, str]], verify: bool, listed_in: Path, field: str, names: OptionNames = OptionNames()
) -> None:
    """Raise one InputError, listing every bad image, unless each image of `entries` ((where it
    is listed, e.g. "line 4"; its path relative to `root`)) exists and, with `verify`, decodes.
    The error names `listed_in` (the file that lists the images) and `field` (the column holding
    them). A path with whitespace is not quoted (`mscl.errors.shown`: it may be text of a wrong column)."""
    problems = image_problems(root, [rel_path for _, rel_path in entries], verify)
    bad = [BadImage(where, rel_path, problem) for (where, rel_path), problem in zip(entries, problems) if problem is not None]
    if bad:
        undecodable = any(image.problem != MISSING for image in bad)
        skip = f"; {names('--no-verify-images')} skips decoding them" if verify and undecodable else ""
        raise bad_images_error(listed_in, root, bad, f"correct the paths (relative to {root}) or restore the images{skip}", field)


@dataclass(frozen=True)
class ImageScreen:
    """Which referenced images passed the checks, and which were dropped for which reason."""

    keep: list[bool]
    missing: int
    unreadable: list[BadImage] = field(default_factory=list)


def image_checks(verify: bool, on_problem: str, screens: Sequence[ImageScreen]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What an image parser records of its image checks: the options (--verify-images,
    --missing-images) and the images its `screens` dropped: the missing ones counted, the
    undecodable ones counted and listed by path (`unreadable_image_paths`)."""
    options = {"verify_images": verify, "missing_images": on_problem}
    unreadable = [image for screen in screens for image in screen.unreadable]
    dropped: dict[str, Any] = {"missing_images": sum(s.missing for s in screens), "unreadable_images": len(unreadable)}
    if unreadable:
        dropped["unreadable_image_paths"] = [image.rel_path for image in unreadable]
    return options, dropped


def require_path(path: Path, what: str, fix: str) -> Path:
    """Return `path` if it exists, else raise an InputError naming it."""
    if not path.exists():
        raise InputError(path, f"{what} not found", fix)
    return path


def screen_images(
    root: Path,
    rel_paths: Sequence[str],
    *,
    check_exists: bool,
    verify: bool,
    on_problem: str,
    listed_in: Path,
    field: str,
    names: OptionNames = OptionNames(),
) -> ImageScreen:
    """Check each image (relative to `root`) that `listed_in` lists: raise one error naming
    every bad one, or drop and count them (`on_problem` "drop"; the dropped missing ones are
    named on stderr, the first LOGGED_MISSING of them).

    `check_exists` False skips all checks (every image kept). `field` names the raw-file field
    that references the images, for the error message.
    """
    if not check_exists:
        return ImageScreen(keep=[True] * len(rel_paths), missing=0)
    problems = image_problems(root, rel_paths, verify)
    bad = [BadImage("", rel_path, problem) for rel_path, problem in zip(rel_paths, problems) if problem is not None]
    if bad and on_problem == "error":
        skip = f" ({names('--no-verify-images')} checks only their presence)" if verify else ""
        fix = f"restore them from the dataset archive, or set {names('--missing-images')} to drop to drop, count and list such images{skip}"
        raise bad_images_error(listed_in, root, bad, fix, field)
    missing = [image.rel_path for image in bad if image.problem == MISSING]
    for rel_path in missing[:LOGGED_MISSING]:
        print(f"dropped: {listed_in.name} lists image {rel_path}, which is missing under {root}", file=sys.stderr)
    if len(missing) > LOGGED_MISSING:
        print(f"dropped: {len(missing) - LOGGED_MISSING} more missing images of {listed_in.name}", file=sys.stderr)
    return ImageScreen(keep=[problem is None for problem in problems], missing=len(missing), unreadable=[image for image in bad if image.problem != MISSING])


def keep_screened(
    root: Path, frame: pd.DataFrame, verify: bool, on_problem: str, listed_in: Path, field: str, names: OptionNames = OptionNames()
) -> tuple[pd.DataFrame, ImageScreen]:
    """The rows of `frame` whose `path` image passes `screen_images` (existence checked and
    decoded only when `verify`), and the screen's counts."""
    screen = screen_images(root, list(frame["path"]), check_exists=verify, verify=verify, on_problem=on_problem, listed_in=listed_in, field=field, names=names)
    return frame[screen.keep].reset_index(drop=True), screen
