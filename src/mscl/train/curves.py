"""A training job's curves, as TensorBoard event files in its run folder (docs/watching.md).

    tensorboard --logdir results/runs        # or `make watch`: one run per job folder

What pretraining writes, against the optimisation step:

- `train/loss` and `train/lr`, about $MSCL_TENSORBOARD points an epoch (CURVE_POINTS_PER_EPOCH,
  50, unless the config's `tensorboard.points_per_epoch` says otherwise): each point the mean
  loss of the steps since the last one and the learning rate of its last step; an epoch of
  fewer than twice that many steps gets a point every step;
- once an epoch: `epoch/loss` (the epoch's mean, as train_log.csv), `epoch/lr`,
  `epoch/samples_per_second`, `epoch/seconds`, `epoch/val_map_readout` (when the convergence
  monitor ran) and the peak memory so far: `memory/host_peak_mib` (the training process's peak
  resident memory, loader workers not included) and, on CUDA, `memory/gpu_peak_allocated_mib`
  and `memory/gpu_peak_reserved_mib` (torch's caching allocator).

The probe writes, against its epoch: `probe/train_loss`, `probe/seconds` and `val/<metric>` for
every score of `mscl.metrics.evaluate`; then `test/<metric>` at the epoch the val metric chose,
and `probe/selected_epoch`. Both jobs write their spec as text (`spec`) and their run's axes
and settings as hparams, so that TensorBoard's HPARAMS table has a row per job.

Cost: a step only keeps its loss point on the device (no GPU sync). A pretraining's points are
read (one sync for all of them), handed to the writer's own thread and flushed to disk at the
end of every epoch, and every WRITE_EVERY_S seconds within a long one; a probe's, whose epochs
take milliseconds, every PROBE_HOLD_S (`Curves`). Only rank 0 of a distributed run writes.
$MSCL_TENSORBOARD=0 (`tensorboard.enabled: false`) writes nothing.

Resuming: a run that resumes from a checkpoint after S steps continues the same curve. Its new
event file hides every point past step S (`purge_step`: the points an earlier segment logged
after the checkpoint it resumed from), so no step appears twice. A run that starts from step 0
deletes the folder's event files first: a new curve. The files are no output the workflow
tracks: deleting them, or turning curves on or off, reruns nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from mscl.errors import InputError
from mscl.metrics import is_score
from mscl.train.launch import CURVE_POINTS_PER_EPOCH, CURVES_ENV
from mscl.usage import peak_rss_mib

# How every event file's name starts (tensorboard's EventFileWriter); the next field is the
# second the file was made, which orders a folder's files when TensorBoard reads them.
EVENT_FILE_PREFIX = "events.out.tfevents."
# Seconds between two writes of the loss points buffered within an epoch: a long epoch's curve
# still moves, at the cost of one GPU sync a minute.
WRITE_EVERY_S = 60.0
# Seconds a probe's epoch values wait before they are written out: its epochs take milliseconds
# (the embedded default's 15 ms), and handing each to the writer's thread cost up to a tenth of
# one; a probe never resumes, so nothing needs them on disk sooner.
PROBE_HOLD_S = 1.0
# Events the writer's queue holds before a write waits for its thread: never, at a job's events
# of an epoch (at most a few hundred; a full queue of the default 10 made each write wait).
WRITER_QUEUE = 1000
# The tags the HPARAMS table shows for a job (the last value of each).
PRETRAIN_METRICS = ("epoch/loss", "epoch/val_map_readout")
PROBE_METRICS = ("test/map", "test/micro_f1", "test/macro_f1")
MIB = 2**20


def points_per_epoch(environment: Mapping[str, str] = os.environ) -> int:
    """Loss points an epoch that $MSCL_TENSORBOARD asks for; 0: no curves at all."""
    text = environment.get(CURVES_ENV)
    if text is None:
        return CURVE_POINTS_PER_EPOCH
    if not text.strip().isdigit():
        raise InputError(
            f"${CURVES_ENV}", f"is {text!r}, not a number of points per epoch",
            f"set it to 0 (no curves) or a positive integer, or unset it ({CURVE_POINTS_PER_EPOCH} points an epoch)",
        )  # fmt: skip
    return int(text)


def curve_interval(steps_per_epoch: int, points: int) -> int:
    """Steps between two loss points: `points` an epoch or a few more, every step when an epoch
    has fewer than 2 x `points` steps."""
    return max(1, steps_per_epoch // max(1, points))


def run_settings(spec: Mapping[str, Any], phase: str) -> dict[str, Any]:
    """A job's hparams: its run's axes and encoder kind, its loss options (when any) and every
    key of the spec's `phase` block as `phase.key`; lists and mappings as JSON text (None values
    are left out by TensorBoard)."""
    settings = {
        "dataset": spec["dataset"], "encoder": spec["encoder_name"], "encoder_kind": spec["encoder"]["kind"],
        "loss": spec["loss"], "batch_size": spec["batch_size"], "seed": spec["seed"],
    }  # fmt: skip
    if spec.get("loss_options"):
        settings["loss_options"] = spec["loss_options"]
    settings.update({f"{phase}.{key}": value for key, value in (spec.get(phase) or {}).items()})
    return {key: json.dumps(value, sort_keys=True) if isinstance(value, (list, tuple, dict)) else value for key, value in settings.items()}


def peak_memory(device: torch.device) -> dict[str, float]:
    """The job's peak memory so far, in MiB: host (this process's resident memory) and, on
    CUDA, what torch's allocator allocated and reserved on `device`."""
    peaks = {"memory/host_peak_mib": peak_rss_mib()}
    if device.type == "cuda":
        peaks["memory/gpu_peak_allocated_mib"] = torch.cuda.max_memory_allocated(device) / MIB
        peaks["memory/gpu_peak_reserved_mib"] = torch.cuda.max_memory_reserved(device) / MIB
    return peaks


