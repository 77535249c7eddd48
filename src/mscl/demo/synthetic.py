"""`python -m mscl make-synthetic DATASET --scale S --out DIR`: a prepared dataset at the paper's shapes.

What the pipeline needs at the paper's sizes (docs/scale.md) is measured on data of those sizes:
the paper's split sizes x S, its label count and mean labels per sample (its Table
"Statistics of datasets", packaged as `mscl.report.paper`'s `statistics` rows), with
long-tailed label frequencies (Zipf, exponent LABEL_EXPONENT, over a shuffled label order).
The content has the real data's size, not its meaning:

* text datasets (AAPD, MIMIC): texts of pseudo-words with Zipf frequencies and log-normal
  lengths of the real documents' (TEXT_WORDS: MIMIC discharge summaries about 1,750 words,
  AAPD abstracts about 160), each carrying its labels' names as words so that a model can learn
  something;
* image datasets (MS-COCO, PASCAL, NUS-WIDE): JPEGs of real-photo size (IMAGE_SIZE, in either
  orientation, quality 90, about 110 KB): a colour ramp, a disc per label in that label's
  colour, and noise that gives the file a photo's entropy.

The output is the manifest format (`mscl.data.manifest`), written by `ManifestWriter` a chunk
at a time (the texts of MIMIC-IV-ICD9-Full at S = 1 are about 2 GB) and published only when
complete; images go to DIR/images/ first. stats.json records `synthetic: true`, the scale and
the seed. Same seed, same files. Labels are named L00000...; MIMIC's are no ICD codes.
"""

from __future__ import annotations

import io
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from mscl import cli
from mscl.data.manifest import SPLITS, ManifestWriter
from mscl.demo import long_tail_weights
from mscl.errors import InputError

# Zipf exponent of the label frequencies (rank r gets weight 1 / r**exponent): 0.8 puts the most
# frequent label on about 40% of MIMIC notes (16 labels of 25,230) and 35% of COCO images.
LABEL_EXPONENT = 0.8
# Words per document: (mean, standard deviation) of a log-normal length, clipped to [20, 8,000].
TEXT_WORDS = {"aapd": (160.0, 60.0), "mimic": (1750.0, 600.0)}
WORD_VOCABULARY = 30_000  # distinct pseudo-words, Zipf frequencies (exponent WORD_EXPONENT)
WORD_EXPONENT = 1.1
# An image's (width, height) in pixels, landscape or portrait; JPEG quality; noise std in grey levels.
IMAGE_SIZE = (500, 375)
JPEG_QUALITY = 90
IMAGE_NOISE = 30.0
CHUNK = 2_000  # samples generated and written at a time


@dataclass(frozen=True)
class Shape:
    """A dataset's size in the paper's statistics table."""

    sizes: dict[str, int]  # split -> samples
    num_labels: int
    mean_labels: float

    def scaled(self, scale: float) -> dict[str, int]:
        """Split sizes x scale, each at least 1."""
        return {split: max(1, round(count * scale)) for split, count in self.sizes.items()}


def paper_shape(dataset: str) -> Shape:
    """The paper's train/val/test sizes, label count and mean labels per sample of `dataset`."""
    from mscl.report.paper import paper_results

    rows = paper_results("statistics")
    rows = rows[rows["dataset"] == dataset]
    values = dict(zip(rows["metric"], rows["value"]))  # train, val, test, labels, avg
    if not values:
        raise InputError(None, f"the paper prints no statistics for {dataset!r}", "use one of the paper's datasets", field="dataset")
    return Shape({split: int(values[split]) for split in SPLITS}, int(values["labels"]), float(values["avg"]))


def modality(dataset: str) -> str:
    if dataset in ("coco", "voc", "nuswide"):
        return "image"
    return "text"


def label_names(num_labels: int) -> list[str]:
    return [f"L{index:05d}" for index in range(num_labels)]


def draw_label_sets(rng: np.random.Generator, count: int, num_labels: int, mean_labels: float, popularity: np.ndarray) -> list[np.ndarray]:
    """Each sample's label ids: 1 + Poisson(mean - 1) distinct labels drawn by `popularity`
    (probabilities over label ids), without repeats (a repeat is drawn again, up to a bound,
    so the most popular labels cap how many a sample can get: the realised mean is in stats.json)."""
    cumulative = np.cumsum(popularity)
    cumulative[-1] = 1.0
    wanted = np.minimum(1 + rng.poisson(max(mean_labels - 1.0, 0.0), size=count), num_labels)
    sets = []
    for size in wanted:
        draws = np.searchsorted(cumulative, rng.random(4 * size + 8), side="right")
        _, first = np.unique(draws, return_index=True)
        sets.append(draws[np.sort(first)[:size]])
    return sets


