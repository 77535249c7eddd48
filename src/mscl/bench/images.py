"""`python -m mscl bench images`: how fast the image check of every preparation decodes.

Writes `--images` photo-like JPEGs of `--size` pixels (smooth noise upsampled, quality 90: they
decode like camera photos, not like flat colour) into a scratch folder, then times
`mscl.data.images.image_problems` on them: the header-only check of PIL's `verify()` that the
parsers used before (it misses a JPEG cut short), and the full decode with 1, 2, ... threads up
to `--workers`. Prints milliseconds per image and images per second, and what a dataset of
COCO 2014's 123k images would take. Figures only, never pass/fail.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from mscl import cli
from mscl.data.images import decode_workers, image_problems

COCO_IMAGES = 123_287  # train2014 + val2014


def write_images(folder: Path, count: int, size: tuple[int, int], seed: int) -> list[str]:
    """`count` JPEGs of `size` (width, height) under `folder`, their names."""
    rng = np.random.default_rng(seed)
    names = []
    for i in range(count):
        coarse = rng.integers(0, 256, (size[1] // 8, size[0] // 8, 3), dtype=np.uint8)
        Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC).save(folder / f"{i:05d}.jpg", quality=90)
        names.append(f"{i:05d}.jpg")
    return names


def header_only(folder: Path, names: Sequence[str]) -> None:
    """The check the parsers made before: PIL's verify(), which reads headers, not pixels."""
    for name in names:
        with Image.open(folder / name) as image:
            image.verify()


def timed(function, *arguments) -> float:
    start = time.perf_counter()
    function(*arguments)
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench images", argv)
    folder = Path(tempfile.mkdtemp(prefix="mscl-bench-images-"))
    try:
        names = write_images(folder, args.images, tuple(args.size), args.seed)
        counts = sorted({1, *range(2, (args.workers or decode_workers()) + 1)})
        print(f"{args.images} JPEGs of {args.size[0]}x{args.size[1]} px; this process may use {decode_workers()} CPUs")
        print(f"{'check':<28} {'ms/image':>9} {'images/s':>9} {'COCO 123k':>10}")
        rows = [("header only (verify, before)", timed(header_only, folder, names))]
        for workers in counts:
            rows.append((f"full decode, {workers} thread{'s' if workers > 1 else ''}", timed(image_problems, folder, names, True, workers)))
        for label, seconds in rows:
            per_image = seconds / len(names)
            print(f"{label:<28} {per_image * 1000:>9.2f} {1 / per_image:>9.0f} {COCO_IMAGES * per_image / 60:>8.1f} min")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0
