"""The CUDA path (marker `gpu`): always collected, skipped where torch sees no CUDA device.

`pytest -m gpu` on a GPU machine (tools/gpu_check.sh runs it there) checks one pretraining run
per encoder kind end to end on CUDA (pinned, non_blocking batches, CSR labels, bf16 autocast,
JPEGs decoded on the GPU), the labels and losses against the CPU in float64, the dtypes bf16
autocast leaves, the views made on the GPU and checkpoint save and resume. Tests whose body is
cheap on the CPU take the device as a parameter and run there in the normal suite too.

Where CUDA is not deterministic (docs/gpu.md): cuDNN's convolution backward and the float
atomics of index_add_/scatter (the losses' label work, the label-wise attention) sum in a
varying order, so two CUDA runs of one spec, or a resumed and an uninterrupted one, agree only
to rounding; on the CPU they are bit-identical (tests/test_train.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.defaults import EXIT_STOPPED
from mscl.losses import LOSS_NAMES, PROTOTYPE_LOSSES, csr_labels, make_loss
from mscl.train.labels import LabelMatrix
from mscl.train.runtime import autocast

HAS_CUDA = torch.cuda.is_available()
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (tools/gpu_check.sh runs these on a GPU machine)")]
CUDA = pytest.param("cuda", marks=ON_GPU)
LABELS = ["a", "b", "c", "d"]
KINDS = ["resnet", "cifar_resnet", "hf", "llama_lora", "plm_icd"]


def gpu_test(function):
    for mark in reversed(ON_GPU):
        function = mark(function)
    return function


# ------------------------------------------------------------------------- fixtures


def label_lists(rng: np.random.Generator, count: int) -> list[list[str]]:
    return [sorted(rng.choice(LABELS, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(count)]


@pytest.fixture(scope="module")
def jpeg_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image manifest of 64 x 48 JPEGs (24/12/12): baseline colour ones, which the GPU
    decodes, and per split one grayscale one, which Pillow decodes in a worker."""
    root, rng = tmp_path_factory.mktemp("jpeg"), np.random.default_rng(0)
    splits = {}
    for split, count in (("train", 24), ("val", 12), ("test", 12)):
        rows = []
        for index, labels in enumerate(label_lists(rng, count)):
            image = Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
            (image.convert("L") if index == 0 else image).save(root / f"{split}{index}.jpg", quality=90)
            rows.append({"id": f"{split}{index}", "path": f"{split}{index}.jpg", "labels": labels})
        splits[split] = pd.DataFrame(rows)
    write_dataset(root / "data", splits, labels=LABELS, info={"root": str(root)})
    return root / "data"


@pytest.fixture(scope="module")
def text_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(1)
    words = "the of and to in is was for on are with as at fever fracture asthma anemia".split()
    splits = {
        split: pd.DataFrame(
            [{"id": f"{split}{i}", "text": " ".join(rng.choice(words, 40)), "labels": labels} for i, labels in enumerate(label_lists(rng, count))]
        )
        for split, count in (("train", 24), ("val", 12), ("test", 12))
    }
    out = tmp_path_factory.mktemp("text") / "data"
    write_dataset(out, splits, labels=LABELS)
    return out


def encoder_spec(kind: str, models: dict[str, Path]) -> dict:
    return {
        "resnet": {"kind": "resnet", "arch": "resnet18", "weights": "none", "small_input": True},
        "cifar_resnet": {"kind": "cifar_resnet", "widths": [8, 16], "blocks": 1},
        "hf": {"kind": "hf", "path": str(models["roberta"]), "max_length": 64},
        "llama_lora": {"kind": "llama_lora", "path": str(models["llama"]), "max_length": 64, "bf16": True},
        "plm_icd": {"kind": "plm_icd", "path": str(models["roberta"]), "max_length": 128, "chunk_size": 32, "attention_dim": 16},
    }[kind]


def run_spec(encoder: dict, **pretrain) -> dict:
    return {
        "dataset": "coco", "encoder_name": encoder["kind"], "encoder": encoder, "loss": "simdissim", "batch_size": 8,
        "pretrain": {"epochs": 1, "image_size": 32, "projection_dim": 32, "max_steps_per_epoch": 2, **pretrain},
        "probe": {"epochs": 1, "batch_size": 8},
    }  # fmt: skip


