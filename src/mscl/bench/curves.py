"""`python -m mscl bench curves`: what the TensorBoard curves cost a pretraining and a probe.

    python -m mscl bench curves --data DIR --spec JSON_OR_FILE [--epochs 6] [--points 50]

Pretraining: trains the spec's model with the pipeline's own `start_training`,
`training_loader` and `train_epoch` on the prepared dataset, epochs alternating between curves
off and on (so that a machine's drift falls on both alike), the curves written into a temporary
folder exactly as a job writes them (`mscl.train.curves`: the loss points of the step loop, the
epoch's scalars and peak memory, flushed to disk).

Probe: `train_probe` (the pipeline's) on features of the train and val splits' sizes and labels
(random values, `PROBE_FEATURES` wide; the features do not change what the writer does),
with the spec's probe settings, once with curves off and once on.

For each it prints the writer's own time, measured directly: the seconds spent inside the curve
calls (`Curves.loss` for every point, `Curves.scalars` at an epoch's end: converting the points,
handing them to the writer's thread, flushing to disk) per epoch, per step and as a share of
the epoch; and the median epoch (the probe's: its whole fit) with curves off and on, in wall
and in CPU seconds of this process (the writer's thread, which encodes and writes the events,
included). On a shared machine those differences are mostly noise: the direct figure is the
one to trust, and the CPU difference bounds what the thread adds.

`--epochs` pretraining epochs of each (default 6) after one warm-up epoch; `--points` loss
points an epoch (default 50, the config's default). The step loop's own addition (the loss
difference and its copy at each point) runs on the device and is inside the epoch times only.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mscl import cli
from mscl.train.curves import Curves, open_curves, peak_memory
from mscl.train.launch import CURVES_ENV

PROBE_FEATURES = 64  # the width of ResNet-8's features, the embedded default's image encoder


class TimedCurves(Curves):
    """Curves that add up the seconds spent in their calls."""

    def __init__(self, curves: Curves):
        super().__init__(curves.writer)
        self.seconds = 0.0

    def loss(self, step: int, loss: Any, lr: float) -> None:
        started = time.perf_counter()
        super().loss(step, loss, lr)
        self.seconds += time.perf_counter() - started

    def scalars(self, step: int, values: Mapping[str, float | None]) -> None:
        started = time.perf_counter()
        super().scalars(step, values)
        self.seconds += time.perf_counter() - started


def seconds_of(function: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds (this process, every thread: the writer's too) of `function()`."""
    started, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - started, time.process_time() - cpu


def measure_pretraining(spec: Any, data: Path, epochs: int, folder: Path) -> dict[str, float]:
    """Steps an epoch, loss points an epoch, median epoch seconds off and on, median writer seconds an epoch."""
    from mscl.train.curves import points_per_epoch
    from mscl.train.pretrain import EPOCH_CURVES, start_training, steps_per_epoch_for, train_epoch, training_loader, validate_inputs
    from mscl.train.runtime import pick_device, resolve_precision, seed_everything
    from mscl.train.spec import pretrain_view

    vocabulary, train = validate_inputs(spec, data)
    device = pick_device()
    generator = seed_everything(spec.seed)
    steps = steps_per_epoch_for(len(train), spec.batch_size, spec.pretrain.max_steps_per_epoch)
    state = start_training(spec, len(vocabulary), steps, generator, device, resolve_precision(spec.pretrain.precision, device))
    loader = training_loader(spec, train, None, generator, device)
    curves = TimedCurves(open_curves(folder, pretrain_view(spec.to_dict()), "pretrain", ()))
    train_epoch(state, loader)  # warm-up: workers start, kernels are chosen
    off, on, writer = [], [], []

    def epoch_with_curves() -> None:
        row = train_epoch(state, loader, curves=curves)
        curves.scalars(state.step, {f"epoch/{key}": float(row[key]) for key in EPOCH_CURVES if row.get(key)} | peak_memory(device))

    for _ in range(epochs):
        off.append(seconds_of(lambda: train_epoch(state, loader)))
        curves.seconds = 0.0
        on.append(seconds_of(epoch_with_curves))
        writer.append(curves.seconds)
    curves.close()
    points = steps // max(1, steps // points_per_epoch())
    medians = {f"{arm}_{kind}": statistics.median(times[i] for times in timed) for arm, timed in (("off", off), ("on", on)) for i, kind in enumerate(("s", "cpu_s"))}
    return {"steps": steps, "points": points, "writer_s": statistics.median(writer), **medians}


