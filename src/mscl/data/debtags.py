"""Debian package descriptions -> debtags manifest (`python -m mscl prepare-debtags`).

Inputs: apt's own index files in --lists (normally /var/lib/apt/lists after
`apt-get -o Acquire::Languages=en update`, which fetches the Packages indexes too). Debian's
container images set `Acquire::Languages "none"` (/etc/apt/apt.conf.d/docker-no-languages), so
a later plain `apt-get update` deletes the Translation-en files again (checked): run the
Languages=en update right before this command.
- `*_Packages[.lz4|.xz|.gz|.bz2|.zst]`: one stanza per binary package; `Tag:` holds the debtags as
  comma-separated `facet::tag` values, wrapped over continuation lines (lines starting with a
  space); `Description-md5:` names the package's English description.
- `*_Translation-en[...]`: stanzas `Package:`, `Description-md5:`, `Description-en:`; the first
  line of Description-en is the short description, continuation lines the long one, with
  ` .` lines as paragraph breaks.

Decompression uses no extra Python package: xz, gz and bz2 with the standard library, lz4 and
zst (apt's default on-disk compression) through `/usr/lib/apt/apt-helper cat-file`, which
ships with apt and decompresses every format apt writes.

Join: a package is one sample per package NAME. Packages files are read in sorted path order
(several architectures, suites or components list the same name); the first stanza of a name
that carries a `Tag:` field gives its tags and its Description-md5. Its text comes from the
Translation-en entry with the same Package and Description-md5. Text = the short description
and the long description's lines, stripped and joined with single spaces (the ` .` paragraph
markers dropped).

Label space: tags whose facet is excluded (default role::, special::, made-of::: they describe
packaging - program vs library vs data, "not yet tagged" - not what a package is about) are
removed, then tags carried by fewer than --min-count (default 50) of the joined packages;
packages left with no tag are dropped and counted. Counting runs over all joined packages
(every split); it uses no split information.

Split: deterministic by package name, independent of the other packages: the first 8 bytes of
sha256("<seed>:<name>") as a number in [0, 1) put a package in train, val or test by the
cumulative --fractions (default 0.7 0.1 0.2). A package keeps its split when the archive grows.
Drops are counted: names with no tagged stanza, tagged names without a matching translation,
names with no tag left after the label-space filter.

Subsample (--sample-fraction F < 1, for CPU budgets): after the label space is fixed on all
joined packages, a package is kept when sha256("<seed>:sample:<name>") as a fraction is below
F, a hash independent of the split's, so every split shrinks by about F and a kept package
stays in its split. Tags that end up below --min-count in the sample stay in the vocabulary.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import re
import subprocess
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from mscl import cli
from mscl.defaults import (
    DEBTAGS_EXCLUDED_FACETS as DEFAULT_EXCLUDED_FACETS,
    DEBTAGS_FRACTIONS as DEFAULT_FRACTIONS,
    DEBTAGS_MIN_COUNT as DEFAULT_MIN_COUNT,
)
from mscl.data.manifest import SPLITS, provenance, write_dataset
from mscl.data.splitting import check_fractions
from mscl.errors import InputError

FORMAT = "Debian apt lists: Packages (Tag:) + Translation-en (Description-en:)"
APT_HELPER = Path("/usr/lib/apt/apt-helper")
COMPRESSED = r"(?:\.(?:lz4|xz|gz|bz2|zst))?"
PACKAGES_NAME = re.compile(rf"(?:^|_)Packages{COMPRESSED}$")
TRANSLATION_NAME = re.compile(rf"(?:^|_)Translation-en{COMPRESSED}$")
FIX_UPDATE = "run `apt-get update` (Packages) and `apt-get -o Acquire::Languages=en update` (Translation-en), then pass --lists /var/lib/apt/lists"
FIX_TRANSLATION = "run `apt-get -o Acquire::Languages=en update` (a plain apt-get update under Acquire::Languages \"none\" removes Translation-en)"
HASH_BYTES = 8  # of sha256, read as a big-endian integer and divided by 2**64


# ------------------------------------------------------------------------------ reading files


def read_index(path: Path) -> str:
    """The text of one apt index file, decompressed by its suffix."""
    if not path.is_file():
        raise InputError(path, "apt index file not found", FIX_UPDATE)
    suffix = path.suffix
    try:
        if suffix in (".lz4", ".zst"):
            data = apt_helper_cat(path)
        elif suffix == ".xz":
            data = lzma.decompress(path.read_bytes())
        elif suffix == ".gz":
            data = gzip.decompress(path.read_bytes())
        elif suffix == ".bz2":
            data = bz2.decompress(path.read_bytes())
        else:
            data = path.read_bytes()
    except (lzma.LZMAError, OSError, EOFError, zlib.error, ValueError) as error:
        raise InputError(path, f"cannot decompress ({error})", f"{FIX_UPDATE} to download it again") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        start = data.rfind(b"\n", 0, error.start) + 1
        field_name = data[start:error.start].partition(b":")[0].decode("ascii", "replace") if data[start:start + 1] not in b" \t" else "a continuation line"
        raise InputError(
            path, f"line {line} ({field_name[:40]}) is not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start}",
            f"{FIX_UPDATE} to download it again", field=f"line {line}",
        ) from error


def apt_helper_cat(path: Path) -> bytes:
    """Decompress an lz4/zst index with apt's own helper (apt is where these files come from)."""
    if not APT_HELPER.is_file():
        raise InputError(
            path,
            f"is {path.suffix[1:]}-compressed and {APT_HELPER} (apt's decompressor) is missing",
            f"run on a Debian/Ubuntu system with apt installed, or decompress it first (e.g. `lz4 -d {path.name} {path.stem}`)",
        )
    result = subprocess.run([str(APT_HELPER), "cat-file", str(path)], capture_output=True, check=False)
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError(path, f"apt-helper cat-file failed ({message[-1] if message else 'exit ' + str(result.returncode)})", f"{FIX_UPDATE} to download it again")
    return result.stdout