def pretrain(data: Path, spec: dict, out: Path, *extra: str) -> int:
    return mscl_main(["pretrain", "--data", str(data), "--spec", json.dumps(spec), "--out", str(out), *extra])


# ----------------------------------------------------------------------------- tests


@gpu_test
@pytest.mark.parametrize("kind", KINDS)
def test_one_pretraining_run_per_encoder_kind_on_cuda(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The pipeline's own job on CUDA: two steps of each kind, bf16 autocast (auto), images
    decoded on the GPU (decode auto), then the probe on the saved encoder."""
    image = kind in ("resnet", "cifar_resnet")
    data = request.getfixturevalue("jpeg_data" if image else "text_data")
    models = {} if image else request.getfixturevalue("tiny_models")
    spec = run_spec(encoder_spec(kind, models))
    assert pretrain(data, spec, tmp_path / "pre") == 0
    versions = json.loads((tmp_path / "pre" / "versions.json").read_text())
    assert versions["device"] == "cuda" and versions["precision"] == "bf16"
    assert versions["image_decode"] == ("device" if image else None)
    log = pd.read_csv(tmp_path / "pre" / "train_log.csv")
    assert log["steps"].tolist() == [2] and np.isfinite(log["loss"]).all()
    probe = ["probe", "--data", str(data), "--pretrained", str(tmp_path / "pre"), "--spec", json.dumps(spec), "--out", str(tmp_path / "probe")]
    assert mscl_main(probe) == 0
    assert 0 <= json.loads((tmp_path / "probe" / "metrics.json").read_text())["test"]["map"] <= 1


@gpu_test
def test_csr_labels_and_every_loss_on_cuda_equal_the_cpu_in_float64() -> None:
    """Sparse CSR batches moved to the GPU as the training step moves them (pinned,
    non_blocking) give every loss's value and feature gradient of the CPU, in float64."""
    generator = torch.Generator().manual_seed(0)
    num_labels, batch = 50, 24
    label_ids = [torch.randperm(num_labels, generator=generator)[: int(k)] for k in torch.randint(0, 5, (batch,), generator=generator)]
    labels = csr_labels(label_ids, num_labels)
    on_gpu = labels.pin_memory().to("cuda", non_blocking=True)
    assert on_gpu.layout == torch.sparse_csr and torch.equal(on_gpu.to_dense().cpu(), labels.to_dense())
    features = torch.nn.functional.normalize(torch.randn(batch, 2, 16, dtype=torch.float64, generator=generator), dim=-1)
    for name in LOSS_NAMES:
        options = {"num_labels": num_labels, "dim": 16} if name in PROTOTYPE_LOSSES else {}
        torch.manual_seed(0)
        loss = make_loss(name, **options).double()
        values, gradients = [], []
        for device, device_labels in (("cpu", labels), ("cuda", on_gpu)):
            x = features.to(device).requires_grad_()
            value = loss.to(device)(x, device_labels)
            value.backward()
            values.append(value.detach().cpu())
            gradients.append(x.grad.cpu())
        assert torch.allclose(values[0], values[1], rtol=1e-10, atol=1e-12), name
        assert torch.allclose(gradients[0], gradients[1], rtol=1e-9, atol=1e-12), name


@gpu_test
def test_a_label_matrix_on_cuda_reads_as_on_the_cpu() -> None:
    """A split's LabelMatrix moved to the GPU (the probe's train labels): dense rows, column
    blocks and counts, restriction and the scipy form are the CPU's."""
    dense = (torch.rand(40, 30, generator=torch.Generator().manual_seed(1)) < 0.15).float()
    cpu = LabelMatrix.from_dense(dense)
    gpu = cpu.to("cuda")
    rows = torch.tensor([3, 0, 39, 3])
    assert gpu.device.type == "cuda"
    assert torch.equal(gpu.dense(rows).cpu(), dense[rows]) and torch.equal(gpu.dense().cpu(), dense)
    assert torch.equal(gpu.column_block(5, 17).cpu(), dense[:, 5:17])
    assert torch.equal(gpu.column_counts().cpu(), dense.sum(0).long())
    assert torch.equal(gpu.first_columns(10).dense().cpu(), dense[:, :10])
    assert (gpu.to_scipy() != cpu.to_scipy()).nnz == 0


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_bf16_autocast_leaves_the_loss_and_the_optimiser_state_float32(device: str, optimizer: str) -> None:
    """A training step of the pipeline (`contrastive_features`, the loss, the optimiser) under
    bf16 autocast: the encoder computes in bf16, the loss and every parameter and optimiser
    state tensor stay float32."""
    from mscl.train.pretrain import build_model, contrastive_features, make_optimizer
    from mscl.train.spec import RunSpec

    spec = RunSpec.from_mapping(
        {"dataset": "yeast", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 12, "hidden_dims": [32, 16]},
         "loss": "msc", "batch_size": 8, "pretrain": {"optimizer": optimizer, "projection_dim": 8}}
    )  # fmt: skip
    where = torch.device(device)
    torch.manual_seed(0)
    encoder, head, loss_fn = build_model(spec, 5, where)
    optim = make_optimizer(spec, encoder, head, loss_fn)
    batch = {"features": torch.randn(8, 2, 12), "labels": csr_labels([[0], [1, 2], [3], [4], [0, 4], [2], [1], [3]], 5)}
    seen = []
    hook = encoder.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    with autocast(where, "bf16"):
        features = contrastive_features(encoder, head, batch, "tabular", "dropout", where)
        loss = loss_fn(features, batch["labels"].to(where))
    hook.remove()
    loss.backward()
    optim.step()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert any(dtype == torch.bfloat16 for dtype in seen) or features.dtype == torch.bfloat16
    state = [value for per_parameter in optim.state.values() for value in per_parameter.values() if value.is_floating_point() and value.dim()]
    assert state and all(value.dtype == torch.float32 and value.device.type == device for value in state)
    assert all(p.dtype == torch.float32 for p in [*encoder.parameters(), *head.parameters(), *loss_fn.parameters()])


