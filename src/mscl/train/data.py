"""Manifest splits as tensors, datasets, view transforms and seeded DataLoaders.

Image batches are `{"images": uint8 [B, 3, S, S]}` (one centre crop) or `[B, 2, 3, S, S]`
(two random resized crops), made float, colour-augmented and normalised on the training device
(`mscl.train.augment`); tabular batches `{"features": [B, F]}` or `[B, 2, F]` (two randomly masked views of
the standardised features); text batches are `{"text": [B strings]}`: the training step
tokenises once and gets its two views from two dropout-noised encoder passes. Every batch also
has `labels`: a [B, L] sparse CSR multi-hot matrix built from the samples' label ids (`mscl.losses.csr_labels`),
the form the losses read cheapest (B*K indices instead of a dense B x L matrix: 52 MB at
B = 512, L = 25,230 in float32; docs/losses.md). A split holds its labels sparse too
(`mscl.train.labels.LabelMatrix`).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, Sampler, SequentialSampler

from mscl.data.manifest import read_split, read_stats, read_texts, rebuild_fix
from mscl.errors import InputError
from mscl.sockets import shorten_multiprocessing_tempdir
from mscl.train.augment import eval_crop, train_crop
from mscl.train.decode import DEVICE, WORKERS, collate_encoded, encoded_item, open_rgb
from mscl.train.labels import LabelMatrix

# token_dropout views hide this fraction of each text's tokens (besides dropout noise).
TOKEN_DROP_RATE = 0.1


@dataclass(frozen=True)
class Split:
    """One split of a prepared manifest, ready for a Dataset."""

    ids: list[str]
    items: list[str] | Tensor  # texts, absolute image paths, or float32 features [N, F]
    labels: LabelMatrix  # [N, L] multi-hot over the vocabulary, sparse (mscl.train.labels)
    ignored_labels: int  # label occurrences outside the vocabulary (dropped, counted)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_labels(self) -> int:
        return self.labels.num_labels


# modality -> the manifest column its encoder reads.
CONTENT_COLUMN = {"text": "text", "image": "path", "tabular": "features"}


def load_split(data_dir: str | Path, split: str, vocabulary: Sequence[str], modality: str) -> Split:
    """Read a split; image paths become absolute (stats.json's root), texts stay as they are,
    features become one float32 tensor [N, F] (unstandardised: see `standardize`).

    Checked against the rest of the folder: features finite, some sample labelled, and
    labels.txt the vocabulary the manifest was written with (stats.json's label count and the
    split's out-of-vocabulary occurrences), so that a hand-edited file cannot silently change
    what a run trains or scores."""
    path = Path(data_dir) / f"{split}.parquet"
    # Texts are read apart, a batch of rows at a time (`read_texts`): the column is GBs at MIMIC-IV's size.
    frame = read_split(data_dir, split, columns=["id", "labels"] if modality == "text" else None)
    stats = read_stats(data_dir)
    content = CONTENT_COLUMN[modality]
    items = read_texts(data_dir, split) if modality == "text" else frame.get(content)
    if items is None:
        raise InputError(
            path,
            f"the encoder reads {modality} but this manifest has no {content!r} column",
            "pair image encoders with image datasets and text encoders with text datasets",
        )
    if modality == "tabular":
        items = torch.from_numpy(np.stack(items.to_numpy()).astype(np.float32))
        finite = torch.isfinite(items).all(dim=1)
        if not finite.all():
            sample = frame["id"].iloc[int((~finite).nonzero()[0])]
            raise InputError(path, f"sample {str(sample)[:40]!r} of split {split!r} has a NaN or infinite feature", rebuild_fix(data_dir), field="features")
    elif modality == "image":
        root = Path(stats.get("root", "."))
        items = [str(root / path) for path in items]
    labels, ignored = LabelMatrix.from_label_lists(frame["labels"].tolist(), vocabulary)
    check_vocabulary(data_dir, split, stats, len(vocabulary), ignored)
    if not labels.any():
        raise InputError(path, f"no sample of split {split!r} has a label of labels.txt", rebuild_fix(data_dir), field="labels")
    return Split(frame["id"].astype(str).tolist(), items, labels, ignored)


def check_vocabulary(data_dir: str | Path, split: str, stats: dict, num_labels: int, ignored: int) -> None:
    """labels.txt must be what the manifest was written with: as many labels as stats.json
    records, and exactly the split's recorded out-of-vocabulary label occurrences outside it."""
    recorded = stats.get("splits", {}).get(split, {}).get("out_of_vocabulary_occurrences")
    if stats.get("num_labels") not in (None, num_labels) or recorded not in (None, ignored):
        raise InputError(
            Path(data_dir) / "labels.txt",
            f"disagrees with the manifest: {num_labels} labels where stats.json records {stats.get('num_labels')}; "
            f"{ignored} label occurrences of split {split!r} outside it where stats.json records {recorded}",
            rebuild_fix(data_dir), field="labels",
        )


def standardize(split: Split, train: Split) -> Split:
    """`split` with its features standardised by the train split's per-feature mean and
    standard deviation (MulSupCon's StandardScaler; population std, computed in float64). A
    constant train feature keeps scale 1, so it maps to 0 instead of dividing by zero."""
    reference = train.items.double()
    mean, std = reference.mean(dim=0), reference.std(dim=0, unbiased=False)
    std = torch.where(std > 0, std, torch.ones_like(std))
    return dataclasses.replace(split, items=((split.items.double() - mean) / std).float())


# --------------------------------------------------------------------------- datasets


class ImageDataset(Dataset):
    """Images as uint8 crops of image_size x image_size: `views` random resized crops each
    ([views, 3, S, S], for pretraining) or, with views=1, the evaluation centre crop
    ([3, S, S]). Colour augmentation and normalisation happen per batch on the training
    device (`mscl.train.augment`).

    With views > 1 an item is asked for as (index, seed) (`SeededViews`): the crops draw from a
    generator seeded with `seed`, so they are the same in any DataLoader worker. With
    decode="device" such an item is the encoded image and its crop boxes instead
    (`mscl.train.decode.encoded_item`), which the training step decodes and cuts on the device."""

    seeded_views = True  # make_loader pairs each index with a seed when views > 1

    def __init__(self, split: Split, image_size: int, views: int, crop_scale_min: float = 1.0, decode: str = WORKERS):
        self.split = split
        self.image_size = image_size
        self.views = views
        self.crop_scale_min = crop_scale_min
        self.decode = decode

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, item: int | tuple[int, int]) -> dict[str, Tensor]:
        if self.views == 1:
            index = item
            images = eval_crop(open_rgb(self.split.items[index]), self.image_size)
        else:
            index, seed = item
            generator = torch.Generator().manual_seed(seed)
            if self.decode == DEVICE:
                item = encoded_item(self.split.items[index], self.image_size, self.views, self.crop_scale_min, generator)
                return {**item, "label_ids": self.split.labels.ids(index)}
            image = open_rgb(self.split.items[index])
            images = torch.stack([train_crop(image, self.image_size, self.crop_scale_min, generator) for _ in range(self.views)])
        return {"images": images, "label_ids": self.split.labels.ids(index)}


class TextDataset(Dataset):
    """Raw texts; tokenisation happens once per batch in the training step."""

    def __init__(self, split: Split):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"text": self.split.items[index], "label_ids": self.split.labels.ids(index)}


