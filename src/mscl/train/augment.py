"""SimCLR/SupCon image views: geometry per image with Pillow, colour per batch with torch.

A training view is RandomResizedCrop(image_size, scale=(crop_scale_min, 1), ratio=(3/4, 4/3)),
a horizontal flip with p = 0.5, ColorJitter(brightness 0.4, contrast 0.4, saturation 0.4,
hue 0.1) with p = 0.8 (the four in a random order per image), grayscale with p = 0.2 and
ImageNet normalisation: SupCon's augmentation list (GUIDE section 3). It is split in two:

- `random_crop_box` + `crop_resize` (per image, in the Dataset): the crop is sampled as
  torchvision's RandomResizedCrop samples it and cut and resized by Pillow in one call
  (bilinear with antialiasing), giving a uint8 tensor [3, S, S]: images of any size become
  one fixed size, so a batch can be stacked.
- `color_views` (per batch, in the training step, on the training device): flip, jitter,
  grayscale and normalisation on the whole [N, 3, S, S] uint8 batch at once.

Why not torchvision.transforms.v2: its per-image pipeline costs about 0.9 ms per 32-px view on
one core, more than the demo's encoder step, and importing torchvision costs about 2.5 s per
job. Here the per-image work is one Pillow call and the rest is a handful of batched tensor
operations (on the GPU on a cluster). `tests/test_augment.py` checks every colour operation
against torchvision's functional reference.

Randomness: a crop draws from the generator it is given, which the Dataset seeds per sample
and epoch from a seed the training loop's sampler draws (`mscl.train.data.SeededViews`), so
crops do not depend on how many DataLoader workers make them; colour draws come from torch's
global generator in the training step. Both streams are seeded by the run and saved in its
checkpoints, so views are reproducible and a resumed run draws what an uninterrupted one would.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from PIL import Image
from torch import Tensor

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Evaluation resizes the shorter side to image_size / 0.875 and centre-crops image_size: the
# ImageNet convention (256 -> 224).
EVAL_CROP_FRACTION = 0.875
CROP_RATIO = (3 / 4, 4 / 3)  # aspect ratios (width / height) a random crop may have
CROP_ATTEMPTS = 10  # samples before falling back to a centre crop (torchvision's count)
JITTER = {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1}
JITTER_PROB = 0.8
GRAYSCALE_PROB = 0.2
FLIP_PROB = 0.5
GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # ITU-R 601-2 luma, as torchvision computes it


# ------------------------------------------------------------------ geometry (per image)


def uniform(low: float, high: float, generator: torch.Generator | None) -> float:
    return low + (high - low) * float(torch.rand((), generator=generator))


def random_crop_box(width: int, height: int, scale_min: float, generator: torch.Generator | None = None) -> tuple[int, int, int, int]:
    """A crop (left, top, right, bottom) covering a uniform fraction in [scale_min, 1] of the
    area, with a log-uniform aspect ratio in CROP_RATIO, at a uniform position; after
    CROP_ATTEMPTS misses, the largest centre crop whose ratio lies in CROP_RATIO."""
    area = width * height
    log_low, log_high = math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])
    for _ in range(CROP_ATTEMPTS):
        target = area * uniform(scale_min, 1.0, generator)
        ratio = math.exp(uniform(log_low, log_high, generator))
        crop_w = round(math.sqrt(target * ratio))
        crop_h = round(math.sqrt(target / ratio))
        if 0 < crop_w <= width and 0 < crop_h <= height:
            top = int(torch.randint(0, height - crop_h + 1, (), generator=generator))
            left = int(torch.randint(0, width - crop_w + 1, (), generator=generator))
            return left, top, left + crop_w, top + crop_h
    ratio = width / height
    if ratio < CROP_RATIO[0]:
        crop_w, crop_h = width, round(width / CROP_RATIO[0])
    elif ratio > CROP_RATIO[1]:
        crop_w, crop_h = round(height * CROP_RATIO[1]), height
    else:
        crop_w, crop_h = width, height
    left, top = (width - crop_w) // 2, (height - crop_h) // 2
    return left, top, left + crop_w, top + crop_h


def centre_crop_box(width: int, height: int, image_size: int) -> tuple[float, float, float, float]:
    """The evaluation crop in source pixels: resizing the shorter side to image_size / 0.875
    and cutting the central image_size square is cutting this box and resizing it."""
    scale = min(width, height) / (image_size / EVAL_CROP_FRACTION)  # source pixels per output pixel
    side = image_size * scale
    left, top = (width - side) / 2, (height - side) / 2
    return left, top, left + side, top + side


def crop_resize(image: Image.Image, box: tuple[float, float, float, float], image_size: int) -> Tensor:
    """uint8 [3, S, S]: `box` of an RGB image resized to S x S (bilinear, antialiased)."""
    resized = image.resize((image_size, image_size), Image.Resampling.BILINEAR, box=box)
    return torch.from_numpy(np.asarray(resized, dtype=np.uint8).copy()).permute(2, 0, 1)


def train_crop(image: Image.Image, image_size: int, scale_min: float, generator: torch.Generator | None = None) -> Tensor:
    return crop_resize(image, random_crop_box(*image.size, scale_min, generator), image_size)


def eval_crop(image: Image.Image, image_size: int) -> Tensor:
    return crop_resize(image, centre_crop_box(*image.size, image_size), image_size)


# ------------------------------------------------------------------- colour (per batch)


def grayscale(images: Tensor) -> Tensor:
    """[N, 3, H, W] float in [0, 1] -> [N, 1, H, W] luma."""
    r, g, b = images.unbind(1)
    return (GRAY_WEIGHTS[0] * r + GRAY_WEIGHTS[1] * g + GRAY_WEIGHTS[2] * b).unsqueeze(1)


def blend(images: Tensor, other: Tensor, factor: Tensor) -> Tensor:
    """factor * images + (1 - factor) * other, clamped to [0, 1]; factor is [N]."""
    factor = factor.view(-1, 1, 1, 1)
    return (factor * images + (1 - factor) * other).clamp(0, 1)


def adjust_brightness(images: Tensor, factor: Tensor) -> Tensor:
    return blend(images, torch.zeros_like(images), factor)


def adjust_contrast(images: Tensor, factor: Tensor) -> Tensor:
    """Blend with the image's mean luma (a flat grey image)."""
    return blend(images, grayscale(images).mean(dim=(1, 2, 3), keepdim=True), factor)