def measure_probe(spec: Any, data: Path, folder: Path) -> dict[str, float]:
    """Probe epochs, the fit's seconds off and on, the writer's seconds an epoch."""
    import torch

    from mscl.data.manifest import read_labels
    from mscl.metrics import macro_f1_definition
    from mscl.train.data import load_split
    from mscl.train.probe import train_probe
    from mscl.train.runtime import pick_device

    vocabulary = read_labels(data)
    splits = {name: load_split(data, name, vocabulary, spec.modality) for name in ("train", "val")}
    generator = torch.Generator().manual_seed(0)
    features = {name: torch.randn(len(split), PROBE_FEATURES, generator=generator) for name, split in splits.items()}
    labels = {name: split.labels for name, split in splits.items()}
    device, macro_f1 = pick_device(), macro_f1_definition(spec.dataset, None, spec.dataset_family)
    off_s, off_cpu_s = seconds_of(lambda: train_probe(features, labels, spec.probe, spec.seed, device, macro_f1))
    curves = TimedCurves(open_curves(folder, spec.to_dict(), "probe", ()))
    on_s, on_cpu_s = seconds_of(lambda: train_probe(features, labels, spec.probe, spec.seed, device, macro_f1, curves))
    curves.close()
    return {"epochs": spec.probe.epochs, "off_s": off_s, "on_s": on_s, "off_cpu_s": off_cpu_s, "on_cpu_s": on_cpu_s, "writer_s": curves.seconds / spec.probe.epochs}


def change(result: Mapping[str, float], kind: str) -> str:
    """`result`'s `kind` seconds with curves off and on, and how much more on."""
    off, on = result[f"off_{kind}"], result[f"on_{kind}"]
    return f"{off:.3f} s off, {on:.3f} s on ({100 * (on / off - 1):+.1f}%)"


def main(argv: Sequence[str] | None = None) -> int:
    from mscl.train.spec import load_spec

    args = cli.parse_args("bench curves", argv)
    spec = load_spec(args.spec)
    os.environ[CURVES_ENV] = str(args.points)
    with tempfile.TemporaryDirectory() as folder:
        pretraining = measure_pretraining(spec, args.data, args.epochs, Path(folder) / "pretrain")
        probe = measure_probe(spec, args.data, Path(folder) / "probe")
    steps, epoch, writer = pretraining["steps"], pretraining["on_s"], pretraining["writer_s"]
    print(f"pretraining: {steps} steps an epoch, {pretraining['points']} loss points; medians of {args.epochs} epochs each")
    print(f"  writer calls: {writer * 1e3:.2f} ms an epoch, {writer / steps * 1e6:.0f} us a step, {100 * writer / epoch:.2f}% of the epoch")
    print(f"  epoch: wall {change(pretraining, 's')}; CPU of this process {change(pretraining, 'cpu_s')}")
    fit_epoch = probe["on_s"] / probe["epochs"]
    print(f"probe: {probe['epochs']} epochs on {PROBE_FEATURES}-wide features of the train and val splits' sizes")
    print(f"  writer calls: {probe['writer_s'] * 1e3:.2f} ms an epoch, {100 * probe['writer_s'] / fit_epoch:.1f}% of the epoch ({fit_epoch * 1e3:.1f} ms)")
    print(f"  fit: wall {change(probe, 's')}; CPU {change(probe, 'cpu_s')}")
    return 0
