"""Training views decoded and cropped on the training device (`pretrain.decode`).

The CPU path (`mscl.train.augment`) decodes every JPEG with Pillow and cuts its two random
resized crops in a DataLoader worker: about 3.5 ms + 2 x 1.2 ms of one core per sample at
224 px (`python -m mscl bench loader`), so a GPU that trains ResNet-50 on thousands of views a
second needs a dozen busy cores to keep it fed. On the device path the workers only read:

- `encoded_item` (in the Dataset): the file's bytes, the image size from its header (Pillow reads
  no pixels for that) and the views' crop boxes, drawn from the sample's seed by the same
  `random_crop_box` calls as the CPU path, so both paths cut the same boxes. A file the device
  does not decode (anything but a baseline colour JPEG: `DEVICE_MODES`) is decoded by Pillow
  there and travels as pixels; the rest of its way is the same.
- `device_views` (in the training step): the batch's JPEGs decoded at once by
  `torchvision.io.decode_jpeg` on the device (nvJPEG on a GPU), then every box resized to
  S x S by `resized_crops`.

`resized_crops` is Pillow's bilinear resize with antialiasing (what `crop_resize` calls) written
as two matrix products per chunk of images: Pillow's filter weights for the box (a triangle
widened by the shrink factor, cut at the image's edges, normalised), a horizontal pass rounded
to whole levels as Pillow rounds it, then a vertical pass. It agrees with Pillow to within one
level per pixel (Pillow rounds its fixed-point weights; a value within about 1e-5 of a rounding
boundary may round the other way); the views of the two paths differ beyond that only where the
decoders do. Measured: docs/gpu.md and tests/test_decode.py.

`resolve_decode` picks the path: "auto" decodes on the device when it is a GPU that torchvision
decodes JPEGs on, else in the workers. Evaluation crops (probe, convergence monitor) stay on the
CPU path: they are one view per sample, read once per run.
"""

from __future__ import annotations

import functools
import io
from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from mscl.errors import InputError
from mscl.train.augment import random_crop_box

# Where a run decodes its training images: "workers" (Pillow, the CPU path) or "device".
WORKERS, DEVICE = "workers", "device"
# What the device decodes: baseline JPEGs in colour (Pillow's mode from the header). The rest,
# grayscale, CMYK or progressive JPEGs and other formats, Pillow decodes in the worker: nvJPEG's
# hardware path takes baseline colour JPEGs, and those others are few in photo collections.
DEVICE_MODES = ("RGB",)
# Source pixels resized at once by `resized_crops` (float64: 24 bytes each for 3 channels, twice
# that with the first pass and the weights): a batch of 256 COCO-sized images (<= 640 x 640)
# takes two to four chunks of at most about 2.5 GB.
PIXELS_PER_CHUNK = 1 << 25
# Pillow's fixed point: filter weights are integers in units of 2**-22 (Resample.c).
PRECISION_BITS = 22


# ------------------------------------------------------------------------------- choice


@functools.cache
def decodes_jpeg_on(device: torch.device) -> bool:
    """Whether torchvision decodes a JPEG on `device` (a CUDA build of torchvision with nvJPEG):
    tried once on a tiny image rather than guessed from version numbers."""
    try:
        from torchvision.io import ImageReadMode, decode_jpeg

        buffer = io.BytesIO()
        Image.new("RGB", (16, 16), (200, 100, 50)).save(buffer, format="JPEG")
        data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        decoded = decode_jpeg([data], mode=ImageReadMode.RGB, device=device)[0]
        return tuple(decoded.shape) == (3, 16, 16) and decoded.device.type == device.type
    except (ImportError, RuntimeError, NotImplementedError):  # no torchvision.io, or no nvJPEG in this build
        return False


def resolve_decode(setting: str, device: torch.device) -> str:
    """WORKERS or DEVICE for a `pretrain.decode` setting on `device`.

    auto: DEVICE on a GPU that torchvision decodes JPEGs on (the workers then only read files,
    which one core per GPU sustains), else WORKERS. gpu: DEVICE, an InputError where that
    cannot run. cpu: WORKERS."""
    if setting == "cpu":
        return WORKERS
    available = device.type == "cuda" and decodes_jpeg_on(device)
    if setting == "gpu" and not available:
        reason = "no CUDA device is visible" if device.type != "cuda" else "this torchvision cannot decode JPEGs on it (a CPU-only build?)"
        raise InputError("--spec", f"pretrain.decode is 'gpu' but {reason}", "set pretrain.decode to auto or cpu", field="pretrain.decode")
    return DEVICE if available else WORKERS


# ------------------------------------------------------------------- in the Dataset


def open_rgb(path: str) -> Image.Image:
    """The image at `path` decoded to RGB by Pillow."""
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, ValueError) as error:
        raise InputError(path, f"cannot read the image ({error})", "re-run the dataset's preprocessing rule")


