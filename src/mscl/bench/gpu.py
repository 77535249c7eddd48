"""`python -m mscl bench gpu`: the pipeline's pretraining step against a bare loop of the same model.

    python -m mscl bench gpu [--device cuda|cpu] [--cases NAME ...] [--steps 30] [--warmup 2]
                             [--data-dir DIR] [--models DIR] [--json PATH] [--table PATH]
                             [--prepare-only]

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

A GPU is lent for minutes, so a failure costs only what failed:

- every case runs in its own `try`: a case that raises (a CUDA out-of-memory error, nvJPEG
  refused) gets a row holding its error, the CUDA memory it held is freed, the remaining cases
  run, and the command exits 1 at the end (0 when every case measured);
- `--json` and `--table` are rewritten (atomically) after every case, so a run stopped at any
  point keeps every case it finished. Rows of cases this run does not measure stay in the
  `--json` file, so that several runs of one case each (tools/gpu_check.sh runs each case in its
  own time-limited process) fill one file and one table;
- SIGTERM (a time limit) first prints every thread's stack to stderr: the log says where a case
  hung;
- `--prepare-only` writes the synthetic data (`--data-dir`) and the models (`--models`) the
  cases need and stops: the GPU check's first, separately time-limited stage.

For rehearsing that (tools/gpu_check.sh, tests/test_gpu_check.py), the environment variable
MSCL_BENCH_GPU_FAULTS="CASE:raise,CASE:hang" makes the named cases raise or hang where they
start.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import gc
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from mscl import cli
from mscl.defaults import GPU_BENCH_CASES
from mscl.defaults import GPU_MODEL_CASES as MODEL_CASES
from mscl.errors import InputError
from mscl.io import read_json, write_json, write_text
# Synthetic data per device: (dataset, scale); a train split shorter than the longest timed
# epoch is repeated (`tiled`). coco x 0.01: 820 train images (1,224 JPEGs in all, which one core
# of a loaded 2-core machine wrote in 24 s); mimic3_full x 0.01: 477 notes.
DATA = {
    "cuda": {"image": ("coco", 0.01), "text": ("mimic3_full", 0.01)},
    "cpu": {"image": ("coco", 0.0005), "text": ("mimic3_full", 0.0008)},
}
LOSS_SIZES = {"cuda": (8192, (8692, 25230)), "cpu": (64, (87, 252))}  # (anchors n, label spaces L)
PROJECTION_DIM = 256  # config/paper.yaml: D_P


FAULTS_ENV = "MSCL_BENCH_GPU_FAULTS"  # rehearsals only: "CASE:raise,CASE:hang" (module docstring)
FAULT_KINDS = ("raise", "hang")
CUDA_DESCRIPTIONS = {
    "resnet50": "ResNet-50, 224 px, batch 256, JPEGs decoded on the GPU",
    "resnet50-cpu-decode": "ResNet-50, 224 px, batch 256, JPEGs decoded by Pillow in the workers",
    "roberta-base": "roberta-base config (random init), 512 tokens, batch 32",
    "llama-lora": "Llama-3.1-8B design stand-in (hidden 512, 4 layers), LoRA r 16, 512 tokens, batch 32",
    "plm-icd": "PLM-ICD on the roberta-base config, 3,072 tokens, batch 8, L = 8,692",
}


@dataclass
class Row:
    case: str
    what: str
    pipeline_samples_per_s: float | None = None
    bare_samples_per_s: float | None = None
    pipeline_peak_gib: float | None = None
    bare_peak_gib: float | None = None
    epoch_start_s: float | None = None  # the pipeline's wait for an epoch's first batch
    error: str | None = None  # why the case failed; its figures are None then

    @property
    def ratio(self) -> float | None:
        if self.pipeline_samples_per_s is None or self.bare_samples_per_s is None:
            return None
        return self.pipeline_samples_per_s / self.bare_samples_per_s


# ------------------------------------------------------------------------------ cases


def case_description(name: str, device: torch.device) -> str:
    """What case `name` measures on `device` (a failed case's row says it too)."""
    if name == "losses":
        anchors, label_spaces = LOSS_SIZES[device.type]
        return f"Sim-Dissim label work, n = {anchors:,}, L = {' and '.join(f'{size:,}' for size in label_spaces)}"
    if name == "decode":
        return "JPEG views decoded and cut on the device against the CPU path's"
    return CUDA_DESCRIPTIONS[name] if device.type == "cuda" else "toy size on the CPU (checks the code, not the speed)"


def data_kind(case: str) -> str | None:
    """The synthetic data a case reads: image (the ResNet cases, decode), text (the text models)
    or none (losses)."""
    if case.startswith("resnet50") or case == "decode":
        return "image"
    return "text" if case in MODEL_CASES else None


def case_specs(device: torch.device, models: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """Case -> (what it is, run spec mapping without dataset and loss) on `device`."""
    if device.type == "cuda":
        roberta, llama = models / "roberta-base", models / "llama-3.1-8b-design"
        resnet = {"kind": "resnet", "arch": "resnet50", "weights": "none"}
        image = {"image_size": 224, "crop_scale_min": 0.2}
        sizes = {"image": 256, "text": 32, "plm": 8, "tokens": 512, "plm_tokens": 3072, "chunk": 128, "attention": 512}
        precision = "bf16"
    else:
        roberta, llama = models / "roberta", models / "llama"
        resnet = {"kind": "cifar_resnet", "widths": [8, 16], "blocks": 1}  # the same image path, a thousandth of ResNet-18's weights
        image = {"image_size": 16, "crop_scale_min": 0.2, "num_workers": 0}  # no worker processes to start for a code check
        sizes = {"image": 4, "text": 4, "plm": 2, "tokens": 64, "plm_tokens": 128, "chunk": 32, "attention": 16}
        precision = "fp32"
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
        name: (case_description(name, device), {"encoder_name": name, "encoder": encoder, "batch_size": batch, "pretrain": {**pretrain, "precision": precision, "projection_dim": PROJECTION_DIM}})
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


def prepared_models(device: torch.device, out: Path) -> Path:
    """`make-tiny-models` output in `out` (the `paper` set on CUDA, the tiny set on the CPU),
    written there unless an earlier run did; a folder holding anything else is an error."""
    model_set = "paper" if device.type == "cuda" else "tiny"
    info = out / "info.json"
    if info.exists():
        found = read_json(info, "make-tiny-models' info.json", "", f"delete {out} or give --models another folder").get("set")
        if found == model_set:
            return out
        raise InputError(out, f"holds make-tiny-models --set {found}, while --device {device.type} needs --set {model_set}", "give --models another folder (it is written when absent)")
    if out.exists() and any(out.iterdir()):
        raise InputError(out, "is not a make-tiny-models output (no info.json), so it is not overwritten", "give --models an absent or empty folder")
    from mscl.demo.tiny_models import make_tiny_models

    make_tiny_models(out, seed=0, model_set=model_set)
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

    def number(value: float | None, spec: str = ".2f") -> str:
        return "-" if value is None else format(value, spec)

    for row in rows:
        what = row.what if row.error is None else f"FAILED: {row.error} -- {row.what}"
        lines.append(
            f"| {row.case:<20} | {number(row.pipeline_samples_per_s, ',.1f'):>18} | {number(row.bare_samples_per_s, ',.1f'):>14} | "
            f"{number(row.ratio, '.3f'):>13} | {number(row.epoch_start_s):>13} | {number(row.pipeline_peak_gib):>17} | "
            f"{number(row.bare_peak_gib):>13} | {what}"
        )
    return "\n".join(lines)


def device_line(device: torch.device) -> str:
    import torchvision

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return f"bench gpu: {name}; torch {torch.__version__}, torchvision {torchvision.__version__}, CUDA {torch.version.cuda}, {torch.get_num_threads()} torch threads"


def case_of(row_case: str) -> str:
    """The case a row belongs to: "losses L=8692" -> "losses"."""
    return row_case.split(" ")[0]


class Report:
    """The device line, the rows so far and the decode figures: what --json and --table hold,
    both rewritten atomically whenever a case ends. Rows of cases not in `cases` that the
    --json file already holds stay (in their order, before this run's)."""

    def __init__(self, device: str, cases: Sequence[str], json_path: Path | None, table_path: Path | None):
        self.device, self.json_path, self.table_path = device, json_path, table_path
        self.rows: list[Row] = []
        self.decode: list[str] = []
        if json_path is not None and json_path.exists():
            self.rows, decode = earlier_results(json_path)
            self.rows = [row for row in self.rows if case_of(row.case) not in cases]
            self.decode = [] if "decode" in cases else decode
        self.write()

    def add(self, rows: Sequence[Row], decode: Sequence[str]) -> None:
        self.rows += rows
        if decode:
            self.decode = list(decode)
        self.write()

    def text(self) -> str:
        return "\n".join([self.device, "", format_rows(self.rows), *(["", *self.decode] if self.decode else [])])

    def write(self) -> None:
        if self.json_path is not None:
            rows = [{**asdict(row), "ratio": row.ratio} for row in self.rows]
            write_json(self.json_path, {"device": self.device, "rows": rows, "decode": self.decode})
        if self.table_path is not None:
            write_text(self.table_path, self.text() + "\n")


def earlier_results(path: Path) -> tuple[list[Row], list[str]]:
    """The rows and decode lines of an earlier run's --json file."""
    fix = "delete it or give --json another path"
    earlier = read_json(path, "bench gpu's --json file", fix, fix)
    fields = {field.name for field in dataclasses.fields(Row)}
    try:
        rows = [Row(**{key: value for key, value in row.items() if key in fields}) for row in earlier["rows"]]
        return rows, [str(line) for line in earlier.get("decode", [])]
    except (TypeError, KeyError, AttributeError):
        raise InputError(path, "is not a bench gpu --json file (an object with a 'rows' list of rows, each with 'case' and 'what')", fix) from None


def injected_faults(spec: str) -> dict[str, str]:
    """MSCL_BENCH_GPU_FAULTS, "CASE:raise,CASE:hang", as {case: kind}."""
    faults = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        case, _, kind = item.partition(":")
        if case not in GPU_BENCH_CASES or kind not in FAULT_KINDS:
            raise InputError(None, f"{FAULTS_ENV}={spec!r}: {item!r} is not CASE:KIND", f"name a case of {', '.join(GPU_BENCH_CASES)} and a kind of {', '.join(FAULT_KINDS)}", field=FAULTS_ENV)
        faults[case] = kind
    return faults


def fault_point(case: str, faults: dict[str, str]) -> None:
    """Where an injected fault strikes: the start of `case`."""
    kind = faults.get(case)
    if kind == "raise":
        raise RuntimeError(f"{case}: fault injected by {FAULTS_ENV}")
    if kind == "hang":
        print(f"bench gpu: {case}: hanging ({FAULTS_ENV})", flush=True)
        while True:
            time.sleep(60)


def measure(case: str, device: torch.device, args: Any, data_dir: Path, models: Path) -> tuple[list[Row], list[str]]:
    """Case `case`'s rows, or for decode its lines."""
    kind = data_kind(case)
    data = prepared_data(kind, device, data_dir) if kind else None
    if case in MODEL_CASES:
        what, mapping = case_specs(device, prepared_models(device, models) if kind == "text" else models)[case]
        return [model_case(case, what, mapping, data, device, args.steps, args.warmup)], []
    if case == "losses":
        return losses_rows(device, args.repeats), []
    size, count = (224, 256) if device.type == "cuda" else (16, 4)
    return [], decode_lines(data, device, count, size, args.repeats)


def free_device_memory(device: torch.device) -> None:
    """Give back what a case held (a failed case's tensors too, once its traceback is gone)
    before the next case starts."""
    gc.collect()
    if device.type == "cuda":
        try:
            torch.cuda.empty_cache()
        except RuntimeError as error:  # a broken CUDA context: the next cases record it in their rows
            print(f"bench gpu: could not free CUDA memory: {error}", file=sys.stderr, flush=True)


def prepare(args: Any, device: torch.device, cases: Sequence[str]) -> int:
    """--prepare-only: the data and models `cases` read, written into --data-dir and --models."""
    kinds = sorted({kind for kind in map(data_kind, cases) if kind})
    if (kinds and args.data_dir is None) or ("text" in kinds and args.models is None):
        print("bench gpu: --prepare-only writes into --data-dir (and --models for the text cases); give them", file=sys.stderr)
        return 2
    for kind in kinds:
        print(f"bench gpu: {kind} data in {prepared_data(kind, device, args.data_dir)}", flush=True)
    if "text" in kinds:
        print(f"bench gpu: models in {prepared_models(device, args.models)}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench gpu", argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench gpu: no CUDA device is visible; use --device cpu for the toy sizes", file=sys.stderr)
        return 2
    faults = injected_faults(os.environ.get(FAULTS_ENV, ""))
    cases = [case for case in GPU_BENCH_CASES if case in args.cases]
    if args.prepare_only:
        return prepare(args, device, cases)
    report = Report(device_line(device), cases, args.json, args.table)
    print(report.device, flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="mscl-bench-gpu-"))
    data_dir, models = args.data_dir or workdir, args.models or workdir / "models"
    # A time limit's SIGTERM: the log shows where the case was (the process's own stderr: a
    # caller's replacement, pytest's capture say, may have no file descriptor).
    faulthandler.register(signal.SIGTERM, file=sys.__stderr__, chain=True)
    failed = []
    try:
        for case in cases:
            try:
                fault_point(case, faults)
                rows, lines = measure(case, device, args, data_dir, models)
            except Exception as error:  # an out-of-memory error, nvJPEG refused: it costs this case only
                traceback.print_exc()
                rows, lines = [Row(case, case_description(case, device), error=" ".join(f"{type(error).__name__}: {error}".split()))], []
                failed.append(case)
            free_device_memory(device)
            report.add(rows, lines)
            print("\n".join([*format_rows(rows).splitlines()[2:], *lines]), flush=True)
    finally:
        faulthandler.unregister(signal.SIGTERM)
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(report.text())
    if failed:
        print(f"bench gpu: {len(failed)} case(s) failed: {', '.join(failed)} (their rows hold the error; tracebacks above)", file=sys.stderr)
    return 1 if failed else 0
