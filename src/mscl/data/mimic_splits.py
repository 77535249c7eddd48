"""The fixed public MIMIC split lists and top-50 code lists: fetch, verify, load.

`python -m mscl fetch-mimic-splits --version mimic3 --out DIR [--source DIR] [--no-verify]`

Each setting (`mimic3`, `mimic4_icd9`, `mimic4_icd10`) is 7 small public files: admission-ID
lists `{train,dev,test}_{full,50}_hadm_ids.csv` (one integer HADM_ID per line, no header)
and `top50_code_list.txt` (one ICD code per line). They come from commits pinned below and
are verified against the sha256 embedded here, so a run can only use the lists the paper
used. `--no-verify` skips the check for users who deliberately bring their own lists.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from mscl import cli
from mscl.defaults import MIMIC_DOWNLOAD_TIMEOUT_S as DOWNLOAD_TIMEOUT_S
from mscl.errors import InputError
from mscl.io import sha256_file, staging_folder
from mscl.layout import MIMIC_VERSIONS as VERSIONS

# Where pinned files are downloaded from; a module attribute so tests can point it at a
# local server.
RAW_BASE = "https://raw.githubusercontent.com"

SETTINGS = ("full", "50")
TOP50_FILE = "top50_code_list.txt"
# File-name split -> manifest split (the lists call validation "dev").
LIST_SPLITS = {"train": "train", "dev": "val", "test": "test"}
SPLIT_FILES = tuple(f"{split}_{setting}_hadm_ids.csv" for setting in SETTINGS for split in LIST_SPLITS)
ALL_FILES = SPLIT_FILES + (TOP50_FILE,)

CAML = ("jamesmullenbach/caml-mimic", "44a47455070d3d5c6ee69fb5305e32caec104960")
PLM_ICD = ("MiuLab/PLM-ICD", "410655073b70b7cc41b7dbd600c95d72bd11a4d3")
NGUYEN = ("thomasnguyen92/MIMIC-IV-ICD-data-processing", "076ac16b54b758701a2b1b8e2d0c2fdae945457c")


@dataclass(frozen=True)
class PinnedFile:
    """One public file at a fixed commit, with the sha256 it must have."""

    repo: str  # "owner/name" on GitHub
    commit: str
    path: str  # path inside the repository
    sha256: str

    def url(self, base: str) -> str:
        return f"{base}/{self.repo}/{self.commit}/{self.path}"


def _pinned(
    source: tuple[str, str], folder: str, hashes: dict[str, str], top50_path: str, top50_source: tuple[str, str] | None = None
) -> dict[str, PinnedFile]:
    """Local file name -> pinned file: the six split lists in `folder` plus the top-50 list."""
    files = {name: PinnedFile(*source, f"{folder}/{name}", hashes[name]) for name in SPLIT_FILES}
    files[TOP50_FILE] = PinnedFile(*(top50_source or source), top50_path, hashes[TOP50_FILE])
    return files


SOURCES: dict[str, dict[str, PinnedFile]] = {
    "mimic3": _pinned(
        CAML,
        "mimicdata/mimic3",
        {
            "train_full_hadm_ids.csv": "abc4601d2cb798c7f26d35a4aa38b84b0050af03e102e455ab70651d654cb964",
            "dev_full_hadm_ids.csv": "5bc77377a675b17631844f6253ecec5c0b2b39c294aebe34aebbd2c733d8efb4",
            "test_full_hadm_ids.csv": "2861293b9057a3aa20b21b397590e4f148aceebdaa705622acf748ccb1b7216c",
            "train_50_hadm_ids.csv": "aee261aa45a2d89368e4da275c6c0a601b8bfc2c22e3af915d89adbc068716d2",
            "dev_50_hadm_ids.csv": "bcd69c3be3f4d8a7d29252ac8b5b99f197875b639ab12cf3ab324ee11612ea9e",
            "test_50_hadm_ids.csv": "cc3d3c22cbf0c68b62508712d4fc27baf5a5cb9705c1c8f8b6fc1618332c49b2",
            TOP50_FILE: "555b89809edefc07d7ec08fb81e385657075709ba1b1eebf9f017125a3d4ff29",
        },
        # CAML's repository has no top-50 file (its notebook prints the list); PLM-ICD ships it.
        top50_path="data/mimic3/ALL_CODES_50.txt",
        top50_source=PLM_ICD,
    ),
    "mimic4_icd9": _pinned(
        NGUYEN,
        "mimicdata/mimic4_icd9",
        {
            "train_full_hadm_ids.csv": "a518a3e8e4b2422ad62c06dc07c2f694350e5350bf1b3999d3a7392b923732b4",
            "dev_full_hadm_ids.csv": "7a83c833a04301ae6d8bc6ba69e672af8e525c07a4861b275bd0444d8d3da8ef",
            "test_full_hadm_ids.csv": "863372df77f3e7ad2dc2ed0a33ec85ba5d8fcf17b87b1b622085114c813eff75",
            "train_50_hadm_ids.csv": "b180a597c755f67d4884d3a60df5e95b63d677c38dea93dd36b54f74664b30e2",
            "dev_50_hadm_ids.csv": "4a242d35e63985112fbaa9b63c5102e292330336963f132ab9425c3c9342ec1c",
            "test_50_hadm_ids.csv": "0b3b162102fa3da880a9ec2deace50f07e6cc01a9820a63533880d7999d76cbb",
            TOP50_FILE: "07fb74972d2fa85b27a32227600fd9198de979eb0c42921daef83288da5083ea",
        },
        top50_path="mimicdata/mimic4_icd9/top50_icd9_code_list.txt",
    ),
    "mimic4_icd10": _pinned(
        NGUYEN,
        "mimicdata/mimic4_icd10",
        {
            "train_full_hadm_ids.csv": "a23d2fa7bea7fe29edd603b8cfc83d74e94e3e84b2df45850ed52b0023ec2964",
            "dev_full_hadm_ids.csv": "ad34bf32a05c9deb50d3b67fd177da34e03ab8c237ffc0e26fa57cabcbf92f6c",
            "test_full_hadm_ids.csv": "b6d2428f0b2a740c41ea8c4feb6fe472304f50c980e23b67b1484bb657ade6fe",
            "train_50_hadm_ids.csv": "cef80bc2a9fb43ffd688b3a0235144d65384171551e0e95197faf3fc31ca8aa9",
            "dev_50_hadm_ids.csv": "b76bed490086be25a24cc5cb2d254845c4d5b63a7aaf3a04f94e954e53f18c67",
            "test_50_hadm_ids.csv": "17e7e420750e68f800d9e3b23863106c4ef78471a869db84124c5457fe4a5a90",
            TOP50_FILE: "bd1d313760f60184a4bb50e61ca847c287daf344a64dff1a128a5d62ab9e8aee",
        },
        top50_path="mimicdata/mimic4_icd10/top50_icd10_code_list.txt",
    ),
}


def verify_sha256(path: Path, pinned: PinnedFile, shown_as: str) -> None:
    """Raise unless the file at `path` has the pinned sha256 (`shown_as` names it in the error)."""
    actual = sha256_file(path)
    if actual != pinned.sha256:
        raise InputError(
            shown_as,
            f"sha256 mismatch: expected {pinned.sha256}, got {actual}",
            f"use the unmodified public file {pinned.url(RAW_BASE)} (docs/preprocessing.md, section 'Split lists', "
            "lists every pinned source), or pass --no-verify if you deliberately use your own lists",
            field="sha256",
        )


def _source_folder(source: Path, version: str) -> Path:
    """Accept either the version's folder itself or a parent holding `<version>/`."""
    if not source.is_dir():
        raise InputError(source, "source folder not found", "pass --source the folder holding the 7 list files", field="--source")
    nested = source / version
    return nested if (nested / SPLIT_FILES[0]).is_file() else source