def pseudo_words(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` distinct lower-case pseudo-words of 2-4 consonant-vowel syllables."""
    consonants, vowels = list("bcdfghjklmnprstvz"), list("aeiou")
    syllables = np.array([c + v for c in consonants for v in vowels])
    words: dict[str, None] = {}
    while len(words) < count:
        lengths = rng.integers(2, 5, size=count)
        parts = rng.integers(0, len(syllables), size=(count, 4))
        for length, row in zip(lengths, parts):
            words.setdefault("".join(syllables[row[:length]]), None)
    return np.array(list(words)[:count], dtype=object)


def texts(rng: np.random.Generator, label_sets: Sequence[np.ndarray], names: Sequence[str], words: np.ndarray, length: tuple[float, float]) -> list[str]:
    """One text per sample: log-normal many Zipf pseudo-words, its labels' names among them."""
    mean, std = length
    sigma = math.sqrt(math.log(1 + (std / mean) ** 2))
    counts = np.clip(rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, size=len(label_sets)), 20, 8000).astype(int)
    cumulative = np.cumsum(long_tail_weights(len(words), WORD_EXPONENT))
    cumulative[-1] = 1.0
    draws = words[np.searchsorted(cumulative, rng.random(int(counts.sum())), side="right")]
    out, start = [], 0
    for count, labels in zip(counts, label_sets):
        text = draws[start : start + count]
        start += count
        text[rng.integers(0, count, size=len(labels))] = [names[label].lower() for label in labels]
        out.append(" ".join(text))
    return out


def label_colours(num_labels: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, 1]).integers(0, 256, size=(num_labels, 3))


def jpeg(rng: np.random.Generator, labels: np.ndarray, colours: np.ndarray) -> bytes:
    """A photo-sized JPEG: colour ramp, a disc per label in its colour, noise."""
    from PIL import Image, ImageDraw

    width, height = IMAGE_SIZE if rng.random() < 0.75 else IMAGE_SIZE[::-1]
    start, end = rng.integers(0, 256, size=(2, 3))
    ramp = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    image = Image.fromarray(np.broadcast_to(start * (1 - ramp) + end * ramp, (height, width, 3)).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for label in labels:
        size = int(rng.integers(40, min(width, height) // 2))
        left, top = int(rng.integers(0, width - size)), int(rng.integers(0, height - size))
        draw.ellipse([left, top, left + size, top + size], fill=tuple(int(v) for v in colours[label]))
    noise = (rng.standard_normal((height, width, 3), dtype=np.float32) * IMAGE_NOISE).astype(np.int16)
    pixels = np.clip(np.asarray(image, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def chunks(count: int) -> Iterator[tuple[int, int]]:
    for start in range(0, count, CHUNK):
        yield start, min(start + CHUNK, count)


def make_synthetic(dataset: str, scale: float, out: Path, seed: int = 0) -> dict:
    """Write the prepared dataset; return its stats."""
    if not 0 < scale <= 1:
        raise InputError(None, f"--scale {scale} is outside (0, 1]", "give the share of the paper's sizes, e.g. 0.01 or 1", field="scale")
    shape = paper_shape(dataset)
    sizes = shape.scaled(scale)
    rng = np.random.default_rng(seed)
    names = label_names(shape.num_labels)
    popularity = long_tail_weights(shape.num_labels, LABEL_EXPONENT)[rng.permutation(shape.num_labels)]
    kind = modality(dataset)
    words = pseudo_words(rng, WORD_VOCABULARY) if kind == "text" else None
    colours = label_colours(shape.num_labels, seed)
    out = Path(out)
    info = {"dataset": dataset, "format": "synthetic", "synthetic": True, "scale": scale, "seed": seed,
            "paper_sizes": shape.sizes, "label_exponent": LABEL_EXPONENT}  # fmt: skip
    if kind == "image":
        info["root"] = str(out.resolve())
    total = sum(sizes.values())
    done = 0
    created = not out.exists()
    try:
        with ManifestWriter(out, labels=names, info=info) as writer:
            for split in SPLITS:
                for start, stop in chunks(sizes[split]):
                    label_sets = draw_label_sets(rng, stop - start, shape.num_labels, shape.mean_labels, popularity)
                    ids = [f"{split}{index:07d}" for index in range(start, stop)]
                    frame = {"id": ids, "labels": [[names[label] for label in labels] for labels in label_sets]}
                    if kind == "text":
                        frame["text"] = texts(rng, label_sets, names, words, TEXT_WORDS["mimic" if dataset.startswith("mimic") else dataset])
                    else:
                        folder = out / "images" / split
                        folder.mkdir(parents=True, exist_ok=True)
                        frame["path"] = [f"images/{split}/{sample}.jpg" for sample in ids]
                        for sample, labels in zip(ids, label_sets):
                            (folder / f"{sample}.jpg").write_bytes(jpeg(rng, labels, colours))
                    writer.add(split, pd.DataFrame(frame))
                    done += stop - start
                    print(f"make-synthetic: {dataset}: {done:,} of {total:,} samples", file=sys.stderr, flush=True)
            return writer.close()
    except BaseException:
        if created:  # the images written so far: nothing half written stays
            shutil.rmtree(out, ignore_errors=True)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("make-synthetic", argv)
    stats = make_synthetic(args.dataset, args.scale, args.out, args.seed)
    counts = " / ".join(f"{stats['counts'][split]:,}" for split in SPLITS)
    print(f"make-synthetic: {args.out}: {args.dataset} x {args.scale:g}: {counts} samples, {stats['num_labels']:,} labels, {stats['avg_labels']:.1f} per sample")
    return 0
