"""`python -m mscl bench gpu`: the pipeline's pretraining step against a bare loop of the same model.

    python -m mscl bench gpu [--device cuda|cpu] [--cases NAME ...] [--steps 30] [--warmup 2]
                             [--data-dir DIR] [--models DIR] [--json PATH]

For each model case two loops train the same model with the same optimiser, batch size and
precision, one after the other:

- pipeline: `mscl.train.pretrain`'s own code, `start_training`, `training_loader` and
  `train_epoch`: the DataLoader's workers and pinned batches, the views made as a run makes them
  (two crops per image and the colour on the device, or two dropout passes over texts tokenised
  in the step), sparse CSR labels, the learning rate set every step, the loss. After a warm-up
  epoch of `--warmup` steps it times an epoch of `--warmup` steps and one of `--warmup` +
  `--steps`: their difference is the steady rate over `--steps` steps, and what the short
  epoch took beyond it the epoch's start (waiting for the first batch, which one worker makes
  alone). Each worker makes whole batches, two ahead, so only an epoch longer than twice the
  workers shows whether they keep up: `--steps` is 30 (16 workers on the GPU machine), and the
  train split is repeated to hold it;
- bare: one batch of those, made once and left on the device (normalised views, tokens, labels),
  then forward, loss, backward and optimiser step, `--steps` times: what the model alone costs.

It prints samples/s of each, pipeline / bare, the pipeline's epoch start and the peak GPU memory
of each. Cases at the
paper's sizes (on `--device cuda`, bf16):

- resnet50, resnet50-cpu-decode: ResNet-50 at 224 px, batch 256, on `make-synthetic coco`
  JPEGs (500 x 375 px, about 110 KB), the images decoded and cut on the GPU
  (`pretrain.decode: gpu`) or by Pillow in the workers (`cpu`);
- roberta-base: the roberta-base stand-in of `make-tiny-models --set paper` (roberta-base's
  config, randomly initialised) at 512 tokens, batch 32, on `make-synthetic mimic3_full` texts;
- llama-lora: the Llama-3.1-8B *design* stand-in of the same set (its layer design at hidden 512
  and 4 layers, not the 8B model; saved in bf16), LoRA r 16 on the attention projections,
  gradient checkpointing as config/paper.yaml has it, 512 tokens, batch 32;
- plm-icd: PLM-ICD on the roberta-base stand-in at 3,072 tokens (24 chunks of 128), batch 8, label
  attention of width 512 over the 8,692 labels of MIMIC-III full;

and two without a model:

- losses: the Sim-Dissim loss's label work at n = 8,192 anchors (B = 4,096, two views, D = 256)
  for L = 8,692 and 25,230: the loss with the batch's CSR labels copied to the device as the step
  copies them, against the feature-only reference of `mscl.bench.losses` (the same feature
  computation on precomputed weights);
- decode: the views of 256 JPEGs decoded and cut on the device against the CPU path's (mean and
  largest difference in grey levels) and the throughput of each.

`--device cpu` runs every case at toy sizes (a two-stage CIFAR ResNet at 16 px, the tiny text models, 4 JPEGs) so that
the suite can run this code; its figures mean nothing. docs/gpu.md has the measured table.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from mscl import cli
from mscl.defaults import GPU_MODEL_CASES as MODEL_CASES
# Synthetic data per device: (dataset, scale); a train split shorter than the longest timed
# epoch is repeated (`tiled`). coco x 0.02: 1,640 train images; mimic3_full x 0.01: 477 notes.
DATA = {
    "cuda": {"image": ("coco", 0.02), "text": ("mimic3_full", 0.01)},
    "cpu": {"image": ("coco", 0.0005), "text": ("mimic3_full", 0.0008)},
}
LOSS_SIZES = {"cuda": (8192, (8692, 25230)), "cpu": (64, (87, 252))}  # (anchors n, label spaces L)
PROJECTION_DIM = 256  # config/paper.yaml: D_P


@dataclass
class Row:
    case: str
    what: str
    pipeline_samples_per_s: float
    bare_samples_per_s: float
    pipeline_peak_gib: float | None
    bare_peak_gib: float | None
    epoch_start_s: float | None = None  # the pipeline's wait for an epoch's first batch

    @property
    def ratio(self) -> float:
        return self.pipeline_samples_per_s / self.bare_samples_per_s


# ------------------------------------------------------------------------------ cases


def case_specs(device: torch.device, models: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """Case -> (what it is, run spec mapping without dataset and loss) on `device`."""
    if device.type == "cuda":
        roberta, llama = models / "roberta-base", models / "llama-3.1-8b-design"
        resnet = {"kind": "resnet", "arch": "resnet50", "weights": "none"}
        image = {"image_size": 224, "crop_scale_min": 0.2}
        sizes = {"image": 256, "text": 32, "plm": 8, "tokens": 512, "plm_tokens": 3072, "chunk": 128, "attention": 512}
        precision = "bf16"
        describe = {
            "resnet50": "ResNet-50, 224 px, batch 256, JPEGs decoded on the GPU",
            "resnet50-cpu-decode": "ResNet-50, 224 px, batch 256, JPEGs decoded by Pillow in the workers",
            "roberta-base": "roberta-base config (random init), 512 tokens, batch 32",
            "llama-lora": "Llama-3.1-8B design stand-in (hidden 512, 4 layers), LoRA r 16, 512 tokens, batch 32",
            "plm-icd": "PLM-ICD on the roberta-base config, 3,072 tokens, batch 8, L = 8,692",
        }
    else:
        roberta, llama = models / "roberta", models / "llama"
        resnet = {"kind": "cifar_resnet", "widths": [8, 16], "blocks": 1}  # the same image path, a thousandth of ResNet-18's weights
        image = {"image_size": 16, "crop_scale_min": 0.2, "num_workers": 0}  # no worker processes to start for a code check
        sizes = {"image": 4, "text": 4, "plm": 2, "tokens": 64, "plm_tokens": 128, "chunk": 32, "attention": 16}
        precision = "fp32"
        describe = dict.fromkeys(MODEL_CASES, "toy size on the CPU (checks the code, not the speed)")
    llama_spec = {"kind": "llama_lora", "path": str(llama), "max_length": sizes["tokens"], "lora_r": 16, "lora_alpha": 32,
                  "lora_dropout": 0.1, "bf16": precision == "bf16", "gradient_checkpointing": True}  # fmt: skip
    specs = {
        "resnet50": (resnet, sizes["image"], {**image, "decode": "gpu" if device.type == "cuda" else "cpu"}),
        "resnet50-cpu-decode": (resnet, sizes["image"], {**image, "decode": "cpu"}),
        "roberta-base": ({"kind": "hf", "path": str(roberta), "max_length": sizes["tokens"], "pooling": "cls"}, sizes["text"], {"lr": 2e-5}),
        "llama-lora": (llama_spec, sizes["text"], {"lr": 1e-4}),
        "plm-icd": ({"kind": "plm_icd", "path": str(roberta), "max_length": sizes["plm_tokens"], "chunk_size": sizes["chunk"],
                     "attention_dim": sizes["attention"]}, sizes["plm"], {"lr": 2e-5}),  # fmt: skip
    }
    return {
        name: (describe[name], {"encoder_name": name, "encoder": encoder, "batch_size": batch, "pretrain": {**pretrain, "precision": precision, "projection_dim": PROJECTION_DIM}})
        for name, (encoder, batch, pretrain) in specs.items()
    }


def prepared_data(kind: str, device: torch.device, data_dir: Path) -> Path:
    """The case's synthetic manifest in `data_dir`, written there unless an earlier run did."""
    from mscl.demo.synthetic import make_synthetic

    dataset, scale = DATA[device.type][kind]
    out = data_dir / f"{dataset}_x{scale:g}"
    if not (out / "stats.json").exists():
        make_synthetic(dataset, scale, out)
    return out


