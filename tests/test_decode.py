"""Training views decoded and cut on the training device (`mscl.train.decode`), checked on the
CPU against the CPU path (Pillow in the DataLoader workers). tests/test_gpu.py runs the same
comparison on a GPU, where nvJPEG decodes."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from mscl.errors import InputError
from mscl.train.augment import crop_resize, random_crop_box
from mscl.train.data import ImageDataset, Split, collate
from mscl.train.decode import DEVICE, WORKERS, device_views, horizontal_first, resized_crops, resolve_decode
from mscl.train.labels import LabelMatrix

SIZE = 16


def photo(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """uint8 [height, width, 3]: a colour ramp with noise, so every filter weight matters."""
    ramp = np.linspace(0, 1, width)[None, :, None] * rng.integers(0, 256, 3)
    return np.clip(ramp + rng.normal(0, 40, (height, width, 3)), 0, 255).astype(np.uint8)


def test_resized_crops_are_pillows_resize_bit_for_bit() -> None:
    """One batch of images of different sizes (padded together), each with two boxes that
    shrink or enlarge them, against `crop_resize` box by box."""
    rng, generator = np.random.default_rng(0), torch.Generator().manual_seed(0)
    shapes = [(60, 40), (41, 41), (10, 12), (30, 90)]  # (width, height); the last is cut vertical pass first
    arrays = [photo(rng, width, height) for width, height in shapes]
    boxes = torch.tensor([[random_crop_box(width, height, 0.05, generator) for _ in range(2)] for width, height in shapes])
    ours = resized_crops([torch.from_numpy(a).permute(2, 0, 1) for a in arrays], boxes, SIZE)
    for image, array, image_boxes, (width, height) in zip(ours, arrays, boxes, shapes):
        pillow = torch.stack([crop_resize(Image.fromarray(array), tuple(box.tolist()), SIZE) for box in image_boxes])
        if horizontal_first(height, width, SIZE):
            assert torch.equal(image, pillow)
        else:  # Pillow chose this order from 12 on (Resample.c); earlier ones round the other way by <= 1
            assert (image.int() - pillow.int()).abs().max() <= 1
    assert not horizontal_first(90, 30, SIZE) and horizontal_first(40, 60, SIZE)


@pytest.fixture(scope="module")
def mixed_images(tmp_path_factory: pytest.TempPathFactory) -> Split:
    """Baseline colour JPEGs (landscape, portrait) and what the worker decodes with Pillow on
    the device path too: a grayscale, a CMYK and a progressive JPEG and a PNG."""
    root, rng = tmp_path_factory.mktemp("decode"), np.random.default_rng(1)
    paths = []
    files = [("a.jpg", "RGB", {}), ("b.jpg", "RGB", {}), ("gray.jpg", "L", {}), ("cmyk.jpg", "CMYK", {}), ("p.jpg", "RGB", {"progressive": True}), ("c.png", "RGB", None)]
    for name, mode, jpeg_options in files:
        image = Image.fromarray(photo(rng, 50, 38) if name != "b.jpg" else photo(rng, 38, 50)).convert(mode)
        image.save(root / name, "PNG" if jpeg_options is None else "JPEG", **({} if jpeg_options is None else {"quality": 90, **jpeg_options}))
        paths.append(str(root / name))
    labels = LabelMatrix.from_dense(torch.eye(len(paths), 3))
    return Split([Path(p).stem for p in paths], paths, labels, 0)


def test_device_views_equal_the_worker_views_on_the_cpu(mixed_images: Split) -> None:
    """Same split, same (index, seed) items: the device path's batch, decoded by torchvision's
    CPU decoder and cut by `resized_crops`, holds exactly the CPU path's views (both decoders are
    libjpeg-turbo; measured equal on torch 2.11/torchvision 0.26 and 2.15/0.29, Pillow 13)."""
    items = [(index, 1000 + index) for index in range(len(mixed_images))]
    workers = ImageDataset(mixed_images, SIZE, views=2, crop_scale_min=0.2, decode=WORKERS)
    device = ImageDataset(mixed_images, SIZE, views=2, crop_scale_min=0.2, decode=DEVICE)
    expected = collate([workers[item] for item in items], num_labels=3)
    batch = collate([device[item] for item in items], num_labels=3)
    assert [tuple(e.shape) for e in batch["encoded"]] == [(len(Path(p).read_bytes()),) for p in mixed_images.items[:2]] + [(3, 38, 50)] * 4
    views = device_views(batch, torch.device("cpu"))
    assert views.dtype == torch.uint8 and views.shape == expected["images"].shape == (6, 2, 3, SIZE, SIZE)
    assert torch.equal(views, expected["images"])
    assert torch.equal(batch["labels"].to_dense(), expected["labels"].to_dense())


def test_decode_setting_resolves_by_device() -> None:
    cpu = torch.device("cpu")
    assert resolve_decode("cpu", cpu) == WORKERS and resolve_decode("auto", cpu) == WORKERS
    with pytest.raises(InputError, match="pretrain.decode is 'gpu' but no CUDA device") as error:
        resolve_decode("gpu", cpu)
    assert "set pretrain.decode to auto or cpu" in str(error.value)


def test_a_file_that_is_no_image_is_an_input_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.jpg"
    path.write_bytes(b"not a jpeg")
    split = Split(["x"], [str(path)], LabelMatrix.from_dense(torch.ones(1, 1)), 0)
    with pytest.raises(InputError, match="broken.jpg.*cannot read the image"):
        ImageDataset(split, SIZE, views=2, decode=DEVICE)[(0, 1)]


def test_encoded_jpeg_bytes_decode_to_what_pillow_reads() -> None:
    """The header and the bytes the worker ships are the file's: torchvision decodes them to
    Pillow's pixels on the CPU."""
    from torchvision.io import ImageReadMode, decode_jpeg

    buffer = io.BytesIO()
    Image.fromarray(photo(np.random.default_rng(2), 33, 21)).save(buffer, "JPEG", quality=85)
    data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
    pillow = torch.from_numpy(np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")).copy()).permute(2, 0, 1)
    assert torch.equal(decode_jpeg(data, mode=ImageReadMode.RGB), pillow)


def test_a_training_epoch_reads_device_decoded_batches(mixed_images: Split) -> None:
    """`train_epoch` over a loader whose images stay encoded: `contrastive_features` decodes and
    cuts them (here with torchvision's CPU decoder) and the step trains."""
    from mscl.train.data import make_loader, pretrain_dataset
    from mscl.train.pretrain import start_training, train_epoch
    from mscl.train.runtime import seed_everything
    from mscl.train.spec import RunSpec

    spec = RunSpec.from_mapping(
        {"dataset": "coco", "encoder_name": "c", "encoder": {"kind": "cifar_resnet", "widths": [4], "blocks": 1}, "loss": "simdissim",
         "batch_size": 4, "pretrain": {"image_size": SIZE, "projection_dim": 8, "epochs": 1}}
    )  # fmt: skip
    generator, cpu = seed_everything(0), torch.device("cpu")
    dataset = pretrain_dataset(mixed_images, "image", SIZE, 0.2, 0.5, DEVICE)
    loader = make_loader(dataset, 4, shuffle=True, drop_last=True, generator=generator, num_workers=0, device=cpu)
    assert "encoded" in next(iter(loader))
    state = start_training(spec, 3, 1, generator, cpu, "fp32")
    before = [p.detach().clone() for p in state.encoder.parameters()]
    row = train_epoch(state, loader)
    assert row["steps"] == 1 and np.isfinite(float(row["loss"]))
    assert any(not torch.equal(b, p) for b, p in zip(before, state.encoder.parameters()))
