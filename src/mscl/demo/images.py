"""Multi-label image demo datasets (COCO, VOC 2007, NUS-WIDE formats) from real glyphs.

Every image is a 32x32 RGB canvas split into a 2x2 grid of 16x16 cells; 1-4 cells hold a glyph
of one of 30 classes, shifted by at most one pixel and tinted:

- the 10 digits ("zero" .. "nine"): real 8x8 handwritten scans from scikit-learn's bundled
  `load_digits` (1,797 scans), upscaled 2x;
- 20 capital letters A-T (named by the NATO alphabet, "alfa" .. "tango"): printed glyphs drawn
  with the fonts matplotlib ships (DejaVu, STIX, Computer Modern; 10 faces x 3 sizes x 3
  rotations).

The labels of an image are the distinct classes present. Why 30 classes and not the digits
alone: with 10 classes and COCO's 2.9 labels per image, 80% of image pairs share a label, so
the ANY-style positives of the contrastive losses cover most of a batch and a from-scratch
encoder barely moves (measured: no drop of the ANY loss in 8 epochs); real COCO has 80 classes.
Classes follow a Zipf-like distribution so that head and tail buckets are meaningful, and the
number of distinct classes per image is drawn so that the label cardinality lands near the real
dataset's.
"""

from __future__ import annotations

import io
import json
import importlib.util
import xml.etree.ElementTree as ET
from collections import Counter
from functools import lru_cache
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from tqdm import tqdm

from mscl.demo import draw_distinct, label_count_schedule, long_tail_weights, require_at_most

DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
LETTERS = "ABCDEFGHIJKLMNOPQRST"
LETTER_NAMES = (
    "alfa", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
)  # fmt: skip
CLASS_NAMES = DIGIT_NAMES + LETTER_NAMES  # class index -> label name
# Font faces shipped in matplotlib's mpl-data/fonts/ttf (DejaVu, STIX and Computer Modern; all
# free licences), the sizes in pixels and the rotations in degrees each letter is drawn with.
LETTER_FONTS = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSansMono.ttf",
    "STIXGeneral.ttf", "STIXGeneralItalic.ttf", "cmr10.ttf", "cmss10.ttf", "cmtt10.ttf",
)  # fmt: skip
LETTER_SIZES_PX = (11, 12, 13)
LETTER_ROTATIONS_DEG = (-12, 0, 12)
CANVAS_PX = 32
CELL_PX = 16  # a 2x2 grid of cells; each holds one 16x16 glyph
CELL_ORIGINS = ((0, 0), (0, CELL_PX), (CELL_PX, 0), (CELL_PX, CELL_PX))  # (row, column) of each cell
INK_THRESHOLD = 0.1  # fraction of full ink below which a pixel counts as background for boxes
BACKGROUND_NOISE_MAX = 24  # uint8 levels of sensor-like noise on the black background

# Zipf exponent of the class distribution over the 30 classes.
CLASS_EXPONENT = 1.0
# Real label cardinalities (average distinct labels per image) the demos aim for.
TARGET_CARDINALITY = {"coco": 2.9, "voc": 1.5, "nuswide": 2.4}
# Probability that a free cell gets another instance of a class already present (real images
# show several objects of one class; labels stay the distinct classes).
EXTRA_INSTANCE_PROB = {"coco": 0.35, "voc": 0.25, "nuswide": 0.2}

# Real COCO category ids are 1..90 with gaps; the demo uses the first 30 real ids, which skip
# 12, 26, 29 and 30, so id != index is exercised.
COCO_CATEGORY_IDS = (*range(1, 12), *range(13, 26), 27, 28, 31, 32, 33, 34)
COCO_MAX_IMAGE_ID = 581_929  # largest real COCO 2014 image id
# Share of the images in train2014 (real COCO 2014: 82,783 of 123,287, 0.67). The demo gives
# val2014 more, so that its halved test split holds >= 500 images while train2014 stays small
# enough to pretrain on in seconds.
COCO_TRAIN2014_FRACTION = 0.58
COCO_EMPTY_FRACTION = 0.02  # images listed with no annotation (real COCO has about 1%)
VOC_MAX_IMAGE_ID = 9_963  # VOC 2007 ids run 000001..009963
VOC_DIFFICULT_PROB = 0.05  # per object
NUSWIDE_UNLABELLED_FRACTION = 0.03  # images with none of the concepts (real NUS-WIDE: ~8%)
NUSWIDE_MISSING_IMAGES = 2  # listed in Imagelist.txt but absent from disk (real downloads miss some)


