"""What each raw source's root folder must hold, checked before any job runs.

The Snakefile asks `source_problem` while it builds the DAG, so a wrong `sources.<name>.root`
stops the run at once with the config key, the path and the fix, instead of failing inside a
preprocessing job later. Standard library only: the workflow imports this module from the
source tree, whatever environment Snakemake itself runs in.

Each layout entry is a path under the root; `a|b` means either is fine (MIMIC tables come as
.csv or .csv.gz). The parsers check the contents; this checks that the files are there at all.
"""

from __future__ import annotations

from pathlib import Path

# COCO: the 2014 release (the paper's) or the 2017 one, told apart by `coco_release`.
COCO_RELEASES = ("2014", "2017")

LAYOUTS: dict[str, tuple[str, ...]] = {
    "coco": tuple(
        "|".join(pattern.format(year) for year in COCO_RELEASES)
        for pattern in ("annotations/instances_train{}.json", "annotations/instances_val{}.json", "train{}", "val{}")
    ),
    "voc": ("Annotations", "ImageSets/Main/trainval.txt", "ImageSets/Main/test.txt", "JPEGImages"),
    # NUS-WIDE: AllLabels with the list of all images, or the official TrainTestLabels with the
    # train and test lists; the concept list at the root or in ConceptsList/ (mscl.data.nuswide).
    "nuswide": (
        "ImageList/Imagelist.txt|ImageList/TrainImagelist.txt",
        "Concepts81.txt|ConceptsList/Concepts81.txt",
        "Groundtruth/AllLabels|Groundtruth/TrainTestLabels",
    ),
    "aapd": tuple(f"{kind}_{split}" for kind in ("text", "label") for split in ("train", "val", "test")),
    "mimic3": tuple(f"{table}.csv|{table}.csv.gz" for table in ("NOTEEVENTS", "DIAGNOSES_ICD", "PROCEDURES_ICD")),
    "mimic4": tuple(
        f"{table}.csv|{table}.csv.gz" for table in ("note/discharge", "hosp/diagnoses_icd", "hosp/procedures_icd")
    ),
}

# MIMIC split folders (`sources.mimic*.splits` when it is a folder): one subfolder per version.
SPLIT_VERSIONS = {"mimic3": ("mimic3",), "mimic4": ("mimic4_icd9", "mimic4_icd10")}
SPLIT_LIST_FILES = tuple(
    f"{split}_{space}_hadm_ids.csv" for split in ("train", "dev", "test") for space in ("full", "50")
) + ("top50_code_list.txt",)


def coco_release(root: str | Path) -> str | None:
    """The COCO release whose instances annotations `root` holds: "2014" when either 2014 file is
    there (the paper's release wins when both are), else "2017" when either 2017 file is, else None."""
    annotations = Path(root).expanduser() / "annotations"
    for year in COCO_RELEASES:
        if any((annotations / f"instances_{split}{year}.json").is_file() for split in ("train", "val")):
            return year
    return None


def missing_parts(source: str, root: str | Path) -> list[str]:
    """The layout entries of `source` that `root` lacks (all of them when root is no folder)."""
    root = Path(root).expanduser()
    layout = LAYOUTS[source]
    if not root.is_dir():
        return list(layout)
    return [entry for entry in layout if not any((root / option).exists() for option in entry.split("|"))]


def source_problem(source: str, root: str | Path) -> str | None:
    """None when `root` holds `source`'s layout, else one sentence saying what is missing."""
    root_path = Path(root).expanduser()
    if not root_path.exists():
        return f"{str(root)!r} does not exist"
    if not root_path.is_dir():
        return f"{str(root)!r} is not a folder"
    missing = missing_parts(source, root_path)
    if missing:
        return f"{str(root)!r} lacks {', '.join(m.replace('|', ' or ') for m in missing)}"
    return None


def split_folder_problem(source: str, folder: str | Path) -> str | None:
    """None when a local MIMIC split folder holds every list file per version, else what is missing."""
    folder_path = Path(folder).expanduser()
    if not folder_path.is_dir():
        return f"{str(folder)!r} is not an existing folder"
    missing = [
        f"{version}/{name}"
        for version in SPLIT_VERSIONS[source]
        for name in SPLIT_LIST_FILES
        if not (folder_path / version / name).is_file()
    ]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        return f"{str(folder)!r} lacks {shown}"
    return None
