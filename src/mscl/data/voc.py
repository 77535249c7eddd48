"""PASCAL VOC 2007 XML annotations -> manifest (`python -m mscl prepare-voc`).

Layout read under --root (the VOC2007 folder, with the test set unpacked into it):
`ImageSets/Main/{trainval,test}.txt` (one image id per line), `Annotations/<id>.xml` and the
images in `JPEGImages/`. The image file is the XML's `<filename>` under JPEGImages/ (`<id>.jpg`
when the element is absent). Labels are the object names of an image; `difficult` objects are
kept or ignored (--difficult), and an image left with no label is dropped and counted.
Object names must be the 20 VOC classes; a dataset in this format whose names share none with
them (the demo's glyph classes) keeps its own sorted names, and a mix of both is refused.
Split, inferred from the paper's sizes (the paper does not describe it): trainval -> train,
test halved with the seed into val and test.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from tqdm import tqdm

from mscl import cli
from mscl.data.images import image_checks, keep_screened, require_path
from mscl.data.manifest import provenance, write_dataset
from mscl.data.splitting import halve_held_out, require_every_split
from mscl.errors import InputError, OptionNames

FORMAT = "PASCAL VOC 2007 XML + ImageSets/Main"
IMAGE_SETS = ("trainval", "test")
VOC_CLASSES = (
    "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip


def image_set_path(root: Path, image_set: str) -> Path:
    """Path of one ImageSets/Main list (`trainval` or `test`)."""
    return root / "ImageSets" / "Main" / f"{image_set}.txt"


def read_image_set(root: Path, image_set: str) -> list[str]:
    """Image ids listed in one ImageSets/Main file, in file order."""
    path = require_path(
        image_set_path(root, image_set),
        f"VOC image set list {image_set!r}",
        "unpack VOCtrainval_06-Nov-2007.tar and VOCtest_06-Nov-2007.tar into the same VOC2007 folder",
    )
    # utf-8-sig: a byte-order mark (left by some editors) is dropped, not read as part of an id.
    ids = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    if not ids:
        raise InputError(path, "the image set lists no image", "use the official ImageSets/Main file")
    return ids


def parse_annotation(path: Path, image_id: str, include_difficult: bool) -> tuple[str, list[str], set[str]]:
    """Return (image file name, names of the kept objects, names of all objects) of one VOC XML."""
    require_path(path, "VOC annotation", "unpack the Annotations/ folder of the VOC archives under --root")
    try:
        tree = ElementTree.parse(path)
    except ElementTree.ParseError as error:
        raise InputError(path, f"not valid XML ({error})", "re-extract the annotation from the VOC archive") from error
    filename = (tree.findtext("filename") or "").strip() or f"{image_id}.jpg"
    kept, names = [], set()
    for obj in tree.getroot().iter("object"):
        name = (obj.findtext("name") or "").strip()
        if not name:
            raise InputError(path, "an <object> has no <name>", "re-extract the annotation from the VOC archive", field="object/name")
        names.add(name)
        # An absent <difficult> means an ordinary object (VOC2007 always writes 0 or 1).
        difficult = (obj.findtext("difficult") or "0").strip() == "1"
        if include_difficult or not difficult:
            kept.append(name)
    return filename, kept, names


def vocabulary(root: Path, rows: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The 20 VOC classes in their standard order when every object name is one of them.

    A dataset in VOC format whose names share none with VOC (the demo's glyph classes) has a
    class set of its own: its sorted names. Names of both kinds mean a VOC copy with an edited
    or foreign name ('Train' beside 'train'), which would silently change the label set: refused.
    """
    standard = set(VOC_CLASSES)
    names = {n for set_rows in rows.values() for row in set_rows for n in row["all_names"]}
    if names <= standard:
        return list(VOC_CLASSES)
    if not names & standard:
        return sorted(names)
    row = next(row for set_rows in rows.values() for row in set_rows if not row["all_names"] <= standard)
    name = sorted(row["all_names"] - standard)[0]
    hint = f" (VOC writes it {name.lower()!r})" if name.lower() in standard else ""
    raise InputError(
        root / "Annotations" / f"{row['id']}.xml",
        f"object name {name!r} is not one of the 20 VOC classes{hint}, while other annotations use those classes",
        f"restore the annotation from the VOC2007 archive; the classes are {', '.join(VOC_CLASSES)}",
        field="object/name",
    )