def iter_stanzas(text: str, path: Path) -> Iterator[dict[str, str]]:
    """Stanzas of a Debian control file: field -> value, continuation lines joined by '\\n'
    (each with its leading space removed); the first line of a value has its spaces stripped."""
    stanza: dict[str, str] = {}
    name = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            if stanza:
                yield stanza
            stanza, name = {}, None
        elif line[0] in " \t":
            if name is None:
                raise InputError(path, f"line {number} continues a field but no field precedes it", f"{FIX_UPDATE} to download it again", field=f"line {number}")
            stanza[name] += "\n" + line[1:]
        else:
            field, colon, value = line.partition(":")
            if not colon or not field:
                raise InputError(path, f"line {number} is neither 'Field: value' nor a continuation line", f"{FIX_UPDATE} to download it again", field=f"line {number}")
            name = field.strip()
            stanza[name] = value.strip()
    if stanza:
        yield stanza


def parse_tags(value: str) -> list[str]:
    """`facet::tag` values of a Tag field (comma separated, possibly over several lines)."""
    return [tag.strip() for tag in value.replace("\n", " ").split(",") if tag.strip()]


def description_text(value: str) -> str:
    """Short description plus long description lines joined by spaces; ' .' paragraph lines dropped."""
    lines = value.split("\n")
    parts = [lines[0].strip()] + [line.strip() for line in lines[1:] if line.strip() != "."]
    return " ".join(part for part in parts if part)


# --------------------------------------------------------------------------------- the join


@dataclass(frozen=True)
class Tagged:
    """The stanza that speaks for one package name."""

    tags: tuple[str, ...]
    md5: str | None