def prepared_models(device: torch.device, models: Path | None, workdir: Path) -> Path:
    """`make-tiny-models` output: --models when given, else written into the scratch folder
    (the `paper` set on CUDA, the tiny set on the CPU)."""
    if models is not None:
        return models
    from mscl.demo.tiny_models import make_tiny_models

    out = workdir / "models"
    make_tiny_models(out, seed=0, model_set="paper" if device.type == "cuda" else "tiny")
    return out


# ------------------------------------------------------------------------------ timing


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def timed(device: torch.device, function: Callable[[], Any]) -> float:
    """Wall seconds of `function()` with the device's queue drained before and after."""
    synchronize(device)
    started = time.perf_counter()
    function()
    synchronize(device)
    return time.perf_counter() - started


def model_case(name: str, what: str, mapping: dict[str, Any], data: Path, device: torch.device, steps: int, warmup: int) -> Row:
    """Pipeline and bare loop of one model case (module docstring)."""
    from mscl.data.manifest import read_labels
    from mscl.train.data import load_split
    from mscl.train.pretrain import start_training, train_epoch, training_loader
    from mscl.train.runtime import resolve_precision, seed_everything
    from mscl.train.spec import RunSpec

    spec = RunSpec.from_mapping({**mapping, "dataset": data.name.split("_x")[0], "loss": "simdissim"})
    vocabulary = read_labels(data)
    train = load_split(data, "train", vocabulary, spec.modality)
    train = tiled(train, math.ceil(spec.batch_size * (warmup + steps) / len(train)))
    generator = seed_everything(spec.seed)
    state = start_training(spec, len(vocabulary), warmup, generator, device, resolve_precision(spec.pretrain.precision, device))
    loader = training_loader(spec, train, None, generator, device)
    train_epoch(state, loader)  # warm-up: workers start, kernels are chosen and compiled

    def epoch_seconds(length: int) -> float:
        state.steps_per_epoch = length
        return timed(device, lambda: train_epoch(state, loader))

    # Every epoch starts by waiting for its first batch, which one worker makes alone (B samples
    # of decoding and cropping on the CPU path): the difference of a short and a long epoch is
    # the steady rate, and the short one's excess over it the start-up, both of the pipeline's
    # own train_epoch.
    reset_peak(device)
    short = epoch_seconds(warmup)
    long = epoch_seconds(warmup + steps)
    pipeline_peak = peak_gib(device)
    per_step = (long - short) / steps
    if per_step <= 0:
        print(f"bench gpu: {name}: timing noise exceeds {steps} step(s) (short epoch {short:.3f} s, long {long:.3f} s); raise --steps", file=sys.stderr)
        per_step = math.nan
    step = bare_step(state, next(iter(loader)))
    for _ in range(warmup):
        step()
    reset_peak(device)
    bare_seconds = timed(device, lambda: [step() for _ in range(steps)])
    samples = steps * spec.batch_size
    return Row(name, what, spec.batch_size / per_step, samples / bare_seconds, pipeline_peak, peak_gib(device), short - warmup * per_step)  # NaN when noisy