def read_header(path: str) -> tuple[bool, tuple[int, int]]:
    """(whether the device decodes the file, (width, height)) from its header; Pillow decodes
    no pixels for it."""
    try:
        with Image.open(path) as image:
            decodable = image.format == "JPEG" and image.mode in DEVICE_MODES and not image.info.get("progressive")
            return decodable, image.size
    except (OSError, ValueError) as error:
        raise InputError(path, f"cannot read the image ({error})", "re-run the dataset's preprocessing rule")


def encoded_item(path: str, image_size: int, views: int, scale_min: float, generator: torch.Generator) -> dict[str, Any]:
    """One sample for the device path: {"encoded": the JPEG's bytes (uint8 [n]) or Pillow's RGB
    pixels (uint8 [3, H, W]), "boxes": int64 [views, 4] crop boxes (left, top, right, bottom),
    "image_size": S}. The boxes are those `train_crop` cuts from the same generator."""
    decodable, (width, height) = read_header(path)
    boxes = torch.tensor([random_crop_box(width, height, scale_min, generator) for _ in range(views)], dtype=torch.long)
    if decodable:
        encoded = torch.from_numpy(np.fromfile(path, dtype=np.uint8))
    else:
        encoded = torch.from_numpy(np.array(open_rgb(path), dtype=np.uint8)).permute(2, 0, 1).contiguous()
    return {"encoded": encoded, "boxes": boxes, "image_size": image_size}


