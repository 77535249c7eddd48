"""`python -m mscl bench curves`: what the TensorBoard curves cost a pretraining epoch.

    python -m mscl bench curves --data DIR --spec JSON_OR_FILE [--epochs 6] [--points 50]

Trains the spec's model with the pipeline's own `start_training`, `training_loader` and
`train_epoch` on the prepared dataset, epochs alternating between curves off and on (each epoch
of the run, so that a machine's drift falls on both alike), the curves written into a temporary
folder exactly as a job writes them (`mscl.train.curves`: the loss points of the step loop, the
epoch's scalars and peak memory, flushed to disk). It prints:

- the writer's own time, measured directly: the seconds spent inside the curve calls of an epoch
  (`Curves.loss` for every point, `Curves.scalars` at its end: converting the points, handing
  them to the writer's thread, flushing to disk), per epoch, per step and as a share of the
  epoch;
- the median epoch with curves off and on, and their difference (on a shared machine the
  difference is mostly noise; the direct figure is the one to trust).

`--epochs` epochs of each (default 6) after one warm-up epoch; `--points` loss points an epoch
(default 50, the config's default). The step loop's own addition (the loss difference and its
copy at each point) runs on the device and is inside the epoch times only.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from mscl import cli
from mscl.train.curves import Curves, open_curves, peak_memory
from mscl.train.launch import CURVES_ENV


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


def measure(data: Path, spec_text: str, epochs: int, points: int) -> dict[str, float]:
    """Epoch seconds off and on, and the writer's seconds per epoch (module docstring)."""
    from mscl.train.pretrain import EPOCH_CURVES, start_training, steps_per_epoch_for, train_epoch, training_loader, validate_inputs
    from mscl.train.runtime import pick_device, resolve_precision, seed_everything
    from mscl.train.spec import load_spec, pretrain_view

    spec = load_spec(spec_text)
    vocabulary, train = validate_inputs(spec, data)
    device = pick_device()
    generator = seed_everything(spec.seed)
    steps = steps_per_epoch_for(len(train), spec.batch_size, spec.pretrain.max_steps_per_epoch)
    state = start_training(spec, len(vocabulary), steps, generator, device, resolve_precision(spec.pretrain.precision, device))
    loader = training_loader(spec, train, None, generator, device)
    os.environ[CURVES_ENV] = str(points)
    off, on, writer = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        curves = TimedCurves(open_curves(Path(folder), pretrain_view(spec.to_dict()), "pretrain", ()))
        train_epoch(state, loader)  # warm-up: workers start, kernels are chosen
        for _ in range(epochs):
            started = time.perf_counter()
            train_epoch(state, loader)
            off.append(time.perf_counter() - started)
            curves.seconds = 0.0
            started = time.perf_counter()
            row = train_epoch(state, loader, curves=curves)
            curves.scalars(state.step, {f"epoch/{key}": float(row[key]) for key in EPOCH_CURVES if row.get(key)} | peak_memory(device))
            on.append(time.perf_counter() - started)
            writer.append(curves.seconds)
        curves.close()
    return {"steps": steps, "points": steps // max(1, steps // points), "off_s": statistics.median(off), "on_s": statistics.median(on), "writer_s": statistics.median(writer)}


def main(argv: Sequence[str] | None = None) -> int:
    args = cli.parse_args("bench curves", argv)
    result = measure(args.data, args.spec, args.epochs, args.points)
    steps, epoch = result["steps"], result["on_s"]
    print(f"bench curves: {steps} steps an epoch, {result['points']} loss points; medians of {args.epochs} epochs each", file=sys.stderr)
    print(f"writer calls: {result['writer_s'] * 1e3:.2f} ms an epoch, {result['writer_s'] / steps * 1e6:.1f} us a step, "
          f"{100 * result['writer_s'] / epoch:.3f}% of the epoch")  # fmt: skip
    print(f"epoch: {result['off_s']:.3f} s with curves off, {epoch:.3f} s on ({100 * (epoch / result['off_s'] - 1):+.2f}%, mostly noise on a shared machine)")
    return 0