def adjust_saturation(images: Tensor, factor: Tensor) -> Tensor:
    """Blend with the image's own luma."""
    return blend(images, grayscale(images), factor)


def adjust_hue(images: Tensor, shift: Tensor) -> Tensor:
    """Rotate the hue by `shift` turns ([N], in [-0.5, 0.5]) in HSV space; S and V unchanged."""
    maximum, argmax = images.max(dim=1)
    minimum = images.min(dim=1).values
    chroma = maximum - minimum
    safe_chroma = torch.where(chroma > 0, chroma, torch.ones_like(chroma))
    r, g, b = images.unbind(1)
    # Hue in sixths of a turn, by which channel is largest (HSV's piecewise definition).
    hue = torch.where(argmax == 0, ((g - b) / safe_chroma) % 6, torch.where(argmax == 1, (b - r) / safe_chroma + 2, (r - g) / safe_chroma + 4))
    hue = torch.where(chroma > 0, hue / 6, torch.zeros_like(hue))
    hue = (hue + shift.view(-1, 1, 1)) % 1.0
    # HSV -> RGB: channel k is V - C * clamp(min(t, 4 - t), 0, 1) with t = (k' + 6 H) mod 6.
    channels = []
    for offset in (5.0, 3.0, 1.0):
        t = (offset + hue * 6) % 6
        channels.append(maximum - chroma * torch.minimum(t, 4 - t).clamp(0, 1))
    return torch.stack(channels, dim=1)


def color_jitter(images: Tensor) -> Tensor:
    """ColorJitter with JITTER strengths, the four operations in a random order per image."""
    count = len(images)
    factors = {
        name: 1 + (2 * torch.rand(count) - 1) * strength for name, strength in JITTER.items() if name != "hue"
    }
    factors["hue"] = (2 * torch.rand(count) - 1) * JITTER["hue"]
    operations = {"brightness": adjust_brightness, "contrast": adjust_contrast, "saturation": adjust_saturation, "hue": adjust_hue}
    names = list(operations)
    order = torch.rand(count, len(names)).argsort(dim=1)  # order[i, k]: operation applied k-th to image i
    device = images.device
    for position in range(len(names)):
        for index, name in enumerate(names):
            chosen = (order[:, position] == index).to(device)
            if chosen.any():
                images[chosen] = operations[name](images[chosen], factors[name].to(device)[chosen])
    return images


def normalize(images: Tensor) -> Tensor:
    """float [N, 3, H, W] in [0, 1] -> ImageNet-normalised."""
    mean = torch.tensor(IMAGENET_MEAN, device=images.device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=images.device).view(1, 3, 1, 1)
    return (images - mean) / std


def to_float(images: Tensor) -> Tensor:
    """uint8 [N, 3, H, W] -> float32 in [0, 1]."""
    return images.float().div_(255)


def color_views(images: Tensor) -> Tensor:
    """The per-batch half of a training view: uint8 [N, 3, S, S] crops (on any device) ->
    flipped with p = 0.5, jittered with p = 0.8, grayscale with p = 0.2, normalised."""
    images = to_float(images)
    count, device = len(images), images.device
    flip = (torch.rand(count) < FLIP_PROB).to(device)
    images = torch.where(flip.view(-1, 1, 1, 1), images.flip(-1), images)
    jitter = (torch.rand(count) < JITTER_PROB).to(device)
    if jitter.any():
        images[jitter] = color_jitter(images[jitter])
    gray = (torch.rand(count) < GRAYSCALE_PROB).to(device)
    images = torch.where(gray.view(-1, 1, 1, 1), grayscale(images).expand_as(images), images)
    return normalize(images)


def eval_views(images: Tensor) -> Tensor:
    """The evaluation view of uint8 [N, 3, S, S] centre crops: normalised, nothing random."""
    return normalize(to_float(images))