def collate_encoded(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The device path's part of a batch: the samples' encoded images as a list (their sizes
    differ), their boxes stacked [B, views, 4] and the output size."""
    return {
        "encoded": [sample["encoded"] for sample in samples],
        "boxes": torch.stack([sample["boxes"] for sample in samples]),
        "image_size": samples[0]["image_size"],
    }


# --------------------------------------------------------------- in the training step


def decode_images(encoded: Sequence[Tensor], device: torch.device) -> list[Tensor]:
    """uint8 [3, H, W] images on `device`: the JPEG bytes among `encoded` decoded there in one
    batched call, the pixels among them copied there."""
    from torchvision.io import ImageReadMode, decode_jpeg

    jpegs = [position for position, item in enumerate(encoded) if item.dim() == 1]
    images = [item.to(device, non_blocking=True) if item.dim() == 3 else item for item in encoded]
    if jpegs:
        for position, image in zip(jpegs, decode_jpeg([encoded[p] for p in jpegs], mode=ImageReadMode.RGB, device=device)):
            images[position] = image
    return images


def pillow_bilinear_weights(start: Tensor, stop: Tensor, length: Tensor, out_size: int, width: int) -> Tensor:
    """float64 [..., out_size, width]: the fixed-point weights (integers, in units of
    2**-PRECISION_BITS) that Pillow's antialiased bilinear resize gives source pixels
    0..width-1 for each output pixel of the box [start, stop) on a line of `length` pixels
    (start, stop, length: [...] tensors on one device).

    Pillow's precompute_coeffs and normalize_coeffs_8bpc, element for element: output pixel j
    is centred at start + (j + 0.5) * scale (scale = box / out_size source pixels per output
    pixel); the triangle 1 - |(x - centre + 0.5) / f| with f = max(1, scale) weights the
    pixels x from trunc(centre - f + 0.5) (at least 0) up to trunc(centre + f + 0.5) (at most
    `length`); the weights are normalised to sum 1, then rounded to PRECISION_BITS bits."""
    device = start.device
    start, stop = start.double(), stop.double()
    scale = (stop - start) / out_size
    filterscale = scale.clamp(min=1.0)[..., None]
    centre = start[..., None] + (torch.arange(out_size, dtype=torch.float64, device=device) + 0.5) * scale[..., None]
    low = torch.trunc(centre - filterscale + 0.5).clamp(min=0)[..., None]
    high = torch.minimum(torch.trunc(centre + filterscale + 0.5), length[..., None].double())[..., None]
    x = torch.arange(width, dtype=torch.float64, device=device)
    weights = (1 - (((x - centre[..., None]) + 0.5) * (1.0 / filterscale[..., None])).abs()).clamp(min=0)
    weights = weights * ((x >= low) & (x < high))
    total = weights.sum(-1, keepdim=True)
    weights = weights / torch.where(total > 0, total, torch.ones_like(total))
    return torch.trunc(weights * 2**PRECISION_BITS + 0.5)


def pillow_pass(values: Tensor) -> Tensor:
    """The level a pass of Pillow's resize stores for a fixed-point sum (`values`, in units of
    2**-PRECISION_BITS): rounded half up, clipped to 0..255."""
    return torch.floor((values + 2 ** (PRECISION_BITS - 1)) / 2**PRECISION_BITS).clamp_(0, 255)


def horizontal_first(height: int, width: int, image_size: int) -> bool:
    """Pillow's order of the two passes for an image of this size: vertical first when the
    height shrinks more than twice as much as the width (Resample.c, Pillow 13)."""
    return not (height - image_size > 0 and height - image_size > (width - image_size) * 2)


def resized_crops(images: Sequence[Tensor], boxes: Tensor, image_size: int) -> Tensor:
    """uint8 [B, V, 3, S, S]: box v of image b (boxes: int64 [B, V, 4], left, top, right,
    bottom) resized to S x S as `mscl.train.augment.crop_resize` resizes it with Pillow.

    Pillow's two passes as matrix products in float64, which holds Pillow's integer sums
    (below 2**31) exactly, each pass stored as levels, in Pillow's order for the image's size
    (`horizontal_first`). Images are resized a chunk at a time (`pixel_chunks`), each chunk
    padded to its largest image."""
    device = images[0].device
    out = torch.empty(len(images), boxes.shape[1], 3, image_size, image_size, dtype=torch.uint8, device=device)
    orders: dict[bool, list[int]] = {True: [], False: []}
    for index, image in enumerate(images):
        orders[horizontal_first(image.shape[1], image.shape[2], image_size)].append(index)
    for across_first, members in orders.items():
        for begin, end in pixel_chunks([images[i].shape[1] * images[i].shape[2] for i in members]):
            rows = members[begin:end]
            chunk = [images[i] for i in rows]
            sizes = to_device(torch.tensor([image.shape[1:] for image in chunk]), device)  # [n, 2]: height, width
            box = to_device(boxes[rows], device)
            pixels = padded(chunk).double()  # [n, 3, H, W]
            across = pillow_bilinear_weights(box[..., 0], box[..., 2], sizes[:, 1:], image_size, pixels.shape[-1])  # [n, V, S, W]
            down = pillow_bilinear_weights(box[..., 1], box[..., 3], sizes[:, :1], image_size, pixels.shape[-2])  # [n, V, S, H]
            views = (horizontal_then_vertical if across_first else vertical_then_horizontal)(pixels, across, down)
            out.index_copy_(0, to_device(torch.tensor(rows), device), views.to(torch.uint8))
    return out


def horizontal_then_vertical(pixels: Tensor, across: Tensor, down: Tensor) -> Tensor:
    """Both passes over pixels [n, 3, H, W] with weights [n, V, S, W] and [n, V, S, H] ->
    levels [n, V, 3, S, S], the horizontal pass first. Each pass is one batched product over
    the images (all views at once, no image copied per view)."""
    n, _, height, width = pixels.shape
    views, size = across.shape[1], across.shape[2]
    rows = pillow_pass(pixels.view(n, 3 * height, width) @ across.permute(0, 3, 1, 2).reshape(n, width, views * size))
    rows = rows.view(n, 3, height, views, size).permute(0, 3, 2, 1, 4).reshape(n * views, height, 3 * size)
    out = pillow_pass(down.reshape(n * views, size, height) @ rows)  # [n V, S (rows), 3 S]
    return out.view(n, views, size, 3, size).permute(0, 1, 3, 2, 4)


def vertical_then_horizontal(pixels: Tensor, across: Tensor, down: Tensor) -> Tensor:
    """As `horizontal_then_vertical`, the vertical pass first."""
    n, _, height, width = pixels.shape
    views, size = across.shape[1], across.shape[2]
    columns = pillow_pass(down.reshape(n, views * size, height) @ pixels.permute(0, 2, 1, 3).reshape(n, height, 3 * width))
    out = pillow_pass(columns.view(n * views, size * 3, width) @ across.reshape(n * views, size, width).transpose(1, 2))
    return out.view(n, views, size, 3, size).permute(0, 1, 3, 2, 4)


def pixel_chunks(pixels: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive (begin, end) runs of images whose padded size (count x the largest) stays
    within PIXELS_PER_CHUNK; an image larger than that is a run of its own."""
    if not pixels:
        return []
    chunks, begin, largest = [], 0, 0
    for index, size in enumerate(pixels):
        largest_with = max(largest, size)
        if index > begin and (index - begin + 1) * largest_with > PIXELS_PER_CHUNK:
            chunks.append((begin, index))
            begin, largest_with = index, size
        largest = largest_with
    return chunks + [(begin, len(pixels))]


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """A small CPU tensor on `device`, copied from pinned memory on a GPU so that the copy is
    queued behind the step's work instead of waiting for it (a pageable copy may synchronise)."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def padded(images: Sequence[Tensor]) -> Tensor:
    """[n, 3, H, W] of images of possibly different sizes, zero beyond each one's own size."""
    if all(image.shape == images[0].shape for image in images):
        return torch.stack(list(images))
    height, width = max(image.shape[1] for image in images), max(image.shape[2] for image in images)
    out = torch.zeros(len(images), 3, height, width, dtype=images[0].dtype, device=images[0].device)
    for slot, image in zip(out, images):
        slot[:, : image.shape[1], : image.shape[2]] = image
    return out


def device_views(batch: dict[str, Any], device: torch.device) -> Tensor:
    """uint8 [B, V, 3, S, S] crops of a device-path batch, made on `device`. Autocast is off:
    the resize's products must stay float32 to agree with Pillow."""
    with torch.autocast(device.type, enabled=False):
        return resized_crops(decode_images(batch["encoded"], device), batch["boxes"], batch["image_size"])