@dataclass(frozen=True)
class GlyphObject:
    """One glyph placed on a canvas; `label` is its class index in CLASS_NAMES; box is
    (x0, y0, x1, y1) in pixels, x1/y1 exclusive."""

    label: int
    box: tuple[int, int, int, int]
    ink_pixels: int


@dataclass(frozen=True)
class Canvas:
    pixels: np.ndarray  # (32, 32, 3) uint8
    objects: tuple[GlyphObject, ...]

    @property
    def labels(self) -> list[str]:
        """Distinct class names present, in class order."""
        return [CLASS_NAMES[label] for label in sorted({obj.label for obj in self.objects})]


def load_digit_glyphs() -> list[np.ndarray]:
    """Per digit class, the real 8x8 scans from scikit-learn upscaled 2x to 16x16 ink masks,
    floats in [0, 1] (16 = full ink in the scans)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.kron(digits.images.astype(np.float64) / 16.0, np.ones((1, 2, 2)))
    return [images[digits.target == d] for d in range(len(DIGIT_NAMES))]


def matplotlib_font_dir() -> Path:
    """matplotlib's bundled TrueType fonts, found without importing matplotlib."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("matplotlib is not installed; the image demos draw their letters with its fonts. Fix: pip install matplotlib")
    return Path(spec.submodule_search_locations[0]) / "mpl-data" / "fonts" / "ttf"


def draw_letter(letter: str, font: ImageFont.FreeTypeFont, rotation: float) -> np.ndarray:
    """A 16x16 ink mask in [0, 1] of `letter` centred in the cell, rotated by `rotation` degrees."""
    image = Image.new("L", (CELL_PX, CELL_PX), 0)
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = draw.textbbox((0, 0), letter, font=font)
    draw.text(((CELL_PX - (right - left)) / 2 - left, (CELL_PX - (bottom - top)) / 2 - top), letter, fill=255, font=font)
    if rotation:
        image = image.rotate(rotation, resample=Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.float64) / 255.0


@lru_cache(maxsize=1)
def load_letter_glyphs() -> tuple[np.ndarray, ...]:
    """Per letter class, its glyph in every font x size x rotation: [variants, 16, 16] masks."""
    folder = matplotlib_font_dir()
    fonts = [ImageFont.truetype(str(folder / name), size) for name in LETTER_FONTS for size in LETTER_SIZES_PX]
    return tuple(
        np.stack([draw_letter(letter, font, rotation) for font in fonts for rotation in LETTER_ROTATIONS_DEG])
        for letter in LETTERS
    )


def load_glyph_pool() -> list[np.ndarray]:
    """Per class of CLASS_NAMES, its 16x16 ink masks: digit scans, then printed letters."""
    return [*load_digit_glyphs(), *load_letter_glyphs()]


def shift_in_cell(glyph: np.ndarray, shift_rows: int, shift_cols: int) -> np.ndarray:
    """A 16x16 glyph shifted by (-1..1, -1..1) pixels inside its cell (what leaves it is cut)."""
    padded = np.pad(glyph, 1)
    return padded[1 - shift_rows : 1 - shift_rows + CELL_PX, 1 - shift_cols : 1 - shift_cols + CELL_PX]


def ink_box(ink: np.ndarray, row0: int, col0: int) -> tuple[tuple[int, int, int, int], int]:
    """Bounding box (x0, y0, x1, y1) on the canvas of a cell's ink, and its ink pixel count."""
    rows, cols = np.nonzero(ink > INK_THRESHOLD)
    if rows.size == 0:  # a blank scan still gets its cell as box so that no box is degenerate
        return (col0, row0, col0 + CELL_PX, row0 + CELL_PX), 0
    box = (col0 + int(cols.min()), row0 + int(rows.min()), col0 + int(cols.max()) + 1, row0 + int(rows.max()) + 1)
    return box, int(rows.size)