@gpu_test
def test_views_made_on_cuda_match_the_cpu_path(jpeg_data: Path) -> None:
    """Colour views on CUDA are the CPU's up to float rounding (same draws: they come from the
    CPU generator); the crops cut on CUDA from pixels are the CPU's bit for bit; JPEGs decoded
    by nvJPEG differ from Pillow's decoder by a little (printed; docs/gpu.md)."""
    from mscl.data.manifest import read_labels
    from mscl.train.augment import color_views
    from mscl.train.data import ImageDataset, collate, load_split
    from mscl.train.decode import DEVICE, WORKERS, decode_images, device_views, resized_crops

    images = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(5)
    on_cpu = color_views(images.clone())
    torch.manual_seed(5)
    on_gpu = color_views(images.cuda())
    assert on_gpu.device.type == "cuda" and torch.allclose(on_gpu.cpu(), on_cpu, atol=1e-4)

    split = load_split(jpeg_data, "train", read_labels(jpeg_data), "image")
    items = [(index, 7 * index) for index in range(len(split))]
    batch = collate([ImageDataset(split, 32, 2, 0.2, decode=DEVICE)[item] for item in items], len(LABELS))
    pixels = decode_images(batch["encoded"], torch.device("cpu"))
    assert torch.equal(resized_crops([p.cuda() for p in pixels], batch["boxes"], 32).cpu(), resized_crops(pixels, batch["boxes"], 32))
    cpu_path = collate([ImageDataset(split, 32, 2, 0.2, decode=WORKERS)[item] for item in items], len(LABELS))["images"].int()
    on_gpu = device_views(batch, torch.device("cuda"))
    assert on_gpu.device.type == "cuda" and on_gpu.dtype == torch.uint8 and on_gpu.shape == cpu_path.shape
    difference = (on_gpu.cpu().int() - cpu_path).abs().float()
    other_image = (cpu_path.roll(1, dims=0) - cpu_path).abs().float()  # the same crops of another image
    print(f"\nnvJPEG views vs the CPU path: mean |diff| {difference.mean():.3f} levels, max {difference.max():.0f}, "
          f"{(difference > 1).float().mean():.2%} of values off by more than 1 (another image: {other_image.mean():.1f})")  # fmt: skip
    # The two decoders may differ by some levels (chroma upsampling, IDCT); a wrong box, channel
    # order or orientation would differ as much as another image does.
    assert difference.mean() < other_image.mean() / 10


