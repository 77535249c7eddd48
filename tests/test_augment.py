"""mscl.train.augment against torchvision's functional reference and the augmentation's contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from mscl.train import augment

tvf = pytest.importorskip("torchvision.transforms.v2.functional")  # the reference (in the lock)


@pytest.fixture
def images() -> torch.Tensor:
    """Random float images in [0, 1] with saturated, grey and dark pixels mixed in."""
    generator = torch.Generator().manual_seed(0)
    batch = torch.rand(6, 3, 9, 11, generator=generator)
    batch[0, :, :2] = 0.5  # grey: zero chroma
    batch[1, :, :, :3] = 0.0  # black
    batch[2, 0] = 1.0  # a saturated red channel
    return batch


def factors(count: int, low: float, high: float) -> torch.Tensor:
    return torch.linspace(low, high, count)


@pytest.mark.parametrize(
    ("ours", "reference", "low", "high"),
    [
        (augment.adjust_brightness, tvf.adjust_brightness, 0.6, 1.4),
        (augment.adjust_contrast, tvf.adjust_contrast, 0.6, 1.4),
        (augment.adjust_saturation, tvf.adjust_saturation, 0.6, 1.4),
        (augment.adjust_hue, tvf.adjust_hue, -0.1, 0.1),
    ],
)
def test_colour_operations_match_torchvision(images, ours, reference, low, high) -> None:
    amounts = factors(len(images), low, high)
    expected = torch.stack([reference(image, float(amount)) for image, amount in zip(images, amounts)])
    assert torch.allclose(ours(images.clone(), amounts), expected, atol=2e-5)


def test_large_hue_shifts_match_torchvision(images) -> None:
    amounts = torch.tensor([-0.5, -0.3, 0.0, 0.25, 0.45, 0.5])
    expected = torch.stack([tvf.adjust_hue(image, float(amount)) for image, amount in zip(images, amounts)])
    assert torch.allclose(augment.adjust_hue(images.clone(), amounts), expected, atol=2e-5)


def test_grayscale_and_normalize_match_torchvision(images) -> None:
    assert torch.allclose(augment.grayscale(images), tvf.rgb_to_grayscale(images), atol=1e-6)
    expected = tvf.normalize(images, list(augment.IMAGENET_MEAN), list(augment.IMAGENET_STD))
    assert torch.allclose(augment.normalize(images), expected, atol=1e-6)


def test_crop_boxes_keep_the_area_and_ratio_bounds() -> None:
    torch.manual_seed(0)
    for width, height in ((32, 32), (640, 480), (50, 200)):
        for _ in range(300):
            left, top, right, bottom = augment.random_crop_box(width, height, 0.3)
            assert 0 <= left < right <= width and 0 <= top < bottom <= height
            area = (right - left) * (bottom - top) / (width * height)
            ratio = (right - left) / (bottom - top)
            # Rounding to whole pixels may move a sampled crop slightly outside the bounds.
            assert area >= 0.3 - 0.05 and area <= 1.0
            assert 3 / 4 - 0.15 <= ratio <= 4 / 3 + 0.15 or (left, top) == ((width - (right - left)) // 2, (height - (bottom - top)) // 2)


def test_crop_boxes_fall_back_to_a_centre_crop_with_a_bounded_ratio() -> None:
    """A 1 x 40 strip admits no crop with ratio in [3/4, 4/3] of >= 90% of its area."""
    torch.manual_seed(0)
    left, top, right, bottom = augment.random_crop_box(40, 2, 0.9)
    assert (right - left, bottom - top) == (round(2 * 4 / 3), 2)
    assert left == (40 - 3) // 2 and top == 0


def test_crop_boxes_follow_the_global_seed() -> None:
    torch.manual_seed(5)
    first = [augment.random_crop_box(64, 48, 0.2) for _ in range(20)]
    torch.manual_seed(5)
    assert [augment.random_crop_box(64, 48, 0.2) for _ in range(20)] == first
    assert len(set(first)) > 10


def test_eval_crop_matches_torchvision_resize_and_centre_crop() -> None:
    rng = np.random.default_rng(0)
    # A smooth image, so that both bilinear resamplers agree up to rounding.
    rows, cols = np.meshgrid(np.linspace(0, 1, 48), np.linspace(0, 1, 64), indexing="ij")
    pixels = np.stack([rows, cols, (rows + cols) / 2], axis=-1) * 255 + rng.uniform(0, 1, (48, 64, 3))
    image = Image.fromarray(pixels.astype(np.uint8))
    ours = augment.eval_crop(image, 16)
    expected = tvf.center_crop(tvf.resize(tvf.pil_to_tensor(image), [round(16 / augment.EVAL_CROP_FRACTION)], antialias=True), [16, 16])
    assert ours.shape == (3, 16, 16) and ours.dtype == torch.uint8
    assert (ours.float() - expected.float()).abs().mean() < 3.0  # uint8 levels


def test_train_crop_of_the_whole_image_is_a_plain_resize() -> None:
    image = Image.fromarray(np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3))
    whole = augment.crop_resize(image, (0, 0, 32, 32), 32)
    assert torch.equal(whole, torch.from_numpy(np.array(image)).permute(2, 0, 1))


def test_color_views_shapes_probabilities_and_seed() -> None:
    crops = torch.randint(0, 256, (4000, 3, 4, 4), dtype=torch.uint8)
    torch.manual_seed(1)
    views = augment.color_views(crops)
    assert views.shape == crops.shape and views.dtype == torch.float32
    pixels = views * torch.tensor(augment.IMAGENET_STD).view(1, 3, 1, 1) + torch.tensor(augment.IMAGENET_MEAN).view(1, 3, 1, 1)
    assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5
    gray = (pixels[:, 0] - pixels[:, 1]).abs().amax(dim=(1, 2)) < 1e-5
    gray &= (pixels[:, 1] - pixels[:, 2]).abs().amax(dim=(1, 2)) < 1e-5
    # p = 0.2 of grayscale; 4,000 draws put the share within +-0.03 with overwhelming probability.
    assert abs(gray.float().mean().item() - augment.GRAYSCALE_PROB) < 0.03
    unchanged = (pixels - crops.float() / 255).abs().amax(dim=(1, 2, 3)) < 1e-5
    # Untouched: not flipped (or flip-symmetric, rare), not jittered, not gray: about 0.5*0.2*0.8.
    expected = (1 - augment.FLIP_PROB) * (1 - augment.JITTER_PROB) * (1 - augment.GRAYSCALE_PROB)
    assert abs(unchanged.float().mean().item() - expected) < 0.03
    torch.manual_seed(1)
    assert torch.equal(augment.color_views(crops), views)


def test_color_jitter_applies_each_operation_once_in_a_random_order(monkeypatch) -> None:
    calls: list[str] = []
    for name in ("adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"):
        original = getattr(augment, name)

        def record(images, amount, _name=name, _original=original):
            calls.append(f"{_name}:{len(images)}")
            return _original(images, amount)

        monkeypatch.setattr(augment, name, record)
    torch.manual_seed(0)
    augment.color_jitter(torch.rand(64, 3, 2, 2))
    per_operation = {}
    for call in calls:
        name, count = call.split(":")
        per_operation[name] = per_operation.get(name, 0) + int(count)
    assert per_operation == {name: 64 for name in per_operation} and len(per_operation) == 4
    # 64 images spread over 4 positions: each operation appears at several positions.
    assert len(calls) > 4


def test_eval_views_only_normalise() -> None:
    crops = torch.randint(0, 256, (3, 3, 5, 5), dtype=torch.uint8)
    expected = tvf.normalize(crops.float() / 255, list(augment.IMAGENET_MEAN), list(augment.IMAGENET_STD))
    assert torch.allclose(augment.eval_views(crops), expected, atol=1e-6)
    assert math.isclose(float(augment.EVAL_CROP_FRACTION), 0.875)
