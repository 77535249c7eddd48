"""AAPD (arXiv Academic Paper Dataset) -> manifest (`python -m mscl prepare-aapd`).

Layout read under --root: `text_{train,val,test}` (one space-tokenised abstract per line) and
`label_{train,val,test}` (the space-separated subject labels of the same line). All documents
are pooled in train, val, test file order and get ids `aapd-<index in that pool>`.

The paper's 37.8k / 6.7k / 11.3k documents are a re-split of the 55.8k pooled documents, so
the default policy (`resplit`) shuffles the pool with the seed and cuts it in those
proportions; `original` keeps the published files' split. Documents with an empty text or no
label are dropped and counted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from mscl import cli
from mscl.defaults import AAPD_FRACTIONS as DEFAULT_FRACTIONS
from mscl.data.manifest import SPLITS, provenance, write_dataset
from mscl.data.splitting import check_fractions, fractional_split
from mscl.errors import InputError, OptionNames

FORMAT = "AAPD text_*/label_* line files"
FIX_DOWNLOAD = "unpack the AAPD release (text_train, label_train, ... text_test, label_test) under --root"
# An arXiv subject label as AAPD writes it (cs.IT, math.IT, quant-ph, cond-mat.dis-nn; SGM's copy
# lower-cases them): it starts with a letter. A comma-separated line or a one-hot 0/1 string is
# not made of these, and would otherwise become one label per line or labels named 0 and 1.
LABEL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]*")


def read_line_file(path: Path) -> list[str]:
    """Lines of a text file without their line endings (a final newline adds no line)."""
    if not path.is_file():
        raise InputError(path, "AAPD file not found", FIX_DOWNLOAD)
    try:
        # utf-8-sig: a byte-order mark (left by some editors) is dropped, not read as text.
        with open(path, encoding="utf-8-sig") as handle:
            return [line.rstrip("\n") for line in handle]
    except UnicodeDecodeError as error:
        raise InputError(path, f"not UTF-8 text ({error})", "re-extract the file from the AAPD release") from error


def parse_label_lines(lines: Sequence[str], path: Path) -> list[list[str]]:
    """The sorted, deduplicated labels of each line; a line that is not space-separated label
    names (comma-separated, a one-hot 0/1 string) raises, naming its line number."""
    labels = []
    for number, line in enumerate(lines, start=1):
        tokens = line.split()
        bad = next((token for token in tokens if not LABEL_NAME.fullmatch(token)), None)
        if bad is not None:
            kind = "comma-separated" if "," in bad else "a one-hot 0/1 string" if set(bad) <= {"0", "1"} else "not a label name"
            raise InputError(
                path,
                f"line {number} is not space-separated label names: {bad[:30]!r} is {kind}",
                f"write each document's labels as names separated by spaces (e.g. 'cs.IT math.IT'), as the AAPD release's {path.name} does",
                field=f"line {number}",
            )
        labels.append(sorted(set(tokens)))
    return labels


def read_source_split(root: Path, split: str) -> pd.DataFrame:
    """Texts and label lists of one published split; the two files must have equal line counts."""
    text_path, label_path = root / f"text_{split}", root / f"label_{split}"
    texts, labels = read_line_file(text_path), read_line_file(label_path)
    if len(texts) != len(labels):
        raise InputError(
            text_path,
            f"has {len(texts)} lines but {label_path} has {len(labels)}",
            f"use matching {text_path.name} and {label_path.name} files: line i of one describes line i of the other",
        )
    if texts and not any(line.split() for line in labels):
        raise InputError(
            label_path, f"no line holds a label, so every document of split {split!r} would be dropped",
            f"use the {label_path.name} file of the AAPD release (space-separated subject labels, one line per document)", field=split,
        )
    return pd.DataFrame({"text": [t.strip() for t in texts], "labels": parse_label_lines(labels, label_path), "source_split": split})


def id_width(count: int) -> int:
    """Digits of the zero-padded document index (at least 6, enough for `count` documents)."""
    return max(6, len(str(max(count - 1, 0))))


def split_policy(policy: str, seed: int, fractions: Sequence[float]) -> str:
    """The split policy sentence recorded in stats.json."""
    if policy == "original":
        return "the published text_/label_ train, val and test files are kept as the splits; documents without text or label are dropped and counted"
    shares = "/".join(f"{f:.4f}" for f in fractions)
    return (
        "all documents of the published train, val and test files are pooled and re-split at random "
        f"into train/val/test with fractions {shares} (numpy default_rng seed {seed}, ids sorted first), "
        "proportional to the paper's 37.8k/6.7k/11.3k; documents without text or label are dropped and counted"
    )


def prepare(
    root: Path,
    out: Path,
    seed: int,
    policy: str = "resplit",
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    names: OptionNames = OptionNames(),
) -> dict[str, Any]:
    """Parse the AAPD files under `root` and write the manifest to `out`; return its stats."""
    fractions = check_fractions(fractions)
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "AAPD root folder not found", f"set {names('--root')} to the folder holding text_train, label_train, ...")
    pooled = pd.concat([read_source_split(root, split) for split in SPLITS], ignore_index=True)
    width = id_width(len(pooled))
    pooled.insert(0, "id", [f"aapd-{i:0{width}d}" for i in range(len(pooled))])

    no_text = pooled["text"] == ""
    no_label = pooled["labels"].map(len) == 0
    kept = pooled[~no_text & ~no_label].set_index("id", drop=False)
    if kept.empty:
        raise InputError(root, "no document has both text and labels", FIX_DOWNLOAD)

    if policy == "original":
        members = [list(kept.loc[kept["source_split"] == split, "id"]) for split in SPLITS]
    else:
        members = fractional_split(list(kept["id"]), fractions, seed)
    splits = {name: kept.loc[sorted(ids), ["id", "labels", "text"]].reset_index(drop=True) for name, ids in zip(SPLITS, members)}
    sources = [root / f"{kind}_{split}" for split in SPLITS for kind in ("text", "label")]
    info = provenance(
        "aapd", FORMAT, root, seed, sources,
        policy=policy,
        split_policy=split_policy(policy, seed, fractions),
        fractions=list(fractions) if policy == "resplit" else None,
        source_counts={split: int((pooled["source_split"] == split).sum()) for split in SPLITS},
        dropped={"documents_without_text": int(no_text.sum()), "documents_without_labels": int((no_label & ~no_text).sum())},
    )  # fmt: skip
    return write_dataset(out, splits, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m mscl prepare-aapd --root DIR --out DIR [--seed N] [--policy P] [--fractions T V S]`."""
    args = cli.parse_args("prepare-aapd", argv)
    stats = prepare(args.root, args.out, args.seed, args.policy, args.fractions, OptionNames.of_source("aapd", args.from_config))
    print(f"prepare-aapd: wrote {args.out} counts={stats['counts']} labels={stats['num_labels']} dropped={stats['dropped']}")
    return 0