def split_policy(seed: int, difficult: str) -> str:
    """The split policy sentence recorded in stats.json."""
    difficult_rule = (
        "objects marked difficult count as labels"
        if difficult == "include"
        else "objects marked difficult are ignored and images left without a label are dropped and counted"
    )
    return (
        f"trainval forms train; test is halved at random (numpy default_rng seed {seed}, ids sorted first) "
        f"into val and test (the odd one goes to test); {difficult_rule}"
    )


def read_set_rows(root: Path, ids: list[str], include_difficult: bool) -> tuple[list[dict[str, Any]], int]:
    """Rows (id, names of the kept objects, names of all objects, image path) of every image of
    one image set, and how many have no kept object (they are dropped and counted)."""
    rows = []
    for image_id in tqdm(ids, desc="reading VOC annotations", unit="xml", disable=None):
        filename, kept, names = parse_annotation(root / "Annotations" / f"{image_id}.xml", image_id, include_difficult)
        rows.append({"id": image_id, "names": set(kept), "all_names": names, "path": f"JPEGImages/{filename}"})
    dropped = sum(not row["names"] for row in rows)
    return rows, dropped


def prepare(
    root: Path,
    out: Path,
    seed: int,
    difficult: str = "include",
    verify_images: bool = True,
    missing_images: str = "error",
    names: OptionNames = OptionNames(),
) -> dict[str, Any]:
    """Parse the VOC 2007 layout under `root` and write the manifest to `out`; return its stats."""
    root = require_path(Path(root), "VOC root folder", f"set {names('--root')} to the VOCdevkit/VOC2007 folder")
    sets = {name: read_image_set(root, name) for name in IMAGE_SETS}
    overlap = sorted(set(sets["trainval"]) & set(sets["test"]))
    if overlap:
        raise InputError(image_set_path(root, "test"), f"image id {overlap[0]!r} is also in trainval.txt", "use the official, disjoint image set lists")

    rows, dropped = {}, {}
    for name in IMAGE_SETS:
        rows[name], dropped[name] = read_set_rows(root, sets[name], difficult == "include")
    labels = vocabulary(root, rows)

    frames, screens = {}, []
    for name in IMAGE_SETS:
        frame = pd.DataFrame(
            [{"id": r["id"], "labels": [c for c in labels if c in r["names"]], "path": r["path"]} for r in rows[name] if r["names"]],
            columns=["id", "labels", "path"],
        )
        if frame.empty:
            raise InputError(image_set_path(root, name), "no image of this set has a label", f"check the annotations and {names('--difficult')}")
        frames[name], screen = keep_screened(root, frame, verify_images, missing_images, image_set_path(root, name), "filename", names)
        screens.append(screen)

    splits = halve_held_out(frames["trainval"], frames["test"], seed)
    sources = {"train": image_set_path(root, "trainval"), "val": image_set_path(root, "test"), "test": image_set_path(root, "test")}
    require_every_split(splits, sources, f"restore the images it lists under {root / 'JPEGImages'} (with their annotations)")
    options, screened_out = image_checks(verify_images, missing_images, screens)
    info = provenance(
        "voc", FORMAT, root, seed, [image_set_path(root, name) for name in IMAGE_SETS],
        split_policy=split_policy(seed, difficult),
        annotation_files=sum(len(ids) for ids in sets.values()),
        classes="the 20 VOC 2007 classes" if labels == list(VOC_CLASSES) else "a class set of its own (no VOC class name)",
        options={"difficult": difficult, **options},
        dropped={"images_without_kept_objects": dropped, **screened_out},
    )  # fmt: skip
    return write_dataset(out, splits, labels=labels, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-voc --root DIR --out DIR [--seed N] [--difficult P] [image options]`."""
    args = cli.parse_args("prepare-voc", argv)
    stats = prepare(args.root, args.out, args.seed, args.difficult, args.verify_images, args.missing_images, OptionNames.of_source("voc", args.from_config))
    print(f"prepare-voc: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} dropped={stats['dropped']}")
    return 0