class TabularDataset(Dataset):
    """Standardised feature vectors; with views=2, two copies each with a fresh random mask that
    zeroes every feature with probability `mask_rate` (drawn from torch's global RNG, which the
    run seeds); views=1 gives the features unmasked (evaluation)."""

    def __init__(self, split: Split, views: int, mask_rate: float = 0.0):
        self.split = split
        self.views = views
        self.mask_rate = mask_rate

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[dict[str, Tensor]]:
        """A whole batch, which the DataLoader asks for when this exists: one mask draw instead
        of one per sample. torch.rand fills a tensor serially from the generator, so the draw
        for [B, views, F] holds exactly the values of B successive [views, F] draws, and the
        batches (and the generator's state after them) are those of fetching sample by sample;
        the per-sample calls cost 5-9% of a claim run's epoch (docs/records/tabular_getitems_ab.txt)."""
        features = self.split.items[indices]
        if self.views > 1:
            keep = torch.rand(len(indices), self.views, features.shape[1]) >= self.mask_rate
            features = features.unsqueeze(1) * keep
        labels = self.split.labels
        return [{"features": row, "label_ids": labels.ids(index)} for row, index in zip(features, indices)]


def pretrain_dataset(
    split: Split, modality: str, image_size: int, crop_scale_min: float, feature_mask_rate: float, decode: str = WORKERS
) -> Dataset:
    """The two-view training dataset of a modality; `decode` (`mscl.train.decode.resolve_decode`)
    says where images are decoded."""
    if modality == "text":
        return TextDataset(split)
    if modality == "tabular":
        return TabularDataset(split, views=2, mask_rate=feature_mask_rate)
    return ImageDataset(split, image_size, views=2, crop_scale_min=crop_scale_min, decode=decode)


