"""How an encoder reads a split: the batch key of each modality's views, a text encoder's
inputs (cached prefix states or tokenised texts) and one eval-mode feature pass over a split.

Shared by pretraining (its convergence monitor, `mscl.train.monitor`) and the probe.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from mscl.train.augment import eval_views
from mscl.train.data import Split, eval_dataset, make_loader, worker_count
from mscl.train.runtime import autocast
from mscl.train.spec import RunSpec

# Modalities whose two views arrive as one tensor [B, 2, ...] in the batch, under this key.
VIEW_KEYS = {"image": "images", "tabular": "features"}


def text_inputs(encoder: nn.Module, batch: dict[str, Any]) -> dict[str, Tensor]:
    """What a text encoder reads: cached prefix states when the batch carries them
    (`mscl.train.prefix`), else the batch's texts tokenised."""
    if "hidden" in batch:
        return {"hidden": batch["hidden"], "attention_mask": batch["attention_mask"]}
    return encoder.tokenize(batch["text"])


@torch.no_grad()
def extract_features(
    encoder: nn.Module, split: Split, spec: RunSpec, device: torch.device, precision: str, name: str,
    cached: dict[str, Tensor] | None = None, label_wise: bool = False,
) -> Tensor:  # fmt: skip
    """[N, output_dim] float32 CPU features of a split, in manifest order (from the split's
    cached prefix states when `cached` is given); with `label_wise` (PLM-ICD) the label
    vectors V [N, L, d] as float16 instead."""
    # The pretraining batch fits on the device with gradients for two views, so it fits here.
    options = dict(shuffle=False, drop_last=False, generator=None, num_workers=worker_count(spec.pretrain.num_workers, spec.modality, spec.pretrain.image_size), device=device)
    if cached is not None:
        from mscl.train.prefix import PrefixDataset, collate_prefix

        loader = make_loader(PrefixDataset(split, cached), spec.batch_size, collate_fn=collate_prefix, **options)
    else:
        loader = make_loader(eval_dataset(split, spec.modality, spec.pretrain.image_size), spec.batch_size, **options)
    represent = encoder.label_vectors if label_wise else encoder
    # Each batch's output is copied into one tensor for the split, allocated at the first batch:
    # a small tensor kept per batch, between each batch's large transient ones, fragmented the
    # heap so that it grew by GBs over MIMIC-IV's train split (docs/scale.md), and a kept view
    # of a pooled output ([CLS], a row of [B, T, d]) kept the batch's whole hidden state alive.
    features, start = None, 0
    for batch in tqdm(loader, desc=f"features {name}", disable=None, file=sys.stderr):
        if spec.modality in VIEW_KEYS:
            key = VIEW_KEYS[spec.modality]
            inputs = {key: batch[key].to(device, non_blocking=True)}
            if spec.modality == "image":
                inputs[key] = eval_views(inputs[key])  # uint8 centre crops -> normalised floats
        else:
            inputs = {key: value.to(device, non_blocking=True) for key, value in text_inputs(encoder, batch).items()}
        with autocast(device, precision):
            output = represent(inputs)
        if features is None:
            features = torch.empty(len(split), *output.shape[1:], dtype=torch.float16 if label_wise else torch.float32)
        features[start : start + len(output)] = output.detach().to("cpu")
        start += len(output)
    return features