def compose_canvas(rng: np.random.Generator, pool: Sequence[np.ndarray], labels: Sequence[int]) -> Canvas:
    """Draw a canvas with one glyph of each class in `labels`, each in its own cell."""
    pixels = rng.integers(0, BACKGROUND_NOISE_MAX, size=(CANVAS_PX, CANVAS_PX, 3)).astype(np.float64)
    cells = rng.permutation(len(CELL_ORIGINS))[: len(labels)]
    objects = []
    for label, cell in zip(labels, cells):
        glyphs = pool[label]
        glyph = glyphs[rng.integers(len(glyphs))]
        shift_rows, shift_cols = (int(v) for v in rng.integers(-1, 2, size=2))
        ink = shift_in_cell(glyph, shift_rows, shift_cols) * rng.uniform(0.75, 1.0)
        colour = rng.uniform(150.0, 255.0, size=3)  # a bright tint per glyph, in uint8 levels
        row0, col0 = CELL_ORIGINS[cell]
        region = pixels[row0 : row0 + CELL_PX, col0 : col0 + CELL_PX]
        np.maximum(region, ink[..., None] * colour, out=region)
        box, ink_pixels = ink_box(ink, row0, col0)
        objects.append(GlyphObject(label=int(label), box=box, ink_pixels=ink_pixels))
    return Canvas(pixels=np.clip(np.rint(pixels), 0, 255).astype(np.uint8), objects=tuple(objects))


def draw_image_labels(
    rng: np.random.Generator, class_weights: np.ndarray, rank_to_class: np.ndarray, kind: str, n_classes: int
) -> list[int]:
    """Classes to draw on one image: `n_classes` distinct long-tailed classes, plus extra instances."""
    ranks = draw_distinct(rng, class_weights, n_classes)
    labels = [int(rank_to_class[r]) for r in ranks]
    free_cells = len(CELL_ORIGINS) - len(labels)
    extras = [int(rng.choice(labels)) for _ in range(free_cells) if rng.random() < EXTRA_INSTANCE_PROB[kind]]
    return labels + extras


def draw_canvases(rng: np.random.Generator, count: int, kind: str, blank: set[int]) -> list[Canvas]:
    """`count` canvases for `kind`; indices in `blank` get no glyph at all (noise only)."""
    pool = load_glyph_pool()
    class_weights = long_tail_weights(len(CLASS_NAMES), CLASS_EXPONENT)
    rank_to_class = rng.permutation(len(CLASS_NAMES))  # which class is the head class depends on the seed
    class_counts = label_count_schedule(rng, count, TARGET_CARDINALITY[kind])
    canvases = []
    for index, n_classes in enumerate(class_counts):
        labels = [] if index in blank else draw_image_labels(rng, class_weights, rank_to_class, kind, int(n_classes))
        canvases.append(compose_canvas(rng, pool, labels))
    return canvases


def png_bytes(pixels: np.ndarray) -> bytes:
    """PNG encoding of an RGB array; Pillow writes no timestamp, so equal pixels give equal bytes."""
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_images(paths_and_canvases: Sequence[tuple[Path, Canvas]], desc: str) -> None:
    """Write canvases as PNG files, with a progress bar on stderr."""
    for path, canvas in tqdm(paths_and_canvases, desc=desc, unit="img", disable=None):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png_bytes(canvas.pixels))