def tiled(split: Any, times: int) -> Any:
    """`split` repeated `times` times (same files, same labels): epochs long enough for the
    workers' sustained rate to show, from a few thousand synthetic JPEGs."""
    from mscl.train.labels import LabelMatrix

    labels = split.labels
    counts = (labels.indptr[1:] - labels.indptr[:-1]).repeat(times)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)])
    repeated = LabelMatrix(indptr, labels.indices.repeat(times), labels.num_labels)
    return dataclasses.replace(split, ids=split.ids * times, items=split.items * times, labels=repeated)


def bare_step(state: Any, batch: dict[str, Any]) -> Callable[[], None]:
    """One optimisation step of `state`'s model on `batch`, its inputs moved to the device and
    its views made once, here: forward, loss, backward, optimiser step and nothing else."""
    from mscl.train.augment import color_views
    from mscl.train.decode import device_views
    from mscl.train.features import text_inputs
    from mscl.train.runtime import autocast

    device, modality = state.device, state.spec.modality
    labels = batch["labels"].to(device)
    if modality == "image":
        views = device_views(batch, device) if "encoded" in batch else batch["images"].to(device)
        flat = color_views(torch.cat(views.unbind(1)))
        inputs = {"images": flat}
    else:
        inputs = {key: value.to(device) for key, value in text_inputs(state.encoder, batch).items()}

    def step() -> None:
        with autocast(device, state.precision):
            if modality == "image":
                features = state.head(state.encoder(inputs)).view(2, len(labels), -1).transpose(0, 1)
            else:
                features = torch.stack([state.head(state.encoder(inputs)) for _ in range(2)], dim=1)
            loss = state.loss_fn(features, labels)
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        state.optimizer.step()

    return step


