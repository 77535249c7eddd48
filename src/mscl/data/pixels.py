"""Image manifest -> manifest of grey pixel vectors (`python -m mscl image-pixels`).

    python -m mscl image-pixels --data DIR --size 28 --out DIR

Every image of every split is converted to 8-bit grey (PIL's "L": ITU-R 601-2 luma), shrunk to
--size x --size pixels by box (area) averaging, and written as size^2 float32 values in
[0, 1], row by row. A 56-pixel canvas at --size 28 becomes the means of its 2 x 2 pixel
blocks: nothing is cropped, nothing is interpolated. The output is a tabular manifest with the
same ids, labels and vocabulary, and `features` holding each image's vector; an `mlp` encoder
then trains on it like any feature-vector dataset. The claim check's CPU tier for
Fashion-MNIST uses it (docs/claim-check.md, "Amendment 3"). stats.json keeps the image
manifest's provenance (`image_manifest`) and adds `pixels`: the size and the conversion.
Like every manifest, the folder appears only when complete.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from PIL import Image
from tqdm import tqdm

from mscl import cli
from mscl.data.manifest import SPLITS, read_labels, read_split_with_content, write_dataset
from mscl.errors import InputError

CONVERSION = "PIL convert('L') (ITU-R 601-2 luma), resize to size x size with Resampling.BOX, / 255"


def grey_pixels(path: Path, size: int) -> np.ndarray:
    """[size * size] float32 in [0, 1]: the image at `path` in grey, box-averaged to size x size."""
    try:
        with Image.open(path) as image:
            grey = image.convert("L").resize((size, size), Image.Resampling.BOX)
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise InputError(path, f"unreadable image ({type(error).__name__})", "prepare the image manifest again") from error
    return np.asarray(grey, dtype=np.float32).reshape(-1) / 255.0


def to_pixels(data: Path, out: Path, size: int) -> dict[str, Any]:
    """Write the pixel-vector manifest of the image manifest `data` to `out`; return its stats."""
    if size < 1:
        raise InputError(None, f"--size {size} is not a positive pixel count", "give e.g. 28", field="--size")
    vocabulary = read_labels(data)
    frames = {name: read_split_with_content(data, name, "path", "pass an image manifest as --data") for name in SPLITS}
    stats_path = data / "stats.json"
    image_stats = json.loads(stats_path.read_text(encoding="utf-8")) if stats_path.is_file() else {}
    root = Path(image_stats.get("root", data))
    root = root if root.is_absolute() else data / root
    splits = {}
    for name, frame in frames.items():
        paths = tqdm(frame["path"], desc=f"pixels {name}", unit="img", disable=None, file=sys.stderr)
        vectors = [grey_pixels(root / rel_path, size) for rel_path in paths]
        splits[name] = pd.DataFrame({"id": frame["id"], "labels": frame["labels"], "features": vectors})
    info = {
        "dataset": image_stats.get("dataset", data.name),
        "format": "grey pixel vectors of an image manifest (mscl image-pixels)",
        "image_manifest": {key: value for key, value in image_stats.items() if key not in {"label_frequency", "counts"}},
        "pixels": {"size": size, "conversion": CONVERSION},
    }
    return write_dataset(out, splits, labels=vocabulary, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("image-pixels", argv)
    stats = to_pixels(args.data, args.out, args.size)
    print(f"image-pixels: wrote {args.out} counts={stats['counts']} feature_dim={stats['feature_dim']}")
    return 0
