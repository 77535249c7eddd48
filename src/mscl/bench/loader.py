"""`python -m mscl bench loader`: how many training views per second the image loader delivers.

It iterates the pretraining DataLoader as a run does (`mscl.train.data`: shuffled two-view
ImageDataset, JPEG decode, random resized crop with Pillow, collate with the batch's sparse
labels) over a prepared image manifest, by default `make-synthetic coco --scale 0.01` (about
1,200 JPEGs of 500 x 375 px, 110 KB), at `--image-size` (224, the paper's). For each worker
count it prints views per second after the workers' start (the first batch is not timed), and
with 0 workers where one sample's CPU time goes, and the views/s of one busy core. The copy to a GPU (pinned memory, `non_blocking`)
needs a GPU and is measured by the GPU check (docs/gpu.md). Figures only, never pass/fail.
"""

from __future__ import annotations

import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import torch

from mscl import cli
from mscl.data.manifest import read_labels
from mscl.train.augment import train_crop
from mscl.train.data import ImageDataset, collate, load_split, make_loader
from mscl.train.decode import open_rgb

CROP_SCALE_MIN = 0.2  # config/paper.yaml's resnet50


def views_per_second(dataset: ImageDataset, batch_size: int, workers: int, batches: int) -> float:
    """Two-view samples the loader yields per second x 2, over `batches` batches after the first."""
    loader = make_loader(dataset, batch_size, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(0),
                         num_workers=workers, device=torch.device("cpu"))  # fmt: skip
    iterator = iter(loader)
    next(iterator)  # worker start-up and the first batch
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * batch_size * 2 / (time.perf_counter() - started)


def sample_breakdown(dataset: ImageDataset, samples: int) -> list[tuple[str, float]]:
    """Median CPU milliseconds (this process's CPU time, so other load on the machine does not
    count) per sample of each part of a two-view item, on one thread as in a worker."""
    times: dict[str, list[float]] = {"decode (open + RGB)": [], "two crops + resize": [], "collate (per sample)": []}
    generator = torch.Generator().manual_seed(0)
    items = []
    for index in range(samples):
        started = time.process_time()
        image = open_rgb(dataset.split.items[index])
        decoded = time.process_time()
        views = torch.stack([train_crop(image, dataset.image_size, CROP_SCALE_MIN, generator) for _ in range(2)])
        times["decode (open + RGB)"].append(decoded - started)
        times["two crops + resize"].append(time.process_time() - decoded)
        items.append({"images": views, "label_ids": dataset.split.labels.ids(index)})
    for start in range(0, len(items) - 31, 32):
        started = time.process_time()
        collate(items[start : start + 32], dataset.split.num_labels)
        times["collate (per sample)"].append((time.process_time() - started) / 32)
    return [(part, statistics.median(values) * 1000) for part, values in times.items() if values]


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench loader", argv)
    workdir = None
    try:
        data = args.data
        if data is None:
            from mscl.demo.synthetic import make_synthetic

            workdir = Path(tempfile.mkdtemp(prefix="mscl-bench-loader-"))
            data = workdir / "coco"
            make_synthetic("coco", 0.01, data)
        split = load_split(data, "train", read_labels(data), "image")
        dataset = ImageDataset(split, args.image_size, views=2, crop_scale_min=CROP_SCALE_MIN)
        print(f"bench loader: {data} ({len(split):,} train images), {args.image_size} px, batch {args.batch_size}, {torch.get_num_threads()} torch thread(s)")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as in a DataLoader worker
        parts = sample_breakdown(dataset, min(args.samples, len(split)))
        torch.set_num_threads(threads)
        for part, milliseconds in parts:
            print(f"  {part:<24} {milliseconds:7.2f} CPU ms per sample")
        per_core = 2000 / sum(milliseconds for _, milliseconds in parts)
        print(f"  one core: {per_core:.0f} views/s; {args.target:,} views/s take {math.ceil(args.target / per_core)} busy cores")
        for workers in args.workers:
            rate = views_per_second(dataset, args.batch_size, workers, args.batches)
            print(f"  {workers} worker(s): {rate:8.0f} views/s ({rate / max(workers, 1):6.0f} per worker)", flush=True)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    print("views/s with W workers on W free cores is about W x the per-worker figure (docs/scale.md)", file=sys.stderr)
    return 0