def eval_dataset(split: Split, modality: str, image_size: int) -> Dataset:
    if modality == "text":
        return TextDataset(split)
    if modality == "tabular":
        return TabularDataset(split, views=1)
    return ImageDataset(split, image_size, views=1)


def collate(samples: list[dict[str, Any]], num_labels: int) -> dict[str, Any]:
    """One batch: images or features stacked (or texts listed; or encoded images with their
    crop boxes, `mscl.train.decode.collate_encoded`) and the labels as a sparse CSR [B, L]."""
    from mscl.losses import csr_labels

    batch: dict[str, Any] = {"labels": csr_labels([sample["label_ids"] for sample in samples], num_labels)}
    if "encoded" in samples[0]:
        batch.update(collate_encoded(samples))
    for key in ("images", "features"):
        if key in samples[0]:
            batch[key] = torch.stack([sample[key] for sample in samples])
    if "text" in samples[0]:
        batch["text"] = [sample["text"] for sample in samples]
    return batch


class SeededViews(Sampler):
    """Another sampler's indices, each paired with a seed drawn from `generator` in the training
    process, after the sampler's own draws: the seed of a sample's random views. Views then
    depend on the run's generator only, not on how many workers make them or whether they
    persist between epochs, and the generator's checkpointed state resumes them."""

    def __init__(self, sampler: Sampler, generator: torch.Generator):
        self.sampler, self.generator = sampler, generator

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        indices = list(self.sampler)
        seeds = torch.randint(0, 2**62, (len(indices),), generator=self.generator).tolist()
        return iter(zip(indices, seeds))


# Below this output size (px) "auto" loads images in the training process: the demo's and
# CIFAR's small images cost a fraction of a millisecond a sample, less than starting worker
# processes for each loader and handing batches between them (the image demo test took 53 s
# with workers, 39 s without); a photo cropped to 224 costs about 6 ms (docs/scale.md).
WORKER_MIN_IMAGE_SIZE = 128


def worker_count(setting: int | str, modality: str, image_size: int) -> int:
    """DataLoader workers of a `pretrain.num_workers` setting: "auto" gives images of at least
    WORKER_MIN_IMAGE_SIZE px one per torch thread (the job's `threads`: decoding and cropping
    JPEGs is the per-sample work that starves a GPU on one core, docs/scale.md) and smaller
    images, text and tabular data none (their samples are a list lookup; tabular views draw one
    mask per batch in the training process)."""
    if setting != "auto":
        return int(setting)
    return torch.get_num_threads() if modality == "image" and image_size >= WORKER_MIN_IMAGE_SIZE else 0