def losses_rows(device: torch.device, repeats: int) -> list[Row]:
    """The label work of Sim-Dissim at the paper's largest label spaces (module docstring)."""
    import torch.nn.functional as F

    from mscl.bench.losses import LABELS_PER_SAMPLE, long_tailed_labels
    from mscl.losses import csr_labels, make_loss, pair_weights, weighted_neg_log_prob
    from mscl.train.settings import DEFAULT_TEMPERATURE

    anchors, label_spaces = LOSS_SIZES[device.type]
    batch = anchors // 2
    loss = make_loss("simdissim")
    rows = []
    for num_labels in label_spaces:
        dense = long_tailed_labels(batch, num_labels, LABELS_PER_SAMPLE.get(num_labels, 3), seed=0)
        labels = csr_labels([row.nonzero().squeeze(1) for row in dense], num_labels)
        if device.type == "cuda":
            labels = labels.pin_memory()  # as the DataLoader hands it over
        torch.manual_seed(0)
        features = F.normalize(torch.randn(batch, 2, PROJECTION_DIM, device=device), dim=-1).requires_grad_()
        weights = pair_weights("simdissim", labels.to(device), views=2, dtype=torch.float32)

        def with_labels() -> None:
            loss(features, labels.to(device, non_blocking=True)).backward()

        def feature_only() -> None:
            z = features.transpose(0, 1).reshape(anchors, PROJECTION_DIM)
            weighted_neg_log_prob(z, weights, DEFAULT_TEMPERATURE).mean().backward()

        times: dict[str, list[float]] = {"loss": [], "reference": []}
        peaks: dict[str, float | None] = {}
        for repetition in range(repeats + 1):  # the first warms up
            for name, function in (("loss", with_labels), ("reference", feature_only)):
                reset_peak(device)
                seconds = timed(device, function)
                peaks[name] = peak_gib(device)
                features.grad = None
                if repetition:
                    times[name].append(seconds)
        loss_s, reference_s = statistics.median(times["loss"]), statistics.median(times["reference"])
        what = f"Sim-Dissim label work, n = {anchors:,}, L = {num_labels:,} (bare: feature-only reference)"
        rows.append(Row(f"losses L={num_labels}", what, batch / loss_s, batch / reference_s, peaks["loss"], peaks["reference"]))
    return rows


