"""NUS-WIDE (81 concepts) -> manifest (`python -m mscl prepare-nuswide`).

Layout read under --root: `ImageList/Imagelist.txt` (one image per line), `Concepts81.txt`
(concept names, one per line; any number of concepts is accepted),
`Groundtruth/AllLabels/Labels_<concept>.txt` (one 0/1 per line, in Imagelist order) and the
images under `Flickr/`.

Imagelist lines are Windows paths, e.g. `actor\\0001_2124494179.jpg` or
`C:\\ImageData\\Flickr\\actor\\0001_2124494179.jpg`; both map to the file
`Flickr/actor/0001_2124494179.jpg` under --root (backslashes become slashes and anything up to
a `Flickr/` folder is replaced by `Flickr/`), and the sample id is `actor/0001_2124494179`.

Many NUS-WIDE images are no longer downloadable. The paper does not describe its split; its
sizes (125.4k / 41.9k / 41.9k, i.e. 60/20/20) suggest the images present with at least one
label, split at random: this parser does that with a seed (an inferred split). Absent images
are therefore dropped and counted by default (--missing-images drop); the folder is always
checked for presence, --verify-images also opens each image.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Sequence

import numpy as np
import pandas as pd
from tqdm import tqdm

from mscl import cli
from mscl.defaults import NUSWIDE_FRACTIONS as DEFAULT_FRACTIONS
from mscl.data.images import image_checks, require_path, screen_images
from mscl.data.manifest import provenance, write_dataset
from mscl.data.splitting import check_fractions, fractional_split
from mscl.errors import InputError

FORMAT = "NUS-WIDE ImageList + Groundtruth/AllLabels"
IMAGE_FOLDER = "Flickr"
FIX_DOWNLOAD = "download ImageList.zip, Groundtruth.zip and ConceptsList.zip from the NUS-WIDE site and unpack them under --root"


def imagelist_path(root: Path) -> Path:
    """Path of the image list."""
    return root / "ImageList" / "Imagelist.txt"


def concepts_path(root: Path) -> Path:
    """Path of the concept list."""
    return root / "Concepts81.txt"


def labels_path(root: Path, concept: str) -> Path:
    """Path of the 0/1 label column of one concept."""
    return root / "Groundtruth" / "AllLabels" / f"Labels_{concept}.txt"


def read_lines(path: Path, what: str) -> list[str]:
    """Non-blank, stripped lines of a text file that must exist (CRLF or LF endings)."""
    require_path(path, what, FIX_DOWNLOAD)
    try:
        text = path.read_text(encoding="utf-8")
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


def read_label_matrix(root: Path, concepts: list[str], num_images: int) -> np.ndarray:
    """Boolean matrix (images x concepts) read from the per-concept 0/1 files."""
    matrix = np.zeros((num_images, len(concepts)), dtype=bool)
    for column, concept in enumerate(tqdm(concepts, desc="reading NUS-WIDE labels", unit="concept", disable=None)):
        path = labels_path(root, concept)
        values = read_lines(path, f"label file of concept {concept!r}")
        if len(values) != num_images:
            raise InputError(
                path,
                f"has {len(values)} label lines but ImageList/Imagelist.txt lists {num_images} images",
                "use the AllLabels files of the same NUS-WIDE release as the image list",
            )
        bad = next((i for i, v in enumerate(values) if v not in {"0", "1"}), None)
        if bad is not None:
            raise InputError(path, f"line {bad + 1} is {values[bad][:20]!r}, not 0 or 1", "re-extract the file from Groundtruth.zip", field=f"line {bad + 1}")
        matrix[:, column] = np.array(values) == "1"
    return matrix


def split_policy(seed: int, fractions: Sequence[float]) -> str:
    """The split policy sentence recorded in stats.json."""
    train, val, test = fractions
    return (
        "images listed in ImageList/Imagelist.txt that are present on disk and have at least one of the "
        f"concepts are split at random {train:g}/{val:g}/{test:g} into train/val/test "
        f"(numpy default_rng seed {seed}, ids sorted first); the others are dropped and counted"
    )


def prepare(
    root: Path,
    out: Path,
    seed: int,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    verify_images: bool = True,
    missing_images: str = "drop",
) -> dict[str, Any]:
    """Parse the NUS-WIDE layout under `root` and write the manifest to `out`; return its stats."""
    fractions = check_fractions(fractions)
    root = require_path(Path(root), "NUS-WIDE root folder", "pass --root pointing at the folder holding ImageList/, Groundtruth/, Concepts81.txt and Flickr/")
    concepts = read_lines(concepts_path(root), "concept list")
    if not concepts:
        raise InputError(concepts_path(root), "lists no concept", FIX_DOWNLOAD)
    if len(set(concepts)) != len(concepts):
        raise InputError(concepts_path(root), "lists a concept twice", "use the official Concepts81.txt")
    relpaths = [image_relpath(line) for line in read_lines(imagelist_path(root), "image list")]
    if not relpaths:
        raise InputError(imagelist_path(root), "lists no image", FIX_DOWNLOAD)
    ids = [sample_id(p) for p in relpaths]
    if len(set(ids)) != len(ids):
        raise InputError(imagelist_path(root), "lists an image twice", "use the official Imagelist.txt")
    matrix = read_label_matrix(root, concepts, len(relpaths))

    labelled = np.flatnonzero(matrix.any(axis=1))
    # Presence on disk is part of the dataset definition, so it is checked even without --verify-images.
    screen = screen_images(root, [relpaths[i] for i in labelled], check_exists=True, verify=verify_images, on_problem=missing_images, field="Imagelist.txt")
    kept = labelled[np.array(screen.keep, dtype=bool)]
    if kept.size == 0:
        raise InputError(root, "no listed image is both present on disk and labelled", "unpack the Flickr/ image folders under --root")

    frame = pd.DataFrame(
        {
            "id": [ids[i] for i in kept],
            "labels": [[concepts[c] for c in np.flatnonzero(matrix[i])] for i in kept],
            "path": [relpaths[i] for i in kept],
        }
    ).set_index("id", drop=False)
    parts = fractional_split(list(frame["id"]), fractions, seed)
    splits = {name: frame.loc[sorted(part)].reset_index(drop=True) for name, part in zip(("train", "val", "test"), parts)}
    sources = [concepts_path(root), imagelist_path(root), *(labels_path(root, c) for c in concepts)]
    options, dropped = image_checks(verify_images, missing_images, [screen])
    info = provenance(
        "nuswide", FORMAT, root, seed, sources,
        split_policy=split_policy(seed, fractions),
        fractions=list(fractions),
        path_mapping="Imagelist entry with backslashes -> Flickr/<concept folder>/<file> under root",
        listed_images=len(relpaths),
        options=options,
        dropped={"unlabelled_images": int(len(relpaths) - labelled.size), **dropped},
    )  # fmt: skip
    return write_dataset(out, splits, labels=concepts, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-nuswide --root DIR --out DIR [--seed N] [--fractions T V S] [image options]`."""
    args = cli.parse_args("prepare-nuswide", argv)
    stats = prepare(args.root, args.out, args.seed, args.fractions, args.verify_images, args.missing_images)
    print(f"prepare-nuswide: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} dropped={stats['dropped']}")
    return 0