def _start_worker(worker_id: int, rank: int = 0) -> None:
    """A worker's set-up: a temporary folder short enough for the socket that hands its batches
    over (`mscl.sockets.shorten_multiprocessing_tempdir`), then python/numpy seeded from its
    torch seed (torch derives that from the generator).
    Every rank of a distributed run draws the same base seed from its (shared) generator, so a
    worker of rank r > 0 first moves its torch seed to one derived from (seed, r): otherwise
    worker k of every rank would crop and mask its samples exactly as worker k of rank 0."""
    shorten_multiprocessing_tempdir()
    seed = torch.initial_seed() % 2**32
    if rank:
        seed = int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])
        torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


class RankSlices(Sampler[list[int]]):
    """Rank `rank`'s share of every batch of `batches`: the contiguous slice rank*b..(rank+1)*b-1
    with b = batch size / world_size. Every rank draws the same global batches (the same
    sampler and generator state), so the ranks' slices, concatenated in rank order, are the
    single-process batch. (torch's DistributedSampler would instead deal one permutation,
    seeded by seed + epoch, round-robin over the ranks: other global batches than one process
    draws, and other ones again for every number of processes.)"""

    def __init__(self, batches: BatchSampler, rank: int, world_size: int):
        self.batches, self.rank, self.world_size = batches, rank, world_size
        self.size = batches.batch_size // world_size

    def __iter__(self):
        for batch in self.batches:
            yield batch[self.rank * self.size : (self.rank + 1) * self.size]

    def __len__(self) -> int:
        return len(self.batches)


def make_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    shuffle: bool,
    drop_last: bool,
    generator: torch.Generator | None,
    num_workers: int,
    device: torch.device,
    collate_fn: Callable[..., dict[str, Any]] = collate,
    rank: int = 0,
    world_size: int = 1,
) -> DataLoader:
    """A DataLoader whose order, view seeds (`SeededViews`, for datasets that draw random views)
    and worker seeds come from `generator` (reproducible); batches from `collate_fn(samples,
    num_labels)` (`collate`, or `mscl.train.prefix.collate_prefix` for cached prefix states).
    Workers persist across epochs, and batches are pinned for the copy to a GPU. With
    world_size > 1, `batch_size` is the global batch and this rank loads its slice of each
    (`RankSlices`): every rank draws the same order and view seeds, so a sample's views are
    those of one process."""
    order = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    seeds = generator
    if getattr(dataset, "seeded_views", False) and getattr(dataset, "views", 1) > 1:
        order = SeededViews(order, generator)
        # The DataLoader draws its workers' base seed from its generator at each new iterator,
        # which persistent workers skip after the first epoch: a generator of its own keeps
        # those draws off the run's, whose stream then does not depend on the workers.
        seeds = torch.Generator().manual_seed(generator.initial_seed())
    if world_size > 1:
        batching: dict[str, Any] = {"batch_sampler": RankSlices(BatchSampler(order, batch_size, drop_last), rank, world_size)}
    else:
        batching = {"sampler": order, "batch_size": batch_size, "drop_last": drop_last}
    return DataLoader(
        dataset,
        **batching,
        collate_fn=functools.partial(collate_fn, num_labels=dataset.split.num_labels),
        generator=seeds,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        pin_memory=device.type == "cuda",
        worker_init_fn=functools.partial(_start_worker, rank=rank) if num_workers else None,
    )


def drop_tokens(tokens: dict[str, Tensor], rate: float) -> dict[str, Tensor]:
    """A copy of a tokenised batch with `rate` of its attended tokens masked out of attention.

    The first position of every row (BOS/CLS, or the first token of a chunk) is always kept
    so that no row is left without a token; padding stays padding.
    """
    mask = tokens.get("attention_mask")
    if mask is None:
        raise ValueError("token_dropout needs an attention_mask in the tokenised batch; use text_views 'dropout'")
    keep = torch.rand(mask.shape, device=mask.device) >= rate
    keep[..., 0] = True
    return {**tokens, "attention_mask": mask * keep.to(mask.dtype)}