def score_tags(prefix: str, metrics: Mapping[str, Any]) -> dict[str, float]:
    """`prefix/<metric>` for every score of an `evaluate` result (not the counts or the threshold)."""
    return {f"{prefix}/{name}": float(value) for name, value in metrics.items() if is_score(name)}


class Curves:
    """A job's event files; every method does nothing when it writes none (curves off, or a
    rank other than 0). A context manager: leaving it writes what is buffered and closes.

    Points wait in `pending` (a loss still on its device) until they are written out: the loss
    points of a step loop every WRITE_EVERY_S, an epoch's scalars once `hold_s` has passed since
    the last write (a pretraining's 0: every epoch's end, so that the points up to any
    checkpoint are on disk before a resumed run continues from it; a probe's PROBE_HOLD_S),
    and everything when the job ends. Each write-out reads the losses with one device sync,
    hands one event per step to the writer's thread and flushes the file."""

    def __init__(self, writer: Any = None, hold_s: float = 0.0):
        self.writer = writer  # a torch.utils.tensorboard.SummaryWriter, or None
        self.hold_s = hold_s
        self.pending: list[tuple[int, dict[str, float | Tensor]]] = []  # (step, {tag: value})
        self.written_at = time.monotonic()

    @property
    def on(self) -> bool:
        return self.writer is not None

    def describe(self, spec: Mapping[str, Any], phase: str, metrics: Sequence[str]) -> None:
        """The run's spec as text, and `run_settings` as hparams whose table shows the scalar
        tags `metrics`."""
        if not self.on:
            return
        from torch.utils.tensorboard.summary import hparams

        with self.failures_stop_the_curves():
            self.writer.add_text("spec", "```json\n" + json.dumps(spec, indent=2, sort_keys=True) + "\n```")
            for summary in hparams(run_settings(spec, phase), dict.fromkeys(metrics, 0.0)):  # only the tags count
                self.writer.file_writer.add_summary(summary)
            self.writer.flush()

    def loss(self, step: int, loss: Tensor, lr: float) -> None:
        """A `train/loss` and `train/lr` point at `step` (`loss` stays on its device until written)."""
        if self.on:
            self.pending.append((step, {"train/loss": loss, "train/lr": lr}))
            if time.monotonic() - self.written_at >= WRITE_EVERY_S:
                self.write_out()

    def scalars(self, step: int, values: Mapping[str, float | None]) -> None:
        """`values` at `step` (None: left out), written out with everything pending once
        `hold_s` has passed since the last write."""
        if self.on:
            self.pending.append((step, {tag: value for tag, value in values.items() if value is not None}))
            if time.monotonic() - self.written_at >= self.hold_s:
                self.write_out()

    def write_out(self) -> None:
        """Every pending point to the writer (one event per step: the writer's thread is woken
        once, a tenth of what a `SummaryWriter.add_scalar` per value costs), then flush."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        on_device = [value for _, values in self.pending for value in values.values() if isinstance(value, Tensor)]
        read = iter(torch.stack([value.float() for value in on_device]).tolist() if on_device else [])  # one device sync
        with self.failures_stop_the_curves():
            for step, values in self.pending:
                numbers = {tag: next(read) if isinstance(value, Tensor) else float(value) for tag, value in values.items()}
                self.writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=tag, simple_value=v) for tag, v in numbers.items()]), step)
            self.writer.flush()
        self.pending.clear()
        self.written_at = time.monotonic()

    def close(self) -> None:
        if self.on:
            self.write_out()
        if self.on:  # still: the write-out did not fail
            with self.failures_stop_the_curves():
                self.writer.close()
            self.writer = None

    @contextlib.contextmanager
    def failures_stop_the_curves(self) -> Iterator[None]:
        """The curves are for watching: a write that fails (a full disk, a lost mount) stops them
        with one line on stderr, never the training."""
        try:
            yield
        except OSError as error:
            print(f"TensorBoard curves: stopped, the job goes on without them ({type(error).__name__}: {error})", file=sys.stderr, flush=True)
            broken, self.writer = self.writer, None
            with contextlib.suppress(OSError):
                broken.close()  # its thread's error again, if that was what failed

    def __enter__(self) -> "Curves":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# What a job that writes no curves holds (every method does nothing).
NO_CURVES = Curves()


def open_curves(folder: Path, spec: Mapping[str, Any], phase: str, metrics: Sequence[str], resumed_step: int | None = None) -> Curves:
    """The curves of the `phase` job writing into `folder` (writing nothing when
    $MSCL_TENSORBOARD is 0).

    A job that starts from step 0 (`resumed_step` None) deletes the folder's earlier event
    files and describes itself (`Curves.describe`: `spec`, its hparams and their `metrics`).
    One resumed after `resumed_step` steps continues the earlier files, which describe it: its
    file hides the points of later steps (`purge_step`) and sorts after them
    (`wait_past_earlier_files`)."""
    if points_per_epoch() == 0:
        return Curves()
    from torch.utils.tensorboard import SummaryWriter

    hold_s = PROBE_HOLD_S if phase == "probe" else 0.0
    folder.mkdir(parents=True, exist_ok=True)
    if resumed_step is not None:
        wait_past_earlier_files(folder)
        return Curves(SummaryWriter(str(folder), purge_step=resumed_step + 1, max_queue=WRITER_QUEUE), hold_s)
    for earlier in folder.glob(EVENT_FILE_PREFIX + "*"):
        earlier.unlink()
    curves = Curves(SummaryWriter(str(folder), max_queue=WRITER_QUEUE), hold_s)
    curves.describe(spec, phase, metrics)
    return curves


def wait_past_earlier_files(folder: Path) -> None:
    """Wait (under a second) until the clock is past the second in which the folder's newest
    event file was made. TensorBoard reads a folder's files in name order, and a name starts
    with that second: a resumed segment's file, whose purge must come after the points it
    hides, then sorts after them even when both were made within one second (tests)."""
    seconds = [int(path.name[len(EVENT_FILE_PREFIX) :].split(".")[0]) for path in folder.glob(EVENT_FILE_PREFIX + "*")]
    while seconds and int(time.time()) <= max(seconds):
        time.sleep(0.05)
