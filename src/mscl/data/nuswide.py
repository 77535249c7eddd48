"""NUS-WIDE (81 concepts) -> manifest (`python -m mscl prepare-nuswide`).

Layout read under --root: the concept list `Concepts81.txt` (concept names, one per line; any
number of concepts is accepted), at the root or in `ConceptsList/` as ConceptsList.zip unpacks
it; the images under `Flickr/`; and the labels in one of the two layouts of Groundtruth.zip:
- `Groundtruth/AllLabels/Labels_<concept>.txt` (one 0/1 per line, in the order of
  `ImageList/Imagelist.txt`): used whenever present;
- else `Groundtruth/TrainTestLabels/Labels_<concept>_{Train,Test}.txt`, in the order of
  `ImageList/TrainImagelist.txt` and `ImageList/TestImagelist.txt`: the official split.

Image list lines are Windows paths, e.g. `actor\\0001_2124494179.jpg` or
`C:\\ImageData\\Flickr\\actor\\0001_2124494179.jpg`; both map to the file
`Flickr/actor/0001_2124494179.jpg` under --root (backslashes become slashes and anything up to
a `Flickr/` folder is replaced by `Flickr/`), and the sample id is `actor/0001_2124494179`.

Many NUS-WIDE images are no longer downloadable. The paper does not describe its split; its
sizes (125.4k / 41.9k / 41.9k, i.e. 60/20/20) suggest the images present with at least one
label, split at random: with AllLabels this parser does that with a seed (an inferred split,
--fractions). With TrainTestLabels it keeps the official split instead: the official train
images form train and the official test images (40% of all) are halved with the seed into val
and test, which gives the same 60/20/20. Absent images are dropped and counted by default
(--missing-images drop); the folder is always checked for presence, --verify-images also
opens each image. Text files may start with a UTF-8 byte-order mark.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Sequence

import numpy as np
import pandas as pd
from tqdm import tqdm

from mscl import cli
from mscl.defaults import NUSWIDE_FRACTIONS as DEFAULT_FRACTIONS
from mscl.data.images import ImageScreen, image_checks, require_path, screen_images
from mscl.data.manifest import provenance, write_dataset
from mscl.data.splitting import check_fractions, fractional_split, halve_held_out, require_every_split
from mscl.errors import InputError, OptionNames

FORMATS = {
    "AllLabels": "NUS-WIDE ImageList + Groundtruth/AllLabels",
    "TrainTestLabels": "NUS-WIDE ImageList + Groundtruth/TrainTestLabels (official train/test split)",
}
IMAGE_FOLDER = "Flickr"
FIX_DOWNLOAD = "download ImageList.zip, Groundtruth.zip and ConceptsList.zip from the NUS-WIDE site and unpack them under --root"
CONCEPT_LISTS = ("Concepts81.txt", "ConceptsList/Concepts81.txt")  # where the concept list may be, first found wins
OFFICIAL_PARTS = ("Train", "Test")  # TrainTestLabels' parts: file name suffixes and image lists


def imagelist_path(root: Path, part: str | None = None) -> Path:
    """Path of the image list: of all images, or of the official `part` (Train or Test)."""
    return root / "ImageList" / f"{part or ''}Imagelist.txt"


def concepts_path(root: Path) -> Path:
    """Path of the concept list: the first of CONCEPT_LISTS that exists (the first if none does)."""
    return next((root / name for name in CONCEPT_LISTS if (root / name).is_file()), root / CONCEPT_LISTS[0])


def label_layout(root: Path) -> str:
    """`AllLabels` when Groundtruth/AllLabels exists, else `TrainTestLabels` when that does."""
    for layout in FORMATS:
        if (root / "Groundtruth" / layout).is_dir():
            return layout
    raise InputError(
        root / "Groundtruth",
        "neither Groundtruth/AllLabels nor Groundtruth/TrainTestLabels found",
        FIX_DOWNLOAD,
    )


def labels_path(root: Path, concept: str, part: str | None = None) -> Path:
    """Path of the 0/1 label column of one concept: in AllLabels, or in TrainTestLabels for `part`."""
    if part is None:
        return root / "Groundtruth" / "AllLabels" / f"Labels_{concept}.txt"
    return root / "Groundtruth" / "TrainTestLabels" / f"Labels_{concept}_{part}.txt"


def read_lines(path: Path, what: str) -> list[str]:
    """Non-blank, stripped lines of a text file that must exist (CRLF or LF endings)."""
    require_path(path, what, FIX_DOWNLOAD)
    try:
        # utf-8-sig: a byte-order mark (left by some editors) is dropped, not read as part of
        # the first line, where it would rename the first concept and hide its label file.
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(path, f"not UTF-8 text ({error})", "re-extract the file from the NUS-WIDE archive") from error
    return [line.strip() for line in text.splitlines() if line.strip()]


def image_relpath(listed: str) -> str:
    """Map an Imagelist entry (Windows path) to the image path relative to the dataset root."""
    parts = PurePosixPath(listed.strip().replace("\\", "/")).parts
    lowered = [part.lower() for part in parts]
    if IMAGE_FOLDER.lower() in lowered:
        last = len(lowered) - 1 - lowered[::-1].index(IMAGE_FOLDER.lower())
        parts = parts[last + 1 :]
    return str(PurePosixPath(IMAGE_FOLDER, *parts))


def sample_id(relpath: str) -> str:
    """Sample id of an image: its path under Flickr/ without the extension."""
    return str(PurePosixPath(relpath).relative_to(IMAGE_FOLDER).with_suffix(""))


def read_label_matrix(root: Path, concepts: list[str], num_images: int, part: str | None = None) -> np.ndarray:
    """Boolean matrix (images x concepts) read from the per-concept 0/1 files (of `part`, if given)."""
    matrix = np.zeros((num_images, len(concepts)), dtype=bool)
    image_list = imagelist_path(root, part).relative_to(root).as_posix()
    for column, concept in enumerate(tqdm(concepts, desc="reading NUS-WIDE labels", unit="concept", disable=None)):
        path = labels_path(root, concept, part)
        values = read_lines(path, f"label file of concept {concept!r}")
        if len(values) != num_images:
            raise InputError(
                path,
                f"has {len(values)} label lines but {image_list} lists {num_images} images",
                f"use the {path.parent.name} files of the same NUS-WIDE release as the image list",
            )
        bad = next((i for i, v in enumerate(values) if v not in {"0", "1"}), None)
        if bad is not None:
            raise InputError(path, f"line {bad + 1} is {values[bad][:20]!r}, not 0 or 1", "re-extract the file from Groundtruth.zip", field=f"line {bad + 1}")
        matrix[:, column] = np.array(values) == "1"
    return matrix


@dataclass
class ListedImages:
    """The images of one image list with their labels: the list file, paths under root, ids,
    label matrix."""

    path: Path
    relpaths: list[str]
    ids: list[str]
    matrix: np.ndarray


def read_listed(root: Path, concepts: list[str], part: str | None = None) -> ListedImages:
    """The images of the image list of `part` (None: all images) and their labels."""
    path = imagelist_path(root, part)
    relpaths = [image_relpath(line) for line in read_lines(path, "image list")]
    if not relpaths:
        raise InputError(path, "lists no image", FIX_DOWNLOAD)
    ids = [sample_id(p) for p in relpaths]
    if len(set(ids)) != len(ids):
        raise InputError(path, "lists an image twice", f"use the official {path.name}")
    return ListedImages(path, relpaths, ids, read_label_matrix(root, concepts, len(relpaths), part))


def usable_frame(
    root: Path, listed: ListedImages, concepts: list[str], verify: bool, on_problem: str, names: OptionNames = OptionNames()
) -> tuple[pd.DataFrame, ImageScreen, int]:
    """Manifest rows of the listed images that are labelled and present (decoded if asked),
    the image screen, and how many listed images have no label."""
    labelled = np.flatnonzero(listed.matrix.any(axis=1))
    # Presence on disk is part of the dataset definition, so it is checked even without --verify-images.
    screen = screen_images(
        root, [listed.relpaths[i] for i in labelled], check_exists=True, verify=verify, on_problem=on_problem,
        listed_in=listed.path, field=listed.path.name, names=names,
    )  # fmt: skip
    kept = labelled[np.array(screen.keep, dtype=bool)]
    frame = pd.DataFrame(
        {
            "id": [listed.ids[i] for i in kept],
            "labels": [[concepts[c] for c in np.flatnonzero(listed.matrix[i])] for i in kept],
            "path": [listed.relpaths[i] for i in kept],
        },
        columns=["id", "labels", "path"],
    )
    return frame, screen, int(len(listed.ids) - labelled.size)


def split_policy(seed: int, fractions: Sequence[float] | None) -> str:
    """The split policy sentence recorded in stats.json (`fractions` None: the official split)."""
    if fractions is None:
        return (
            "the official split of Groundtruth/TrainTestLabels: images of ImageList/TrainImagelist.txt form train; "
            f"images of ImageList/TestImagelist.txt are halved at random (numpy default_rng seed {seed}, ids sorted first) "
            "into val and test (the odd one goes to test); images absent from disk or without any of the concepts are dropped and counted"
        )
    train, val, test = fractions
    return (
        "images listed in ImageList/Imagelist.txt that are present on disk and have at least one of the "
        f"concepts are split at random {train:g}/{val:g}/{test:g} into train/val/test "
        f"(numpy default_rng seed {seed}, ids sorted first); the others are dropped and counted"
    )


def read_concepts(root: Path) -> list[str]:
    """The concept names, from Concepts81.txt at the root or in ConceptsList/."""
    path = concepts_path(root)
    if not path.is_file():
        raise InputError(path, f"concept list not found (looked for {' and '.join(CONCEPT_LISTS)} under {root})", FIX_DOWNLOAD)
    concepts = read_lines(path, "concept list")
    if not concepts:
        raise InputError(path, "lists no concept", FIX_DOWNLOAD)
    if len(set(concepts)) != len(concepts):
        raise InputError(path, "lists a concept twice", "use the official Concepts81.txt")
    return concepts


def prepare(
    root: Path,
    out: Path,
    seed: int,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    verify_images: bool = True,
    missing_images: str = "drop",
    names: OptionNames = OptionNames(),
) -> dict[str, Any]:
    """Parse the NUS-WIDE layout under `root` and write the manifest to `out`; return its stats.

    `fractions` apply to the AllLabels layout; TrainTestLabels keeps the official split.
    """
    fractions = check_fractions(fractions)
    root = require_path(Path(root), "NUS-WIDE root folder", f"set {names('--root')} to the folder holding ImageList/, Groundtruth/, Concepts81.txt and Flickr/")
    concepts = read_concepts(root)
    layout = label_layout(root)
    parts: tuple[str | None, ...] = (None,) if layout == "AllLabels" else OFFICIAL_PARTS
    listed = {part: read_listed(root, concepts, part) for part in parts}
    if layout == "TrainTestLabels":
        shared = sorted(set(listed["Train"].ids) & set(listed["Test"].ids))
        if shared:
            raise InputError(imagelist_path(root, "Test"), f"image {shared[0]!r} is also in TrainImagelist.txt", "use the official, disjoint image lists")

    frames, screens, unlabelled = {}, [], 0
    for part in parts:
        frames[part], screen, without_label = usable_frame(root, listed[part], concepts, verify_images, missing_images, names)
        screens.append(screen)
        unlabelled += without_label
    for part, frame in frames.items():
        if frame.empty:
            raise InputError(imagelist_path(root, part), f"no image it lists is both labelled and present (and decodable) under {root / IMAGE_FOLDER}", "unpack the Flickr/ image folders under the root")

    if layout == "AllLabels":
        frame = frames[None].set_index("id", drop=False)
        split_ids = fractional_split(list(frame["id"]), fractions, seed)
        splits = {name: frame.loc[sorted(ids)].reset_index(drop=True) for name, ids in zip(("train", "val", "test"), split_ids)}
    else:
        splits = halve_held_out(frames["Train"], frames["Test"], seed)
    sources = {name: imagelist_path(root, parts[0] if name == "train" or len(parts) == 1 else parts[1]) for name in ("train", "val", "test")}
    require_every_split(splits, sources, f"restore its images under {root / IMAGE_FOLDER}" + (f", or change {names('--fractions')}" if layout == "AllLabels" else ""))
    sources = [concepts_path(root), *(imagelist_path(root, p) for p in parts), *(labels_path(root, c, p) for p in parts for c in concepts)]
    options, dropped = image_checks(verify_images, missing_images, screens)
    info = provenance(
        "nuswide", FORMATS[layout], root, seed, sources,
        split_policy=split_policy(seed, fractions if layout == "AllLabels" else None),
        fractions=list(fractions) if layout == "AllLabels" else None,
        path_mapping="Imagelist entry with backslashes -> Flickr/<concept folder>/<file> under root",
        listed_images=sum(len(images.ids) for images in listed.values()),
        options=options,
        dropped={"unlabelled_images": unlabelled, **dropped},
    )  # fmt: skip
    return write_dataset(out, splits, labels=concepts, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-nuswide --root DIR --out DIR [--seed N] [--fractions T V S] [image options]`."""
    args = cli.parse_args("prepare-nuswide", argv)
    stats = prepare(args.root, args.out, args.seed, args.fractions, args.verify_images, args.missing_images, OptionNames.of_source("nuswide", args.from_config))
    print(f"prepare-nuswide: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} dropped={stats['dropped']}")
    return 0
