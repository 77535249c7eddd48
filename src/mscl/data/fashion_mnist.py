"""Fashion-MNIST idx files -> multi-label canvases (`python -m mscl prepare-fashion-mnist`).

Input (--root, Debian's `dataset-fashion-mnist`: /usr/share/datasets/fashion-mnist):
`{train,t10k}-images-idx3-ubyte.gz` and `{train,t10k}-labels-idx1-ubyte.gz` in the idx format:
a big-endian 4-byte magic 0x00000803 (images: unsigned bytes, 3 dimensions) or 0x00000801
(labels: unsigned bytes, 1 dimension), one big-endian 4-byte size per dimension, then the
uint8 data (60,000 / 10,000 images of 28x28, labels 0..9). Plain (ungzipped) files are read too.

Canvases: a --canvas-size square (default 56) split into a 2x2 grid of cells; a canvas holds
1..--max-items (default 4) items, each a real Fashion-MNIST image placed in its own cell (at a
random offset when the cell is larger than the image), on the black background the images
share. Per canvas the item count is uniform in 1..max-items and each item's class is drawn
independently from a Zipf-like distribution, class k (Fashion-MNIST's index order) weighted
1 / (k + 1)**--class-exponent (default 1.0: the head class is about 10x the tail; 0 gives
uniform classes), so that head and tail label buckets mean something. The item image is drawn
uniformly, with replacement, from that class's images of the split's pool. Labels = the set of
classes present (10 labels; several items may share a class).

Pools: train canvases use the train file minus a held-out part; val canvases use that held-out
part, a --val-fraction (default 0.1) of each class's images of the train file (stratified,
round half up, at least one and never all of a class) chosen with the seed; test canvases use
the t10k file only. So no source image appears in two splits. There are
--train-canvases train canvases, round(val_fraction * train canvases) val canvases and
--test-canvases test canvases. Each split draws from its own random stream (numpy SeedSequence
of the seed and the split), so changing one split's count leaves the other splits unchanged.

Output: PNG files (8-bit greyscale) `images/{split}/fmnist-{split}-NNNNNN.png` under --out,
and the manifest with the `path` column relative to stats.json's `root` (the --out folder).
Everything is written into a hidden staging folder beside --out and renamed onto it at the
end; a failure leaves no output behind.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from PIL import Image
from tqdm import tqdm

from mscl import cli
from mscl.defaults import (
    FASHION_MNIST_CANVAS_SIZE as DEFAULT_CANVAS_SIZE,
    FASHION_MNIST_CLASS_EXPONENT as DEFAULT_CLASS_EXPONENT,
    FASHION_MNIST_GRID as GRID,  # cells per canvas side
    FASHION_MNIST_MAX_ITEMS as DEFAULT_MAX_ITEMS,
    FASHION_MNIST_VAL_FRACTION as DEFAULT_VAL_FRACTION,
)
from mscl.data.manifest import SPLITS, write_dataset
from mscl.errors import InputError
from mscl.io import read_maybe_gzipped, sha256_file, staging_folder

FORMAT = "Fashion-MNIST idx (gzipped) -> 2x2-grid multi-label canvases"
CLASS_NAMES = ("tshirt_top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle_boot")
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension
SOURCES = ("train", "t10k")
SPLIT_STREAM = {"train": 0, "val": 1, "test": 2}  # second SeedSequence entry of each split's random stream
HELD_OUT_STREAM = 3  # ... and of the draw that holds train images out for val
FIX_INSTALL = "apt-get install dataset-fashion-mnist (files under /usr/share/datasets/fashion-mnist), or pass --root"
FIX_FILE = "reinstall the files (apt-get install --reinstall dataset-fashion-mnist)"


def source_paths(root: Path, source: str) -> tuple[Path, Path]:
    """(images, labels) idx files of `train` or `t10k`."""
    return root / f"{source}-images-idx3-ubyte.gz", root / f"{source}-labels-idx1-ubyte.gz"


def read_idx(path: Path, magic: int) -> np.ndarray:
    """An idx file as a uint8 array shaped by its header; the magic number must be `magic`."""
    raw = read_maybe_gzipped(path, "Fashion-MNIST idx file", FIX_INSTALL, FIX_FILE)
    if len(raw) < 4:
        raise InputError(path, f"only {len(raw)} bytes, too short for an idx header", FIX_FILE, field="magic")
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        raise InputError(path, f"idx magic number is 0x{found:08x}, expected 0x{magic:08x}", FIX_FILE, field="magic")
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise InputError(path, f"the header of {ndim} dimension sizes is cut short", FIX_FILE, field="dimensions")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(shape, dtype=np.int64))
    if len(raw) - header != expected:
        raise InputError(path, f"holds {len(raw) - header} data bytes, the header {shape} says {expected}", FIX_FILE, field="data")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def load_source(root: Path, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Images [N, H, W] and labels [N] of one source file pair, checked against each other."""
    images_path, labels_path = source_paths(root, source)
    images, labels = read_idx(images_path, IMAGES_MAGIC), read_idx(labels_path, LABELS_MAGIC)
    if len(images) != len(labels):
        raise InputError(labels_path, f"has {len(labels)} labels but {images_path.name} has {len(images)} images", FIX_FILE)
    if labels.size and int(labels.max()) >= len(CLASS_NAMES):
        raise InputError(labels_path, f"has label {int(labels.max())}, Fashion-MNIST has classes 0..9", FIX_FILE)
    return images, labels