def decode_lines(data: Path, device: torch.device, count: int, image_size: int, repeats: int) -> list[str]:
    """Views decoded and cut on `device` against the CPU path's, and each path's speed (the
    device's: median of `repeats` batches)."""
    from mscl.data.manifest import read_labels
    from mscl.train.data import ImageDataset, collate, load_split
    from mscl.train.decode import DEVICE, WORKERS, device_views

    split = load_split(data, "train", read_labels(data), "image")
    items = [(index, 1_000 + index) for index in range(min(count, len(split)))]
    on_device = ImageDataset(split, image_size, views=2, crop_scale_min=0.2, decode=DEVICE)
    workers = ImageDataset(split, image_size, views=2, crop_scale_min=0.2, decode=WORKERS)
    batch = collate([on_device[item] for item in items], split.num_labels)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a DataLoader worker's share
    started = time.process_time()
    expected = collate([workers[item] for item in items], split.num_labels)["images"]
    cpu_rate = 2 * len(items) / (time.process_time() - started)
    torch.set_num_threads(threads)
    views = device_views(batch, device)  # warm-up (nvJPEG handles, kernels)
    seconds = statistics.median(timed(device, lambda: device_views(batch, device)) for _ in range(repeats))
    difference = (views.cpu().int() - expected.int()).abs().float()
    return [
        f"decode: {len(items)} JPEGs of {data.name}, {image_size} px, two views each",
        f"  on {device.type}: decode + crops {2 * len(items) / seconds:,.0f} views/s ({1000 * seconds:.1f} ms per batch of {len(items)})",
        f"  CPU path (Pillow, one core): {cpu_rate:,.0f} views/s",
        f"  views vs the CPU path: mean |difference| {difference.mean():.3f} grey levels, largest {difference.max():.0f}, "
        f"{(difference > 1).float().mean():.3%} of values off by more than 1, {(difference == 0).float().mean():.2%} equal",
    ]


# ------------------------------------------------------------------------------ output


def format_rows(rows: Sequence[Row]) -> str:
    header = (f"| {'case':<20} | {'pipeline samples/s':>18} | {'bare samples/s':>14} | {'pipeline/bare':>13} | {'epoch start s':>13} "
              f"| {'peak GiB pipeline':>17} | {'peak GiB bare':>13} | what")  # fmt: skip
    lines = [header, "|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|------"]

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for row in rows:
        lines.append(
            f"| {row.case:<20} | {row.pipeline_samples_per_s:>18,.1f} | {row.bare_samples_per_s:>14,.1f} | {row.ratio:>13.3f} | "
            f"{number(row.epoch_start_s):>13} | {number(row.pipeline_peak_gib):>17} | {number(row.bare_peak_gib):>13} | {row.what}"
        )
    return "\n".join(lines)


def device_line(device: torch.device) -> str:
    import torchvision

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return f"bench gpu: {name}; torch {torch.__version__}, torchvision {torchvision.__version__}, CUDA {torch.version.cuda}, {torch.get_num_threads()} torch threads"


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench gpu", argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench gpu: no CUDA device is visible; use --device cpu for the toy sizes", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="mscl-bench-gpu-"))
    data_dir = args.data_dir or workdir
    data_dir.mkdir(parents=True, exist_ok=True)
    print(device_line(device), flush=True)
    rows: list[Row] = []
    try:
        models = prepared_models(device, args.models, workdir) if set(args.cases) & {"roberta-base", "llama-lora", "plm-icd"} else Path()
        specs = case_specs(device, models)
        for name in [case for case in MODEL_CASES if case in args.cases]:
            what, mapping = specs[name]
            kind = "image" if name.startswith("resnet") else "text"
            rows.append(model_case(name, what, mapping, prepared_data(kind, device, data_dir), device, args.steps, args.warmup))
            print(format_rows(rows[-1:]).splitlines()[-1], flush=True)
        if "losses" in args.cases:
            rows += losses_rows(device, args.repeats)
        print()
        print(format_rows(rows))
        if "decode" in args.cases:
            size = 224 if device.type == "cuda" else 16
            count = 256 if device.type == "cuda" else 4
            print("\n" + "\n".join(decode_lines(prepared_data("image", device, data_dir), device, count, size, args.repeats)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps([{**asdict(row), "ratio": row.ratio} for row in rows], indent=2) + "\n", encoding="utf-8")
    return 0