def copy_file(source_dir: Path, name: str, dest: Path) -> None:
    """Copy one list file from a local folder."""
    origin = source_dir / name
    if not origin.is_file():
        raise InputError(origin, "list file not found", f"the --source folder must hold all of {list(ALL_FILES)}", field=name)
    shutil.copyfile(origin, dest)


def download_file(url: str, dest: Path, timeout_s: float) -> None:
    """Download `url` to `dest`; a network failure becomes an InputError with the offline fix."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, open(dest, "wb") as handle:
            shutil.copyfileobj(response, handle)
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise InputError(
            url,
            f"download failed ({reason})",
            "check the internet connection, or copy the lists from a machine that has one and pass --source DIR",
        ) from None


def fetch_split_lists(
    version: str,
    out_dir: str | Path,
    source: str | Path | None = None,
    verify: bool = True,
    timeout_s: float = DOWNLOAD_TIMEOUT_S,
) -> Path:
    """Copy (from `source`) or download the 7 files of `version` into `out_dir`, verified.

    Files are gathered in a staging folder beside `out_dir` and moved in only when all are
    present and verified, so a failure leaves `out_dir` as it was (absent if it was absent).
    """
    if version not in SOURCES:
        raise InputError(None, f"unknown version {version!r}", f"use one of {list(VERSIONS)}", field="--version")
    out_dir = Path(out_dir)
    source_dir = None if source is None else _source_folder(Path(source), version)
    staging = staging_folder(out_dir)
    try:
        for name, pinned in SOURCES[version].items():
            if source_dir is not None:
                copy_file(source_dir, name, staging / name)
                shown_as = str(source_dir / name)
            else:
                shown_as = pinned.url(RAW_BASE)
                download_file(shown_as, staging / name, timeout_s)
            if verify:
                verify_sha256(staging / name, pinned, shown_as)
        out_dir.mkdir(exist_ok=True)
        for name in ALL_FILES:
            os.replace(staging / name, out_dir / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _read_ids(path: Path) -> set[int]:
    """HADM_IDs of one list file (one integer per line; blank lines ignored)."""
    ids = set()
    # utf-8-sig: a byte-order mark (left by some editors) is dropped, not read as part of an id.
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        value = line.strip()
        if not value:
            continue
        if not value.isdigit():
            raise InputError(
                path, f"line {number} is {value[:20]!r}, not an integer HADM_ID", "use the unmodified public list", field="hadm_id"
            )
        ids.add(int(value))
    return ids


def _read_top50(path: Path) -> list[str]:
    codes = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    if len(set(codes)) != len(codes):
        raise InputError(path, "the code list repeats a code", "use the unmodified public top-50 list", field="code")
    return codes


def load_split_lists(directory: str | Path) -> dict:
    """Read a fetched folder: {"full": {split: set[int]}, "50": {split: set[int]}, "top50": [codes]}.

    Splits are named as in the manifests (dev -> "val"). Within a setting the three lists
    must be disjoint.
    """
    directory = Path(directory)
    missing = [name for name in ALL_FILES if not (directory / name).is_file()]
    if missing:
        raise InputError(
            directory,
            f"missing split list file(s) {missing}",
            "run `python -m mscl fetch-mimic-splits --version ... --out DIR` and pass that DIR",
            field="--splits",
        )
    lists: dict = {}
    for setting in SETTINGS:
        lists[setting] = {
            split: _read_ids(directory / f"{name}_{setting}_hadm_ids.csv") for name, split in LIST_SPLITS.items()
        }
        train, val, test = (lists[setting][split] for split in ("train", "val", "test"))
        if (train & val) or (train & test) or (val & test):
            raise InputError(
                directory, f"the {setting} split lists overlap", "use the unmodified public lists", field=f"{setting} lists"
            )
    lists["top50"] = _read_top50(directory / TOP50_FILE)
    return lists


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("fetch-mimic-splits", argv)
    if args.no_verify:
        print("fetch-mimic-splits: --no-verify given, sha256 not checked", file=sys.stderr)
    out = fetch_split_lists(args.version, args.out, source=args.source, verify=not args.no_verify, timeout_s=args.timeout)
    print(f"fetch-mimic-splits: {args.version}: {len(ALL_FILES)} files in {out}", file=sys.stderr)
    return 0
