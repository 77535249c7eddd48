"""MS-COCO 2014 or 2017 instances annotations -> manifest (`python -m mscl prepare-coco`).

Layout read under --root, the release detected from the annotation files present (2014 when
its files are there, the paper's release; else 2017): `annotations/instances_{train,val}<year>.json`
and the images in `train<year>/` and `val<year>/` (each image's `file_name`). Labels are category
names; the vocabulary follows category ids, which are not contiguous (1..90 with gaps for 80
classes).
Split, inferred from the paper's sizes (the paper does not describe it): train<year> -> train,
val<year> halved with the seed into val and test. For 2014 this gives 20.1k / 20.1k where the
paper prints 20.2k / 20.2k; the statistics table shows both. COCO 2017 puts most of val2014 into
train2017 and keeps 5k images as val2017, so the same policy gives about 117k / 2.5k / 2.5k:
stats.json (`not_comparable_with_paper`) and the statistics table say that these numbers are not
comparable with the paper's COCO 2014 ones.
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
from mscl.data.sources import COCO_RELEASES, coco_release
from mscl.data.splitting import halve_held_out, require_every_split
from mscl.errors import InputError, OptionNames

PAPER_RELEASE = "2014"
NOT_COMPARABLE = (
    "COCO 2017 re-splits the COCO 2014 images (train2017 holds train2014 and most of val2014; val2017 is 5k images), "
    "so its split sizes and results are not comparable with the paper's COCO 2014 numbers"
)


def source_splits(release: str) -> tuple[str, str]:
    """The release's two published splits (and image folders): train<year> and val<year>."""
    return f"train{release}", f"val{release}"


def annotation_path(root: Path, source_split: str) -> Path:
    """Path of the instances JSON of one source split (e.g. `train2014` or `val2017`)."""
    return root / "annotations" / f"instances_{source_split}.json"


def detect_release(root: Path) -> str:
    """The COCO release under `root` (`mscl.data.sources.coco_release`), or an InputError naming
    the annotation files looked for."""
    release = coco_release(root)
    if release is None:
        looked_for = ", ".join(f"instances_{split}.json" for year in COCO_RELEASES for split in source_splits(year))
        raise InputError(
            root / "annotations",
            f"no COCO instances annotations found (looked for {looked_for})",
            "download annotations_trainval2014.zip (the paper's release) or annotations_trainval2017.zip and unpack it under --root",
        )
    return release


def load_instances(path: Path) -> dict[str, Any]:
    """Read one instances JSON, checking that it is a JSON object."""
    year = path.stem[-4:]
    require_path(path, "COCO annotation file", f"download annotations_trainval{year}.zip and unpack it under --root")
    try:
        # utf-8-sig: a byte-order mark (left by some editors) is dropped; json refuses it otherwise.
        with open(path, encoding="utf-8-sig") as handle:
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


def split_policy(seed: int, release: str) -> str:
    """The split policy sentence recorded in stats.json."""
    train, val = source_splits(release)
    return (
        f"{train} images form train; {val} images are halved at random "
        f"(numpy default_rng seed {seed}, ids sorted first) into val and test (the odd one goes to test); "
        "images without any annotation are dropped and counted"
    )


def prepare(
    root: Path, out: Path, seed: int, verify_images: bool = True, missing_images: str = "error", names: OptionNames = OptionNames()
) -> dict[str, Any]:
    """Parse the COCO 2014 or 2017 layout under `root` and write the manifest to `out`; return its stats."""
    root = require_path(Path(root), "COCO root folder", f"set {names('--root')} to the folder holding annotations/, train2014/ and val2014/ (or their 2017 counterparts)")
    release = detect_release(root)
    train, val = source_splits(release)
    loaded = {name: load_instances(annotation_path(root, name)) for name in (train, val)}
    vocabularies = {name: category_vocabulary(data, annotation_path(root, name)) for name, data in loaded.items()}
    categories = vocabularies[train]
    if vocabularies[val] != categories:
        raise InputError(annotation_path(root, val), f"categories differ from instances_{train}.json", "use annotation files of the same COCO release", field="categories")

    frames, unannotated, screens = {}, {}, []
    for name in (train, val):
        frame, unannotated[name] = source_frame(root, name, categories, loaded[name])
        frames[name], screen = keep_screened(root, frame, verify_images, missing_images, annotation_path(root, name), "file_name", names)
        screens.append(screen)

    splits = halve_held_out(frames[train], frames[val], seed)
    sources = {"train": annotation_path(root, train), "val": annotation_path(root, val), "test": annotation_path(root, val)}
    require_every_split(splits, sources, f"restore the images it names under {root} ({train}/, {val}/)")
    options, dropped = image_checks(verify_images, missing_images, screens)
    comparability = {} if release == PAPER_RELEASE else {"not_comparable_with_paper": NOT_COMPARABLE}
    info = provenance(
        "coco", f"MS-COCO {release} instances JSON", root, seed, [annotation_path(root, name) for name in (train, val)],
        release=release, split_policy=split_policy(seed, release), **comparability,
        options=options, dropped={"unannotated_images": unannotated, **dropped},
    )  # fmt: skip
    return write_dataset(out, splits, labels=list(categories.values()), info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-coco --root DIR --out DIR [--seed N] [image options]`."""
    args = cli.parse_args("prepare-coco", argv)
    stats = prepare(args.root, args.out, args.seed, args.verify_images, args.missing_images, OptionNames.of_source("coco", args.from_config))
    print(f"prepare-coco: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} dropped={stats['dropped']}")
    return 0