@gpu_test
@pytest.mark.parametrize("kind", ["resnet", "hf"])
def test_checkpoint_save_and_resume_on_cuda(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """A run stopped after epoch 1 resumes on CUDA from its checkpoint: the restored training
    state is the checkpoint's bit for bit (optimiser state moved back to the GPU, CUDA RNG),
    and it ends where an uninterrupted run ends up to CUDA's non-determinism."""
    from mscl.train.runtime import load_checkpoint

    image = kind == "resnet"
    data = request.getfixturevalue("jpeg_data" if image else "text_data")
    models = {} if image else request.getfixturevalue("tiny_models")
    spec = run_spec(encoder_spec(kind, models), epochs=2, precision="fp32")
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    assert pretrain(data, spec, stopped, "--stop-after-epoch", "1") == EXIT_STOPPED
    saved = load_checkpoint(stopped / "checkpoint.pt")
    assert saved["epoch"] == 1 and "cuda" in saved["rng"]
    assert any(value.is_floating_point() for state in saved["optimizer"]["state"].values() for value in state.values())

    from mscl.train.pretrain import checkpoint_state, resume, start_training
    from mscl.train.runtime import seed_everything
    from mscl.train.spec import RunSpec

    resolved = RunSpec.from_mapping(spec)
    state = start_training(resolved, len(LABELS), saved["steps_per_epoch"], seed_everything(0), torch.device("cuda"), "fp32")
    resume(state, stopped / "checkpoint.pt")
    assert next(state.encoder.parameters()).device.type == "cuda"
    assert all(v.device.type == "cuda" for s in state.optimizer.state.values() for v in s.values() if v.dim())
    again = checkpoint_state(state)
    for key in ("encoder", "head", "optimizer", "rng"):
        assert_same(again[key], saved[key])

    assert pretrain(data, spec, stopped) == 0 and pretrain(data, spec, straight) == 0
    resumed_weights, straight_weights = (torch.load(run / "encoder.pt", weights_only=True) for run in (stopped, straight))
    for name, value in straight_weights.items():
        assert torch.allclose(resumed_weights[name].float(), value.float(), rtol=1e-3, atol=1e-4), name


def assert_same(left, right) -> None:
    """Equal nested values, tensors bit-identical wherever each lives."""
    if isinstance(left, torch.Tensor):
        assert torch.equal(left.cpu(), right.cpu())
    elif isinstance(left, dict):
        assert left.keys() == right.keys()
        for key in left:
            assert_same(left[key], right[key])
    elif isinstance(left, (list, tuple)):
        assert len(left) == len(right)
        for a, b in zip(left, right):
            assert_same(a, b)
    else:
        assert left == right


def test_bench_gpu_runs_every_kind_of_case_at_toy_sizes_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`bench gpu --device cpu`: the pipeline and bare loops of an image case, the losses and
    the decode comparison run and report (the text cases need make-tiny-models' seconds; the
    GPU check runs them)."""
    from mscl.bench import main as bench_main

    out = tmp_path / "rows.json"
    argv = ["gpu", "--device", "cpu", "--cases", "resnet50", "losses", "decode", "--steps", "1", "--warmup", "1", "--repeats", "1",
            "--data-dir", str(tmp_path / "data"), "--json", str(out)]  # fmt: skip
    assert bench_main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [row["case"] for row in rows] == ["resnet50", "losses L=87", "losses L=252"]
    assert all(row["error"] is None for row in rows)
    # The toy pipeline rate is a difference of two short epochs' times (NaN where noise beats it).
    assert all(row["bare_samples_per_s"] > 0 and not row["pipeline_samples_per_s"] <= 0 for row in rows)
    printed = capsys.readouterr().out
    assert "| resnet50 " in printed and "pipeline/bare" in printed
    assert "views vs the CPU path: mean |difference| 0.000 grey levels, largest 0" in printed  # the CPU decoders agree exactly
