"""`python -m mscl cache-prefix`: the frozen part of a top-layer `hf` or `plm_icd` encoder, run
once per dataset and cached, so that training and the probe run only the top layers.

    python -m mscl cache-prefix --data DIR --encoder-spec JSON_OR_FILE --out FILE [--batch-size 64]

An `hf` encoder spec with `trainable_layers: k` (`mscl.models.text`) freezes the embeddings and
the lower L - k transformer layers; so does a `plm_icd` spec (`mscl.models.plm_icd`; there k may
be 0: the whole transformer is frozen and only the label attention trains). That *prefix*
always runs in eval mode without gradients, so its output is a fixed function of the text: this
command computes it for every split (train/val/test, column `text`) and writes one file; the
top k layers then run on it exactly as the full model would (eval mode: equal to float
tolerance). For `plm_icd` the prefix runs per chunk row as the full model does (each
chunk_size-token chunk of a document is its own sequence); the document's rows are stored
concatenated, real tokens only, and the top layers cut them into the same chunks again.
`--encoder-spec` is inline JSON starting with '{' or a JSON/YAML file holding either the
encoder spec or a whole run spec (its `encoder` is used). The prefix is built from the spec's
`path`, never from a pretraining run's encoder.pt: the frozen weights are the pretrained ones,
so one cache serves pretraining and the probe alike.

File (`torch.load(path, weights_only=True)`; written atomically):

    {"format": 1,
     "fingerprint": {"encoder": {kind, path, max_length, (plm_icd: chunk_size,) trainable_layers},
                     "ids": {split: sha256 of the split's ids joined by newlines}},
     "splits": {split: {"ids": [str, ...],                   # manifest order
                        "hidden": float16 [sum of lengths, H],  # real tokens only, packed
                        "lengths": int32 [N]}}}               # tokens of each sample

Samples are packed without padding: sample i's states are rows offsets[i]:offsets[i + 1] of
`hidden` (offsets = 0 followed by the cumulative lengths). Tokenisation is the encoder's own
(`encoder.tokenize`: truncation at max_length, right padding), so every sample is its first
`length` positions; padding positions never influence real ones (they are masked out of
attention), so they are not stored. Size: H * 2 bytes per real token (MiniLM, H = 384: 768 B).

API for training code (pretrain / probe wiring `--prefix-cache FILE`):

    load_prefix_cache(path, spec_encoder, splits) -> {name: {"hidden", "lengths", "offsets"}}
        Checks the format and the fingerprint: the encoder spec (`mscl.models.prefix_spec`:
        kind, path, max_length, trainable_layers, plm_icd's chunk_size; defaults filled in) and the ids of every split in `splits`
        ({name: mscl.train.data.Split}) must match, else InputError telling the user to rerun
        cache-prefix. Splits of the file that are not asked for are ignored. `hidden` stays
        float16 in memory (half the size); items are cast to float32 one by one.
    PrefixDataset(split, cached)   # cached = load_prefix_cache(...)[name]
        Items {"hidden": float32 [T_i, H], "attention_mask": int64 ones [T_i],
               "label_ids": split.labels.ids(i)}; T_i is the sample's own token count.
    collate_prefix(samples, num_labels) -> {"hidden": float32 [B, T, H],
                                            "attention_mask": int64 [B, T],
                                            "labels": sparse CSR [B, L]}
        Right-pads to the longest sample in the batch, then drops every column no row attends
        to (so items padded to a fixed length are trimmed too); labels via
        `mscl.losses.csr_labels`, as `mscl.train.data.collate`.
    mscl.train.data.make_loader(dataset, ..., collate_fn=collate_prefix) -> DataLoader

A batch (moved to the device) goes straight into the encoder: `encoder({"hidden": ...,
"attention_mask": ...})` -> h [B, H] runs the top k layers and the pooling (plm_icd: pads the
batch to whole chunks, runs the top k layers per chunk row and the label attention); in train
mode two calls give two dropout views, as with tokens. The encoder must be built from the same
spec (`encoder.prefix_cached` is True); `encoder(tokens)` still works and gives the same h.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor
from torch.utils.data import Dataset
from tqdm import tqdm

from mscl import cli
from mscl.data.manifest import SPLITS, read_labels
from mscl.errors import InputError
from mscl.interrupt import exit_on_sigterm
from mscl.train.data import Split, load_split
from mscl.train.runtime import finish_versions, load_checkpoint, pick_device, save_checkpoint, software_versions
from mscl.train.spec import read_spec_mapping

FORMAT = 1


# ---------------------------------------------------------------------- fingerprint


def ids_digest(ids: Sequence[str]) -> str:
    """sha256 of the ids joined by newlines (ids never contain one: they are manifest ids)."""
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()


def encoder_fingerprint(spec_encoder: Any, where: str | Path | None) -> dict[str, Any]:
    """The prefix-relevant part of an `hf` or `plm_icd` spec with `trainable_layers`
    (`mscl.models.prefix_spec`); InputError otherwise."""
    from mscl.models import PREFIX_KINDS, prefix_spec

    kind = spec_encoder.get("kind") if isinstance(spec_encoder, Mapping) else spec_encoder
    if kind not in PREFIX_KINDS:
        raise InputError(where, f"prefix caching needs an encoder spec of kind {' or '.join(PREFIX_KINDS)}, got kind {kind!r}", "use an hf or plm_icd encoder with `trainable_layers: k`", field="encoder.kind")
    try:
        fingerprint = prefix_spec(spec_encoder)
    except ValueError as error:
        raise InputError(where, str(error), "fix the encoder spec", field="encoder") from error
    if fingerprint["trainable_layers"] is None:
        raise InputError(
            where,
            "the encoder spec has no `trainable_layers`, so every layer trains and there is no frozen prefix to cache",
            "set `trainable_layers: k` (the top k layers train, e.g. 1) in the encoder spec",
            field="encoder.trainable_layers",
        )
    return fingerprint


# --------------------------------------------------------------------------- caching


def packed_offsets(lengths: Tensor) -> Tensor:
    """Where each sample's rows start in the packed `hidden`: 0, then the cumulative lengths
    (int64 [N + 1]; sample i is rows offsets[i]:offsets[i + 1])."""
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(lengths.long(), 0)
    return offsets


@torch.no_grad()
def prefix_split(encoder: Any, texts: Sequence[str], batch_size: int, device: torch.device, name: str) -> dict[str, Tensor]:
    """{"hidden": float16 [sum lengths, H], "lengths": int32 [N]} for `texts` (manifest order).

    Texts are tokenised once to learn their lengths, then run through the prefix in batches of
    similar length (longest first: least padding, and the largest batch comes first), and each
    sample's real positions are written to its place in the packed tensor.
    """
    lengths = []
    for start in range(0, len(texts), batch_size):
        mask = encoder.tokenize(list(texts[start : start + batch_size]))["attention_mask"]
        positions = torch.arange(mask.shape[1])
        row_lengths = mask.sum(dim=1)
        if not torch.equal(mask.bool(), positions < row_lengths[:, None]):
            raise ValueError("the tokenizer pads on the left or masks tokens inside a text; cache-prefix needs right padding")
        lengths.append(row_lengths)
    lengths_all = torch.cat(lengths).long() if lengths else torch.zeros(0, dtype=torch.long)
    offsets = packed_offsets(lengths_all)
    hidden_out = torch.empty(int(offsets[-1]), encoder.output_dim, dtype=torch.float16)
    order = torch.argsort(lengths_all, descending=True, stable=True).tolist()
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    for rows in tqdm(batches, desc=f"cache-prefix {name}", disable=None, file=sys.stderr):
        tokens = encoder.tokenize([texts[row] for row in rows])
        hidden = encoder.prefix({key: value.to(device) for key, value in tokens.items()})["hidden"].float().cpu()
        for index, row in enumerate(rows):
            length = int(lengths_all[row])
            if int(tokens["attention_mask"][index].sum()) != length:
                raise ValueError("the tokenizer gave a text a different length in a different batch; cache-prefix needs batch-independent tokenisation")
            hidden_out[offsets[row] : offsets[row + 1]] = hidden[index, :length]
    return {"hidden": hidden_out, "lengths": lengths_all.to(torch.int32)}


def cache_prefix(encoder: Any, splits: Mapping[str, Split], batch_size: int, device: torch.device) -> dict[str, Any]:
    """The cache-file payload for `splits` ({name: Split} of texts), from a prefix-cached encoder."""
    from mscl.models import prefix_spec

    fingerprint = {"encoder": prefix_spec(encoder.spec), "ids": {}}
    payload: dict[str, Any] = {"format": FORMAT, "fingerprint": fingerprint, "splits": {}}
    encoder.to(device).eval()
    for name, split in splits.items():
        started = time.perf_counter()
        packed = prefix_split(encoder, split.items, batch_size, device, name)
        fingerprint["ids"][name] = ids_digest(split.ids)
        payload["splits"][name] = {"ids": list(split.ids), **packed}
        print(
            f"cache-prefix: {name}: {len(split)} samples, {int(packed['lengths'].sum())} tokens, "
            f"{time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return payload


def load_prefix_cache(path: str | Path, spec_encoder: Mapping[str, Any], splits: Mapping[str, Split]) -> dict[str, dict[str, Tensor]]:
    """{name: {"hidden": float16 [sum lengths, H], "lengths": int64 [N], "offsets": int64 [N + 1]}}
    for every split in `splits`, after checking that the file was made by this encoder spec
    (prefix_spec part) from these very samples (ids, in order); InputError otherwise."""
    path = Path(path)
    rerun = f"rerun `python -m mscl cache-prefix --data DIR --encoder-spec SPEC --out {path}` with the run's encoder spec and dataset"
    if not path.is_file():
        raise InputError(path, "prefix cache not found", rerun)
    expected = encoder_fingerprint(spec_encoder, "--spec")
    cached = load_checkpoint(path)
    if not isinstance(cached, dict) or cached.get("format") != FORMAT:
        got = cached.get("format") if isinstance(cached, dict) else type(cached).__name__
        raise InputError(path, f"not a prefix cache of format {FORMAT} (got {got!r})", rerun, field="format")
    fingerprint = cached.get("fingerprint", {})
    if fingerprint.get("encoder") != expected:
        raise InputError(path, f"made for encoder {fingerprint.get('encoder')}, but the run's encoder is {expected}", rerun, field="fingerprint.encoder")
    result = {}
    for name, split in splits.items():
        stored = cached["splits"].get(name)
        if stored is None:
            raise InputError(path, f"has no split {name!r} (it holds {sorted(cached['splits'])})", rerun, field="splits")
        if fingerprint.get("ids", {}).get(name) != ids_digest(split.ids) or stored["ids"] != list(split.ids):
            raise InputError(
                path,
                f"split {name!r} was cached for {len(stored['ids'])} other samples than the {len(split)} being used (ids differ)",
                rerun,
                field=f"splits.{name}.ids",
            )
        lengths = stored["lengths"].long()
        offsets = packed_offsets(lengths)
        if int(offsets[-1]) != stored["hidden"].shape[0]:
            raise InputError(path, f"split {name!r}: lengths add up to {int(offsets[-1])} tokens but hidden has {stored['hidden'].shape[0]} rows", rerun, field=f"splits.{name}.hidden")
        result[name] = {"hidden": stored["hidden"], "lengths": lengths, "offsets": offsets}
    return result


# ------------------------------------------------------------------- dataset, loader


class PrefixDataset(Dataset):
    """Cached prefix states of one split: items {"hidden": float32 [T_i, H], "attention_mask":
    int64 ones [T_i], "label_ids": the sample's label ids}."""

    def __init__(self, split: Split, cached: Mapping[str, Tensor]):
        if len(cached["lengths"]) != len(split):
            raise ValueError(f"the cache holds {len(cached['lengths'])} samples but the split has {len(split)}; load it with load_prefix_cache for this split")
        self.split = split
        self.hidden = cached["hidden"]
        self.lengths = cached["lengths"]
        self.offsets = cached["offsets"]

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        start, stop = int(self.offsets[index]), int(self.offsets[index + 1])
        return {
            "hidden": self.hidden[start:stop].float(),
            "attention_mask": torch.ones(stop - start, dtype=torch.long),
            "label_ids": self.split.labels.ids(index),
        }


def collate_prefix(samples: list[dict[str, Any]], num_labels: int) -> dict[str, Any]:
    """One batch: hidden [B, T, H] and attention_mask [B, T] right-padded with zeros to the
    longest sample, minus the columns no row attends to, and the labels as a sparse CSR [B, L]."""
    from mscl.losses import csr_labels

    longest = max(len(sample["attention_mask"]) for sample in samples)
    size = samples[0]["hidden"].shape[-1]
    hidden = torch.zeros(len(samples), longest, size, dtype=samples[0]["hidden"].dtype)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, sample in enumerate(samples):
        length = len(sample["attention_mask"])
        hidden[row, :length] = sample["hidden"]
        mask[row, :length] = sample["attention_mask"]
    used = mask.bool().any(dim=0)
    if not bool(used.all()):
        hidden, mask = hidden[:, used], mask[:, used]
    labels = csr_labels([sample["label_ids"] for sample in samples], num_labels)
    return {"hidden": hidden, "attention_mask": mask, "labels": labels}


# ------------------------------------------------------------------------------- CLI


def read_encoder_spec(value: str) -> tuple[dict[str, Any], str]:
    """(encoder spec, where it came from for messages): an encoder spec or a run spec's `encoder`."""
    where = "--encoder-spec" if value.lstrip().startswith("{") else value
    mapping = read_spec_mapping(value)
    if isinstance(mapping, Mapping) and "kind" not in mapping and isinstance(mapping.get("encoder"), Mapping):
        mapping = mapping["encoder"]
    if not isinstance(mapping, Mapping):
        raise InputError(where, f"the encoder spec is a {type(mapping).__name__}, not a mapping", "give e.g. {\"kind\": \"hf\", \"path\": ..., \"trainable_layers\": 1}", field="encoder")
    return dict(mapping), where


def versions_path(cache: Path) -> Path:
    """Where a cache's versions.json lies: beside it, `<encoder>.versions.json`."""
    return cache.with_name(f"{cache.stem}.versions.json")


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("cache-prefix", argv)
    exit_on_sigterm("cache-prefix: stopped by SIGTERM; nothing was written, rerun to start over")
    if args.batch_size < 1:
        raise InputError("--batch-size", f"must be a positive integer, got {args.batch_size}", "pass e.g. --batch-size 64", field="batch-size")
    spec_encoder, where = read_encoder_spec(args.encoder_spec)
    encoder_fingerprint(spec_encoder, where)  # hf + trainable_layers, before anything heavy
    vocabulary = read_labels(args.data)
    splits = {name: load_split(args.data, name, vocabulary, "text") for name in SPLITS}
    from mscl.models import build_encoder

    try:
        encoder = build_encoder(spec_encoder, len(vocabulary))
    except ValueError as error:
        raise InputError(where, str(error), "fix the encoder spec", field="encoder") from error
    device = pick_device()
    payload = cache_prefix(encoder, splits, args.batch_size, device)
    finish_versions(versions_path(args.out), software_versions(device, "fp32"))
    save_checkpoint(args.out, payload)
    size = args.out.stat().st_size
    print(f"cache-prefix: wrote {args.out} ({size / 2**20:.1f} MiB)", file=sys.stderr)
    return 0