def list_files(lists: Path) -> tuple[list[Path], list[Path]]:
    """Packages and Translation-en files in the lists folder, sorted by path."""
    if not lists.is_dir():
        raise InputError(lists, "apt lists folder not found", FIX_UPDATE, field="--lists")
    files = sorted(p for p in lists.iterdir() if p.is_file())
    packages = [p for p in files if PACKAGES_NAME.search(p.name)]
    translations = [p for p in files if TRANSLATION_NAME.search(p.name)]
    if not packages:
        raise InputError(lists, "no *_Packages index in this folder", FIX_UPDATE, field="--lists")
    if not translations:
        raise InputError(lists, "no *_Translation-en index in this folder", FIX_TRANSLATION, field="--lists")
    return packages, translations


def read_packages(files: Sequence[Path]) -> tuple[dict[str, Tagged], set[str], int]:
    """Name -> first tagged stanza; every package name seen; number of stanzas read."""
    tagged: dict[str, Tagged] = {}
    names: set[str] = set()
    stanzas = 0
    for path in files:
        for stanza in iter_stanzas(read_index(path), path):
            name = stanza.get("Package")
            if not name:
                raise InputError(path, "a stanza has no Package: field", f"{FIX_UPDATE} to download it again", field="Package")
            stanzas += 1
            names.add(name)
            if "Tag" in stanza and name not in tagged:
                tagged[name] = Tagged(tuple(parse_tags(stanza["Tag"])), stanza.get("Description-md5"))
    if not tagged:
        where = files[0] if len(files) == 1 else files[0].parent
        listed = ", ".join(p.name for p in files)
        raise InputError(
            where,
            f"no package stanza has a Tag: field (read {stanzas} stanzas from {listed})",
            "use the Packages index of Debian's main archive, which carries debtags (apt-get update); "
            "security or third-party repositories alone have no Tag: fields",
            field="Tag",
        )
    return tagged, names, stanzas


def read_translations(files: Sequence[Path]) -> dict[tuple[str, str], str]:
    """(package, Description-md5) -> description text; the first file listing a pair wins."""
    texts: dict[tuple[str, str], str] = {}
    for path in files:
        for stanza in iter_stanzas(read_index(path), path):
            name, md5, description = stanza.get("Package"), stanza.get("Description-md5"), stanza.get("Description-en")
            if not name or not md5 or description is None:
                raise InputError(path, "a stanza lacks Package:, Description-md5: or Description-en:", f"{FIX_TRANSLATION} to download it again")
            texts.setdefault((name, md5), description_text(description))
    return texts


def hash_unit(name: str, seed: int) -> float:
    """A package name's stable position in [0, 1): sha256 of '<seed>:<name>'."""
    digest = hashlib.sha256(f"{seed}:{name}".encode("utf-8")).digest()
    return int.from_bytes(digest[:HASH_BYTES], "big") / 2 ** (8 * HASH_BYTES)


def split_of(name: str, seed: int, fractions: Sequence[float]) -> str:
    """train/val/test of a package by its hash and the cumulative fractions."""
    position, cumulative = hash_unit(name, seed), 0.0
    for split, fraction in zip(SPLITS[:-1], fractions[:-1]):
        cumulative += fraction
        if position < cumulative:
            return split
    return SPLITS[-1]