def label_summary(label_sets: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Label cardinality (mean labels per labelled sample) and per-label frequencies."""
    labelled = [labels for labels in label_sets if labels]
    frequency = Counter(label for labels in labelled for label in labels)
    return {
        "labelled_samples": len(labelled),
        "label_cardinality": round(float(np.mean([len(labels) for labels in labelled])), 3),
        "label_frequency": dict(sorted(frequency.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def pick_indices(rng: np.random.Generator, count: int, how_many: int) -> set[int]:
    """`how_many` distinct indices in [0, count)."""
    return {int(i) for i in rng.choice(count, size=how_many, replace=False)}


# ---------------------------------------------------------------------------------- MS-COCO


def coco_annotation(annotation_id: int, image_id: int, obj: GlyphObject) -> dict[str, Any]:
    """One COCO instance annotation; bbox is [x, y, width, height] in pixels."""
    x0, y0, x1, y1 = obj.box
    return {
        "id": annotation_id,
        "image_id": image_id,
        "category_id": COCO_CATEGORY_IDS[obj.label],
        "bbox": [float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
        "area": float(obj.ink_pixels),
        "iscrowd": 0,
        "segmentation": [[float(x0), float(y0), float(x1), float(y0), float(x1), float(y1), float(x0), float(y1)]],
    }


def coco_categories() -> list[dict[str, Any]]:
    return [
        {"id": cid, "name": name, "supercategory": "digit" if name in DIGIT_NAMES else "letter"}
        for cid, name in zip(COCO_CATEGORY_IDS, CLASS_NAMES)
    ]


def coco_instances(split: str, image_ids: Sequence[int], canvases: Sequence[Canvas], first_annotation_id: int) -> dict:
    """The `instances_<split>.json` document for one split."""
    images, annotations = [], []
    annotation_id = first_annotation_id
    for image_id, canvas in zip(image_ids, canvases):
        images.append({"id": image_id, "file_name": coco_file_name(split, image_id), "width": CANVAS_PX, "height": CANVAS_PX})
        for obj in canvas.objects:
            annotations.append(coco_annotation(annotation_id, image_id, obj))
            annotation_id += 1
    return {
        "info": {"description": "mscl demo in COCO 2014 format (scikit-learn digits, matplotlib-font letters)", "version": "1.0", "year": 2014},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": coco_categories(),
    }


def coco_file_name(split: str, image_id: int) -> str:
    """Real COCO 2014 naming: COCO_train2014_000000000042.jpg (here .png)."""
    return f"COCO_{split}_{image_id:012d}.png"


def make_coco(out: Path, seed: int, samples: int) -> dict[str, Any]:
    """MS-COCO 2014 layout: annotations/instances_{train,val}2014.json, train2014/, val2014/."""
    require_at_most(samples, COCO_MAX_IMAGE_ID, "COCO 2014 image ids")
    rng = np.random.default_rng(seed)
    n_empty = max(2, round(COCO_EMPTY_FRACTION * samples))
    canvases = draw_canvases(rng, samples, "coco", blank=pick_indices(rng, samples, n_empty))
    image_ids = [1 + int(i) for i in rng.choice(COCO_MAX_IMAGE_ID, size=samples, replace=False)]
    n_train = round(samples * COCO_TRAIN2014_FRACTION)  # train2014 for train, val2014 halved into val/test
    splits = {"train2014": slice(0, n_train), "val2014": slice(n_train, samples)}

    next_annotation_id = 1
    files = []
    for split, part in splits.items():
        document = coco_instances(split, image_ids[part], canvases[part], next_annotation_id)
        next_annotation_id += len(document["annotations"])
        path = out / "annotations" / f"instances_{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, separators=(",", ":")), encoding="utf-8")
        files += [(out / split / coco_file_name(split, i), c) for i, c in zip(image_ids[part], canvases[part])]
    write_images(files, "coco images")
    return {
        "counts": {split: part.stop - part.start for split, part in splits.items()},
        "images_without_annotation": n_empty,
        **label_summary([c.labels for c in canvases]),
    }


# ------------------------------------------------------------------------------- VOC 2007


def voc_xml(image_id: str, canvas: Canvas, difficult: Sequence[bool]) -> bytes:
    """The Annotations/<id>.xml document (VOC 2007 schema, one <object> per glyph)."""
    root = ET.Element("annotation")
    ET.SubElement(root, "folder").text = "VOC2007"
    ET.SubElement(root, "filename").text = f"{image_id}.png"
    source = ET.SubElement(root, "source")
    ET.SubElement(source, "database").text = "mscl demo (scikit-learn digits, matplotlib-font letters)"
    size = ET.SubElement(root, "size")
    for tag, value in (("width", CANVAS_PX), ("height", CANVAS_PX), ("depth", 3)):
        ET.SubElement(size, tag).text = str(value)
    ET.SubElement(root, "segmented").text = "0"
    for obj, is_difficult in zip(canvas.objects, difficult):
        element = ET.SubElement(root, "object")
        ET.SubElement(element, "name").text = CLASS_NAMES[obj.label]
        ET.SubElement(element, "pose").text = "Unspecified"
        ET.SubElement(element, "truncated").text = "0"
        ET.SubElement(element, "difficult").text = "1" if is_difficult else "0"
        box = ET.SubElement(element, "bndbox")
        x0, y0, x1, y1 = obj.box
        # VOC boxes are 1-based and inclusive: pixel columns x0..x1-1 become xmin=x0+1, xmax=x1.
        for tag, value in (("xmin", x0 + 1), ("ymin", y0 + 1), ("xmax", x1), ("ymax", y1)):
            ET.SubElement(box, tag).text = str(value)
    ET.indent(root, space="\t")
    return ET.tostring(root, encoding="utf-8") + b"\n"


def make_voc(out: Path, seed: int, samples: int) -> dict[str, Any]:
    """PASCAL VOC 2007 layout: Annotations/, JPEGImages/ (PNG content), ImageSets/Main/{trainval,test}.txt."""
    require_at_most(samples, VOC_MAX_IMAGE_ID, "VOC 2007 image ids (000001-009963)")
    rng = np.random.default_rng(seed)
    canvases = draw_canvases(rng, samples, "voc", blank=set())
    numbers = 1 + np.sort(rng.choice(VOC_MAX_IMAGE_ID, size=samples, replace=False))
    image_ids = [f"{n:06d}" for n in numbers]
    in_test = rng.permutation(samples) < samples // 2  # VOC 2007: trainval and test about 50/50

    files, kept_labels, difficult_objects = [], [], 0
    for image_id, canvas in zip(image_ids, canvases):
        difficult = [bool(rng.random() < VOC_DIFFICULT_PROB) for _ in canvas.objects]
        difficult_objects += sum(difficult)
        path = out / "Annotations" / f"{image_id}.xml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(voc_xml(image_id, canvas, difficult))
        kept_labels.append(sorted({CLASS_NAMES[o.label] for o, d in zip(canvas.objects, difficult) if not d}))
        files.append((out / "JPEGImages" / f"{image_id}.png", canvas))

    main_dir = out / "ImageSets" / "Main"
    main_dir.mkdir(parents=True, exist_ok=True)
    for name, mask in (("trainval", ~in_test), ("test", in_test)):
        ids = [i for i, m in zip(image_ids, mask) if m]
        (main_dir / f"{name}.txt").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
    write_images(files, "voc images")
    return {
        "counts": {"trainval": int((~in_test).sum()), "test": int(in_test.sum())},
        "difficult_objects": difficult_objects,
        "label_cardinality_without_difficult": label_summary(kept_labels)["label_cardinality"],
        **label_summary([c.labels for c in canvases]),
    }


# -------------------------------------------------------------------------------- NUS-WIDE


def nuswide_entries(rng: np.random.Generator, canvases: Sequence[Canvas]) -> list[tuple[str, str, Canvas]]:
    """(folder, file name, canvas) per image, sorted like the real Imagelist (folder, then file).

    The folder is the Flickr search query the image was found with: here the first drawn class,
    or a random concept for unlabelled images. Files are `<per-folder number>_<flickr id>.png`.
    """
    flickr_ids = 10**8 + rng.choice(10**10 - 10**8, size=len(canvases), replace=False)  # 9-10 digit ids
    per_folder: Counter[str] = Counter()
    entries = []
    for flickr_id, canvas in zip(flickr_ids, canvases):
        query = canvas.objects[0].label if canvas.objects else int(rng.integers(len(CLASS_NAMES)))
        folder = CLASS_NAMES[query]
        per_folder[folder] += 1
        entries.append((folder, f"{per_folder[folder]:04d}_{int(flickr_id)}.png", canvas))
    return sorted(entries, key=lambda entry: (entry[0], entry[1]))


def make_nuswide(out: Path, seed: int, samples: int) -> dict[str, Any]:
    """NUS-WIDE layout: ImageList/Imagelist.txt, Flickr/<folder>/<file>, Concepts81.txt, Groundtruth/AllLabels/."""
    rng = np.random.default_rng(seed)
    n_unlabelled = max(2, round(NUSWIDE_UNLABELLED_FRACTION * samples))
    canvases = draw_canvases(rng, samples, "nuswide", blank=pick_indices(rng, samples, n_unlabelled))
    entries = nuswide_entries(rng, canvases)
    labelled = [i for i, (_, _, canvas) in enumerate(entries) if canvas.objects]
    missing = {labelled[int(i)] for i in rng.choice(len(labelled), size=NUSWIDE_MISSING_IMAGES, replace=False)}

    image_list = "".join(f"{folder}\\{name}\n" for folder, name, _ in entries)  # Windows-style paths
    (out / "ImageList").mkdir(parents=True)
    (out / "ImageList" / "Imagelist.txt").write_text(image_list, encoding="utf-8")
    (out / "Concepts81.txt").write_text("".join(f"{name}\n" for name in CLASS_NAMES), encoding="utf-8")
    labels_dir = out / "Groundtruth" / "AllLabels"
    labels_dir.mkdir(parents=True)
    for label, name in enumerate(CLASS_NAMES):
        flags = ("1" if any(o.label == label for o in canvas.objects) else "0" for _, _, canvas in entries)
        (labels_dir / f"Labels_{name}.txt").write_text("".join(f"{flag}\n" for flag in flags), encoding="utf-8")

    files = [(out / "Flickr" / folder / name, canvas) for i, (folder, name, canvas) in enumerate(entries) if i not in missing]
    write_images(files, "nus-wide images")
    present = [canvas.labels for i, (_, _, canvas) in enumerate(entries) if i not in missing]
    return {
        "counts": {"listed": samples, "on_disk": len(files)},
        "missing_images": sorted(f"{entries[i][0]}\\{entries[i][1]}" for i in missing),
        "unlabelled_images": n_unlabelled,
        **label_summary(present),
    }
