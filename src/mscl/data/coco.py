"""MS-COCO 2014 instances annotations -> manifest (`python -m mscl prepare-coco`).

Layout read under --root: `annotations/instances_{train,val}2014.json` and the images in
`train2014/` and `val2014/` (each image's `file_name`). Labels are category names; the
vocabulary follows category ids, which are not contiguous (1..90 with gaps for 80 classes).
Split, inferred from the paper's sizes (the paper does not describe it): train2014 -> train,
val2014 halved with the seed into val and test. This gives 20.1k / 20.1k where the paper
prints 20.2k / 20.2k; the statistics table shows both.
Images without any annotation carry no label and are dropped and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from tqdm import tqdm

from mscl import cli
from mscl.data.images import image_checks, keep_screened, require_path
from mscl.data.manifest import provenance, write_dataset
from mscl.data.splitting import halve_held_out
from mscl.errors import InputError

SOURCE_SPLITS = ("train2014", "val2014")
FORMAT = "MS-COCO 2014 instances JSON"


def annotation_path(root: Path, source_split: str) -> Path:
    """Path of the instances JSON of one source split (`train2014` or `val2014`)."""
    return root / "annotations" / f"instances_{source_split}.json"


def load_instances(path: Path) -> dict[str, Any]:
    """Read one instances JSON, checking that it is a JSON object."""
    require_path(path, "COCO annotation file", "download annotations_trainval2014.zip and unpack it under --root")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(path, f"not valid JSON ({error})", "re-download or re-extract the annotation file") from error
    if not isinstance(data, dict):
        raise InputError(path, "top level is not a JSON object", "use the official instances_*.json file")
    return data


def require_key(record: Any, key: str, path: Path, where: str) -> Any:
    """Return `record[key]`, or raise an InputError naming the missing key."""
    if not isinstance(record, dict) or key not in record:
        raise InputError(path, f"{where} has no {key!r}", "use the official instances_*.json file (not captions or keypoints)", field=key)
    return record[key]


def require_id(record: Any, key: str, path: Path, where: str) -> int:
    """`record[key]` as an integer id, or an InputError naming the key."""
    value = require_key(record, key, path, where)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        raise InputError(path, f"{where} has {key} {str(value)[:40]!r}, not a non-negative integer", "use the official instances_*.json file", field=key)
    return int(value)


def category_vocabulary(data: dict[str, Any], path: Path) -> dict[int, str]:
    """Map category id -> name, ordered by category id."""
    categories = require_key(data, "categories", path, "the file")
    names = {require_id(c, "id", path, "a category"): str(require_key(c, "name", path, "a category")) for c in categories}
    if not names:
        raise InputError(path, "no categories", "use the official instances_*.json file", field="categories")
    if len(set(names.values())) != len(names):
        raise InputError(path, "two categories share a name", "use the official instances_*.json file", field="categories")
    return dict(sorted(names.items()))


def labelled_images(data: dict[str, Any], categories: dict[int, str], path: Path) -> tuple[dict[int, str], dict[int, set[int]]]:
    """Return image id -> file_name for every image, and image id -> category ids it is annotated with."""
    files: dict[int, str] = {}
    for image in require_key(data, "images", path, "the file"):
        image_id = require_id(image, "id", path, "an image")
        if image_id in files:
            raise InputError(path, f"image id {image_id} appears twice in 'images'", "use the official instances_*.json file", field="id")
        files[image_id] = str(require_key(image, "file_name", path, "an image"))
    annotated: dict[int, set[int]] = {}
    annotations = require_key(data, "annotations", path, "the file")
    for annotation in tqdm(annotations, desc=f"reading {path.name}", unit="ann", disable=None):
        image_id = require_id(annotation, "image_id", path, "an annotation")
        category_id = require_id(annotation, "category_id", path, "an annotation")
        if image_id not in files:
            raise InputError(path, f"an annotation refers to image id {image_id}, which is not in 'images'", "use the official instances_*.json file", field="image_id")
        if category_id not in categories:
            raise InputError(path, f"an annotation refers to category id {category_id}, which is not in 'categories'", "use the official instances_*.json file", field="category_id")
        annotated.setdefault(image_id, set()).add(category_id)
    return files, annotated


def source_frame(root: Path, source_split: str, categories: dict[int, str], data: dict[str, Any]) -> tuple[pd.DataFrame, int]:
    """Manifest rows of one source split (annotated images only) and the number of unannotated images."""
    path = annotation_path(root, source_split)
    files, annotated = labelled_images(data, categories, path)
    rows = [
        {
            "id": str(image_id),
            "labels": [categories[c] for c in sorted(annotated[image_id])],  # category-id order
            "path": f"{source_split}/{files[image_id]}",
        }
        for image_id in sorted(annotated)
    ]
    if not rows:
        raise InputError(path, "no image has an annotation", "check that this is the full instances file", field="annotations")
    return pd.DataFrame(rows, columns=["id", "labels", "path"]), len(files) - len(annotated)


def split_policy(seed: int) -> str:
    """The split policy sentence recorded in stats.json."""
    return (
        "train2014 images form train; val2014 images are halved at random "
        f"(numpy default_rng seed {seed}, ids sorted first) into val and test (the odd one goes to test); "
        "images without any annotation are dropped and counted"
    )


def prepare(root: Path, out: Path, seed: int, verify_images: bool = True, missing_images: str = "error") -> dict[str, Any]:
    """Parse the COCO 2014 layout under `root` and write the manifest to `out`; return its stats."""
    root = require_path(Path(root), "COCO root folder", "pass --root pointing at the folder holding annotations/, train2014/ and val2014/")
    loaded = {name: load_instances(annotation_path(root, name)) for name in SOURCE_SPLITS}
    vocabularies = {name: category_vocabulary(data, annotation_path(root, name)) for name, data in loaded.items()}
    categories = vocabularies["train2014"]
    if vocabularies["val2014"] != categories:
        raise InputError(annotation_path(root, "val2014"), "categories differ from instances_train2014.json", "use annotation files of the same COCO release", field="categories")

    frames, unannotated, screens = {}, {}, []
    for name in SOURCE_SPLITS:
        frame, unannotated[name] = source_frame(root, name, categories, loaded[name])
        frames[name], screen = keep_screened(root, frame, verify_images, missing_images, field="file_name")
        screens.append(screen)

    splits = halve_held_out(frames["train2014"], frames["val2014"], seed)
    options, dropped = image_checks(verify_images, missing_images, screens)
    info = provenance(
        "coco", FORMAT, root, seed, [annotation_path(root, name) for name in SOURCE_SPLITS],
        split_policy=split_policy(seed), options=options, dropped={"unannotated_images": unannotated, **dropped},
    )  # fmt: skip
    return write_dataset(out, splits, labels=list(categories.values()), info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-coco --root DIR --out DIR [--seed N] [image options]`."""
    args = cli.parse_args("prepare-coco", argv)
    stats = prepare(args.root, args.out, args.seed, args.verify_images, args.missing_images)
    print(f"prepare-coco: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} dropped={stats['dropped']}")
    return 0