def prepare(
    lists: Path,
    out: Path,
    min_count: int = DEFAULT_MIN_COUNT,
    excluded_facets: Sequence[str] = DEFAULT_EXCLUDED_FACETS,
    seed: int = 0,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    sample_fraction: float = 1.0,
) -> dict[str, Any]:
    """Join Packages and Translation-en under `lists` and write the debtags manifest to `out`."""
    fractions = check_fractions(fractions)
    if not 0 < sample_fraction <= 1:
        raise InputError(None, f"--sample-fraction {sample_fraction} must lie in (0, 1]", "give e.g. 0.3, or 1 for every package", field="--sample-fraction")
    if min_count < 1:
        raise InputError(None, f"--min-count {min_count} must be at least 1", "give e.g. 50", field="--min-count")
    lists = Path(lists)
    excluded = tuple(sorted(set(excluded_facets)))
    package_files, translation_files = list_files(lists)
    tagged, names, stanzas = read_packages(package_files)
    texts = read_translations(translation_files)
    joined, no_translation = join_descriptions(tagged, texts)

    all_tags = Counter(tag for _, tags in joined.values() for tag in set(tags))
    allowed = Counter({tag: n for tag, n in all_tags.items() if tag.split("::")[0] not in excluded})
    vocabulary = sorted(tag for tag, n in allowed.items() if n >= min_count)
    if not vocabulary:
        raise InputError(lists, f"no tag reaches --min-count {min_count} after excluding facets {list(excluded)}", "lower --min-count or exclude fewer facets", field="--min-count")
    splits, no_label_left, not_sampled = split_packages(joined, set(vocabulary), seed, fractions, sample_fraction)

    info = provenance(
        "debtags", FORMAT, lists, seed, [*package_files, *translation_files],
        fractions=list(fractions),
        sample_fraction=sample_fraction,
        split_policy=(
            f"by package name: sha256('{seed}:<name>'), first {HASH_BYTES} bytes as a fraction of 2**64, "
            f"cut at the cumulative fractions {'/'.join(f'{f:g}' for f in fractions)} into train/val/test"
        ),
        label_space={
            "min_count": min_count,
            "excluded_facets": list(excluded),
            "tags_on_joined_packages": len(all_tags),
            "tags_in_allowed_facets": len(allowed),
            "tags_kept": len(vocabulary),
            "rule": "tags of allowed facets carried by at least min_count joined packages (all splits counted)",
        },
        join={"package_stanzas": stanzas, "package_names": len(names), "tagged_names": len(tagged), "translations": len(texts), "joined": len(joined)},
        dropped={"untagged_packages": len(names) - len(tagged), "no_translation": no_translation, "no_label_left": no_label_left, "not_sampled": not_sampled},
    )  # fmt: skip
    return write_dataset(out, splits, labels=vocabulary, info=info)


def join_descriptions(tagged: Mapping[str, Tagged], texts: Mapping[tuple[str, str], str]) -> tuple[dict[str, tuple[str, tuple[str, ...]]], int]:
    """Name -> (English description, tags) of every tagged package whose description is in
    Translation-en (matched by name and Description-md5), by name; and how many have none."""
    joined: dict[str, tuple[str, tuple[str, ...]]] = {}
    no_translation = 0
    for name in sorted(tagged):
        entry = tagged[name]
        text = texts.get((name, entry.md5)) if entry.md5 else None
        if not text:
            no_translation += 1
            continue
        joined[name] = (text, entry.tags)
    return joined, no_translation


def split_packages(
    joined: Mapping[str, tuple[str, tuple[str, ...]]], kept_tags: set[str], seed: int, fractions: Sequence[float], sample_fraction: float
) -> tuple[dict[str, pd.DataFrame], int, int]:
    """The splits (id, labels = kept tags, text) of the joined packages that keep a tag and fall
    in the sample, each split picked by the name hash; and the counts of the two dropped kinds."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in SPLITS}
    no_label_left = not_sampled = 0
    for name, (text, tags) in joined.items():
        labels = sorted(kept_tags.intersection(tags))
        if not labels:
            no_label_left += 1
            continue
        if hash_unit(f"sample:{name}", seed) >= sample_fraction:
            not_sampled += 1
            continue
        rows[split_of(name, seed, fractions)].append({"id": name, "labels": labels, "text": text})
    splits = {name: pd.DataFrame(part, columns=["id", "labels", "text"]) for name, part in rows.items()}
    return splits, no_label_left, not_sampled


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-debtags --lists DIR --out DIR [--min-count N] [--exclude-facets A,B] [--seed N]`."""
    args = cli.parse_args("prepare-debtags", argv)
    stats = prepare(args.lists, args.out, args.min_count, args.exclude_facets, args.seed, args.fractions, args.sample_fraction)
    print(
        f"prepare-debtags: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} "
        f"avg_labels={stats['avg_labels']:.2f} dropped={stats['dropped']}"
    )
    return 0