@dataclass(frozen=True)
class Pool:
    """Source images a split draws from, grouped by class."""

    images: np.ndarray  # [N, H, W] uint8
    by_class: list[np.ndarray]  # class -> indices into images


def make_pool(images: np.ndarray, labels: np.ndarray, members: np.ndarray, where: Path) -> Pool:
    by_class = [members[labels[members] == c] for c in range(len(CLASS_NAMES))]
    empty = [CLASS_NAMES[c] for c, idx in enumerate(by_class) if idx.size == 0]
    if empty:
        raise InputError(where, f"no image of class(es) {empty} in this pool", "use the full Fashion-MNIST files (or a larger --val-fraction)")
    return Pool(images=images, by_class=by_class)


def hold_out(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of the held-out images: per class floor(fraction * n + 0.5) of its n images,
    at least one and at most n - 1 (a class with a single image stays in train)."""
    chosen = []
    for c in range(len(CLASS_NAMES)):
        members = np.flatnonzero(labels == c)
        if len(members) < 2:
            continue
        count = min(len(members) - 1, max(1, int(np.floor(fraction * len(members) + 0.5))))
        chosen.append(rng.permutation(members)[:count])
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)


def class_weights(exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, len(CLASS_NAMES) + 1, dtype=np.float64) ** exponent
    return weights / weights.sum()


@dataclass(frozen=True)
class Layout:
    """Every random choice of one split's canvases, drawn up front."""

    item_counts: np.ndarray  # [C] items per canvas
    classes: np.ndarray  # [sum(item_counts)] class of each item, canvas after canvas
    sources: np.ndarray  # [items] index into the pool's images
    cells: np.ndarray  # [items] grid cell 0..GRID*GRID-1 (distinct within a canvas)
    offsets: np.ndarray  # [items, 2] (row, col) offset inside the cell


def draw_layout(rng: np.random.Generator, pool: Pool, count: int, max_items: int, weights: np.ndarray, cell: int) -> Layout:
    """Item counts, classes, source images, cells and offsets of `count` canvases."""
    item_counts = rng.integers(1, max_items + 1, size=count)
    total = int(item_counts.sum())
    classes = rng.choice(len(weights), size=total, p=weights)
    sizes = np.array([len(idx) for idx in pool.by_class])
    picks = np.floor(rng.random(total) * sizes[classes]).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sources = np.concatenate(pool.by_class)[starts[classes] + picks]
    cell_order = np.argsort(rng.random((count, GRID * GRID)), axis=1)  # a random permutation of cells per canvas
    slot = np.arange(total) - np.repeat(np.cumsum(item_counts) - item_counts, item_counts)
    cells = cell_order[np.repeat(np.arange(count), item_counts), slot]
    height, width = pool.images.shape[1:]
    offsets = np.stack([rng.integers(0, cell - height + 1, size=total), rng.integers(0, cell - width + 1, size=total)], axis=1)
    return Layout(item_counts, classes, sources, cells, offsets)


def render(pool: Pool, layout: Layout, start: int, stop: int, canvas_size: int, cell: int) -> np.ndarray:
    """Pixels [canvas_size, canvas_size] of the canvas whose items are layout rows start..stop-1."""
    pixels = np.zeros((canvas_size, canvas_size), dtype=np.uint8)
    height, width = pool.images.shape[1:]
    for item in range(start, stop):
        row = (layout.cells[item] // GRID) * cell + layout.offsets[item, 0]
        col = (layout.cells[item] % GRID) * cell + layout.offsets[item, 1]
        pixels[row : row + height, col : col + width] = pool.images[layout.sources[item]]
    return pixels


def write_split(staging: Path, split: str, pool: Pool, layout: Layout, canvas_size: int, cell: int) -> pd.DataFrame:
    """Write one split's PNG files; return its manifest rows."""
    folder = staging / "images" / split
    folder.mkdir(parents=True)
    ids, labels, paths = [], [], []
    ends = np.cumsum(layout.item_counts)
    for index, stop in enumerate(tqdm(ends, desc=f"{split} canvases", unit="img", disable=None)):
        start = int(stop - layout.item_counts[index])
        sample_id = f"fmnist-{split}-{index:06d}"
        rel_path = f"images/{split}/{sample_id}.png"
        Image.fromarray(render(pool, layout, start, int(stop), canvas_size, cell)).save(staging / rel_path, format="PNG")
        ids.append(sample_id)
        labels.append([CLASS_NAMES[c] for c in sorted(set(layout.classes[start:stop].tolist()))])
        paths.append(rel_path)
    return pd.DataFrame({"id": ids, "labels": labels, "path": paths})


def check_options(train: int, test: int, val_fraction: float, canvas_size: int, max_items: int, class_exponent: float) -> None:
    if train < 1 or test < 1:
        raise InputError(None, "--train-canvases and --test-canvases must be at least 1", "give positive counts", field="--train-canvases")
    if not 0.0 < val_fraction < 1.0:
        raise InputError(None, f"--val-fraction {val_fraction} is not strictly between 0 and 1", "give e.g. 0.1", field="--val-fraction")
    if round(val_fraction * train) < 1:
        raise InputError(None, f"--val-fraction {val_fraction} of {train} train canvases leaves no val canvas", "raise --train-canvases or --val-fraction", field="--val-fraction")
    if not 1 <= max_items <= GRID * GRID:
        raise InputError(None, f"--max-items {max_items} must be in 1..{GRID * GRID}", f"a canvas has {GRID * GRID} cells", field="--max-items")
    if canvas_size < 1 or not np.isfinite(class_exponent) or class_exponent < 0:
        raise InputError(None, "--canvas-size must be positive and --class-exponent finite and >= 0", "use the defaults 56 and 1.0", field="--canvas-size")


def publish(staging: Path, out: Path) -> None:
    """Rename the finished staging folder onto `out`, replacing an older output."""
    if out.exists():
        old = staging_folder(out)
        os.replace(out, old / out.name)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out)


def prepare(
    root: Path,
    out: Path,
    train_canvases: int,
    test_canvases: int,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    seed: int = 0,
    canvas_size: int = DEFAULT_CANVAS_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    class_exponent: float = DEFAULT_CLASS_EXPONENT,
) -> dict[str, Any]:
    """Compose the canvases from the idx files under `root`, write PNGs and manifest to `out`."""
    check_options(train_canvases, test_canvases, val_fraction, canvas_size, max_items, class_exponent)
    root, out = Path(root), Path(out)
    if not root.is_dir():
        raise InputError(root, "Fashion-MNIST folder not found", FIX_INSTALL, field="--root")
    started = time.perf_counter()
    train_images, train_labels = load_source(root, "train")
    test_images, test_labels = load_source(root, "t10k")
    if train_images.shape[1:] != test_images.shape[1:]:
        raise InputError(source_paths(root, "t10k")[0], f"images are {test_images.shape[1:]}, the train images {train_images.shape[1:]}", FIX_FILE)
    cell = canvas_size // GRID
    if cell < max(train_images.shape[1:]):
        raise InputError(None, f"--canvas-size {canvas_size} gives {cell}-pixel cells, smaller than the {train_images.shape[1:]} images", f"use at least {GRID * max(train_images.shape[1:])}", field="--canvas-size")

    val_members = hold_out(train_labels, val_fraction, np.random.default_rng(np.random.SeedSequence([seed, HELD_OUT_STREAM])))
    train_members = np.setdiff1d(np.arange(len(train_images)), val_members)
    train_path = source_paths(root, "train")[1]
    pools = {
        "train": make_pool(train_images, train_labels, train_members, train_path),
        "val": make_pool(train_images, train_labels, val_members, train_path),
        "test": make_pool(test_images, test_labels, np.arange(len(test_images)), source_paths(root, "t10k")[1]),
    }
    counts = {"train": train_canvases, "val": round(val_fraction * train_canvases), "test": test_canvases}
    weights = class_weights(class_exponent)

    staging = staging_folder(out)
    try:
        splits, items, distinct_sources = {}, {}, {}
        for split in SPLITS:
            rng = np.random.default_rng(np.random.SeedSequence([seed, SPLIT_STREAM[split]]))
            layout = draw_layout(rng, pools[split], counts[split], max_items, weights, cell)
            splits[split] = write_split(staging, split, pools[split], layout, canvas_size, cell)
            items[split] = round(float(layout.item_counts.mean()), 4)
            distinct_sources[split] = int(np.unique(layout.sources).size)
        info = {
            "dataset": "fashion_mnist_canvases",
            "format": FORMAT,
            "root": str(out.resolve()),
            "source_root": str(root.resolve()),
            "seed": seed,
            "split_policy": (
                f"train canvases from the train file minus a held-out {val_fraction:g} of each class's images, val canvases "
                f"(round({val_fraction:g} x train canvases)) from that held-out part, test canvases from the t10k file; "
                f"numpy SeedSequence([{seed}, split]) per split"
            ),
            "canvas": {
                "size": canvas_size,
                "grid": GRID,
                "cell": cell,
                "max_items": max_items,
                "class_exponent": class_exponent,
                "class_weights": {name: round(float(w), 6) for name, w in zip(CLASS_NAMES, weights)},
                "mean_items_per_canvas": items,
            },
            "source_images": {
                "pool": {split: int(sum(len(idx) for idx in pools[split].by_class)) for split in SPLITS},
                "distinct_used": distinct_sources,
            },
            "sources": {p.name: sha256_file(p) for source in SOURCES for p in source_paths(root, source)},
            "dropped": {"canvases": 0},
        }
        stats = write_dataset(staging, splits, labels=list(CLASS_NAMES), info=info)
        publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    stats["seconds"] = round(time.perf_counter() - started, 2)
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-fashion-mnist --out DIR --train-canvases N --test-canvases M [...]`."""
    args = cli.parse_args("prepare-fashion-mnist", argv)
    stats = prepare(
        args.root, args.out, args.train_canvases, args.test_canvases, args.val_fraction, args.seed, args.canvas_size, args.max_items, args.class_exponent
    )
    print(
        f"prepare-fashion-mnist: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} "
        f"avg_labels={stats['avg_labels']:.3f} seconds={stats['seconds']}"
    )
    return 0
