"""Data-parallel pretraining (DDP): N processes train one model on one global batch.

`python -m mscl pretrain` started by torchrun (`python -m torch.distributed.run --standalone
--nproc_per_node N -m mscl pretrain ...`, what the workflow runs for an encoder with
`resources.gpu: N > 1`) finds its rank in torchrun's environment (`Ranks.from_environment`)
and takes part in one run; started any other way it is the one process of a run, exactly as
before. What makes the N processes one run:

- **The batch.** `batch_size` stays the global batch; every rank loads a contiguous slice of
  batch_size / N samples of it (`mscl.train.data.RankSlices`), so the global batch of step s
  is the single-process batch of step s, in the same order, at any N.
- **The loss.** Every rank gathers the two-view projections of all ranks (`gather_features`,
  differentiable) and their CSR label rows (`gather_labels`, in the same rank order), and
  computes the loss of the whole global batch, as one process would on the concatenated
  batch. Gradients: the gather's backward sums, over ranks, the gradient each rank's
  (identical) loss sends to a rank's features, i.e. N times dL/dz_r; DDP then averages the
  parameter gradients over the N ranks, which gives exactly dL/dtheta of the single process.
  Loss parameters (prototypes) are inside the DDP module and averaged too.
- **Random streams.** Every rank seeds the run's seed before the model is built (identical
  initial weights) and shuffles with the same generator (identical global batches); then
  ranks 1..N-1 reseed their global RNGs (`seed_rank`), so that their colour jitter, masks and
  dropout differ from rank 0's instead of repeating them sample for sample. Image crops come
  from per-sample seeds the shared generator draws (`mscl.train.data.SeededViews`), so every
  sample is cropped as in one process.

A rank that hangs instead of dying (a stopped process, a stuck data loader, an endless loop)
would leave the others waiting in a collective. Every rank runs a `Watchdog`: it publishes
where its rank is (its epoch and step, as it reaches each point, and a heartbeat every tick)
in torchrun's key-value store, which
torchrun's agent serves and so answers while any rank hangs, reads the other ranks' places,
and ends the run with a message naming the rank(s) that hold it up once one has been waited
for $MSCL_DDP_TIMEOUT_S seconds (`mscl.train.launch`). PyTorch's own collective timeout is set
a little longer, for what the watchdog cannot diagnose. It does not rely on that timeout
reaching Python: under NCCL a timed-out collective aborts the process from NCCL's watchdog.

"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from mscl.errors import InputError
from mscl.train.launch import DDP_RANK0_TIMEOUT_ENV, DDP_RANK0_TIMEOUT_S, DDP_TIMEOUT_ENV, DDP_TIMEOUT_S, RANK_VARIABLES

# Seconds a collective may run beyond the watchdog's limit before PyTorch ends it (gloo raises,
# NCCL's watchdog aborts the process): long enough for the watchdog to act first and name the
# rank that holds the run up; what it cannot diagnose (every rank at the same step and
# responding, e.g. a deadlocked collective) this timeout ends.
COLLECTIVE_MARGIN_S = 60.0
# A rank's exit status when its watchdog stops the run (as coreutils' `timeout`).
EXIT_HUNG = 124
# Seconds a watchdog waits for an answer from torchrun's store (served by torchrun's agent
# process on this node, so an answer takes milliseconds unless the agent itself is gone).
STORE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run: rank, number of processes, rank on this node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_environment(cls) -> "Ranks":
        """torchrun's RANK, WORLD_SIZE and LOCAL_RANK; one process when they are not set."""
        if not any(name in os.environ for name in RANK_VARIABLES):
            return cls()
        try:
            values = [int(os.environ[name]) for name in RANK_VARIABLES]
        except (KeyError, ValueError):
            shown = {name: os.environ.get(name) for name in RANK_VARIABLES}
            raise InputError(
                "environment", f"incomplete or non-integer distributed variables {shown}",
                "launch with torchrun (`python -m torch.distributed.run --nproc_per_node N -m mscl pretrain ...`), "
                "or unset RANK, WORLD_SIZE and LOCAL_RANK for one process",
            ) from None  # fmt: skip
        return cls(*values)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def main(self) -> bool:
        """Rank 0: the one that writes the run's files and its log."""
        return self.rank == 0

    def barrier(self) -> None:
        if self.distributed:
            torch.distributed.barrier()


def local_batch_size(batch_size: int, world_size: int) -> int:
    """batch_size / world_size: every rank's share of the global batch (a ValueError unless it
    divides evenly, since unequal shares would weight the ranks' gradients unequally)."""
    if batch_size % world_size:
        lower, upper = batch_size - batch_size % world_size, batch_size + world_size - batch_size % world_size
        raise ValueError(
            f"batch_size {batch_size} is the global batch and does not split evenly over {world_size} processes; "
            f"use a multiple of {world_size} (e.g. {lower or upper} or {upper}), or another number of processes"
        )
    return batch_size // world_size


@dataclass(frozen=True)
class Limits:
    """How long (seconds) the ranks of a run wait for one another."""

    rank_s: float = DDP_TIMEOUT_S  # for a rank behind the others, or without a sign of life
    rank0_alone_s: float = DDP_RANK0_TIMEOUT_S  # for rank 0's work alone, while it responds

    @classmethod
    def from_environment(cls) -> "Limits":
        """$MSCL_DDP_TIMEOUT_S and $MSCL_DDP_RANK0_TIMEOUT_S, each defaulting to its constant."""
        values = []
        for name, default in ((DDP_TIMEOUT_ENV, DDP_TIMEOUT_S), (DDP_RANK0_TIMEOUT_ENV, DDP_RANK0_TIMEOUT_S)):
            text = os.environ.get(name, "")
            try:
                value = float(text) if text else default
            except ValueError:
                value = float("nan")
            if not value > 0:  # also NaN
                raise InputError(
                    "environment", f"{name}={text!r} is not a number of seconds > 0",
                    f"set {name} to seconds (default {default:g}), or unset it",
                )  # fmt: skip
            values.append(value)
        return cls(*values)

    @property
    def collective(self) -> timedelta:
        """PyTorch's timeout for one collective: a little longer than the watchdog's limit."""
        return timedelta(seconds=self.rank_s + COLLECTIVE_MARGIN_S)


def start(ranks: Ranks, limits: Limits = Limits()) -> torch.device:
    """Join the process group (NCCL on CUDA, one GPU per local rank; gloo on CPU), with
    `limits.collective` as the collective timeout, and return this rank's device.

    That timeout no longer covers rank 0's work alone (checkpoints, the convergence monitor,
    minutes for a large model): the other ranks wait for it in the store, outside any
    collective (`Watchdog.rank0_alone`)."""
    if torch.cuda.is_available():
        visible = torch.cuda.device_count()
        if ranks.local_rank >= visible:
            raise InputError(
                "torchrun", f"local rank {ranks.local_rank} needs GPU {ranks.local_rank}, but this node shows {visible} GPU(s)",
                "start as many processes per node as the job has GPUs (encoders.<name>.resources.gpu sets both in the workflow)",
            )  # fmt: skip
        device = torch.device("cuda", ranks.local_rank)
        torch.cuda.set_device(device)
        torch.distributed.init_process_group("nccl", timeout=limits.collective, device_id=device)
        return device
    torch.distributed.init_process_group("gloo", timeout=limits.collective)
    return torch.device("cpu")


def stop(ranks: Ranks) -> None:
    if ranks.distributed and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def seed_rank(seed: int, rank: int) -> None:
    """Give rank `rank` its own python, numpy and torch streams, derived from (seed, rank).
    Rank 0 keeps the run's seed: a one-process run is rank 0 of one."""
    if rank == 0:
        return
    derived = int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])
    random.seed(derived)
    np.random.seed(derived)
    torch.manual_seed(derived)


class _GatherWithGradient(torch.autograd.Function):
    """all_gather whose backward returns to each rank the gradient of its own part, summed over
    the ranks (every rank's loss depends on every part), by an all-reduce of the whole gradient
    (a few MB: B x 2 x D), which every backend has.

    Not torch.distributed.nn.functional.all_gather: besides being deprecated, its gloo backward
    is wrong when the gradient reaching the gather is not contiguous, which the losses' view-
    major transpose makes it (torch 2.15: it allocates the receive buffers with the gradient's
    strides and scatters contiguous data into them; a 2-rank Sim-Dissim gradient was off by up
    to 3.4, where this gather matches one process to 1e-12)."""

    @staticmethod
    def forward(ctx, local: Tensor, group: object) -> Tensor:
        ctx.group, ctx.rows = group, len(local)
        parts = [torch.empty_like(local) for _ in range(torch.distributed.get_world_size(group))]
        torch.distributed.all_gather(parts, local.contiguous(), group=group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, gradient: Tensor) -> tuple[Tensor, None]:
        total = gradient.contiguous().clone()
        torch.distributed.all_reduce(total, group=ctx.group)
        start = torch.distributed.get_rank(ctx.group) * ctx.rows
        return total[start : start + ctx.rows], None


def gather_features(features: Tensor, group: object = None) -> Tensor:
    """Every rank's features [b, ...] concatenated in rank order [N*b, ...]; differentiable:
    each rank's part gets back the gradient of every rank's loss with respect to it."""
    return _GatherWithGradient.apply(features, group)


def gather_labels(labels: Tensor, group: object = None) -> Tensor:
    """Every rank's sparse CSR label rows [b, L] as one CSR [N*b, L], in rank order (the order
    of `gather_features`). Ranks hold different numbers of label ids, so the ids are padded to
    the longest rank's count for the gather and cut back after it."""
    if labels.layout != torch.sparse_csr:
        raise ValueError(f"gather_labels takes sparse CSR labels (mscl.losses.csr_labels), got layout {labels.layout}")
    world_size = torch.distributed.get_world_size(group)
    crow, columns, values = labels.crow_indices(), labels.col_indices(), labels.values()
    # Per rank: its rows' lengths and its number of ids, in one gather.
    sizes = torch.cat([crow[1:] - crow[:-1], crow[-1:]])
    gathered_sizes = torch.empty(world_size * len(sizes), dtype=sizes.dtype, device=sizes.device)
    torch.distributed.all_gather_into_tensor(gathered_sizes, sizes, group=group)
    gathered_sizes = gathered_sizes.view(world_size, -1)
    lengths, counts = gathered_sizes[:, :-1].reshape(-1), gathered_sizes[:, -1].tolist()
    longest = max(max(counts), 1)  # at least one slot: a global batch without any label still gathers
    parts = []
    for tensor in (columns, values):
        padded = torch.zeros(longest, dtype=tensor.dtype, device=tensor.device)
        padded[: len(tensor)] = tensor
        gathered = torch.empty(world_size * longest, dtype=tensor.dtype, device=tensor.device)
        torch.distributed.all_gather_into_tensor(gathered, padded, group=group)
        parts.append(torch.cat([gathered[rank * longest : rank * longest + count] for rank, count in enumerate(counts)]))
    all_crow = torch.zeros(len(lengths) + 1, dtype=crow.dtype, device=crow.device)
    all_crow[1:] = torch.cumsum(lengths, 0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")  # as in csr_labels
        return torch.sparse_csr_tensor(all_crow, parts[0], parts[1], size=(len(lengths), labels.shape[1]), check_invariants=False)


def gather_objects(value: object, ranks: Ranks) -> list[object] | None:
    """Every rank's `value`, in rank order, on rank 0 (None on the others)."""
    gathered = [None] * ranks.world_size if ranks.main else None
    torch.distributed.gather_object(value, gathered, dst=0)
    return gathered


def mean_over_ranks(value: Tensor) -> Tensor:
    """The mean of a scalar over the ranks (the same on every rank)."""
    total = value.detach().clone()
    torch.distributed.all_reduce(total)
    return total / torch.distributed.get_world_size()


def decided_by_rank0(flag: bool, device: torch.device) -> bool:
    """Rank 0's `flag` on every rank: a decision all ranks must take alike (checkpoint now?)
    made by rank 0's clock."""
    value = torch.tensor([int(flag)], device=device)
    torch.distributed.broadcast(value, src=0)
    return bool(value.item())


# ---------------------------------------------------------------------------- watchdog


@dataclass(frozen=True)
class Published:
    """What a rank's watchdog writes to the store at every tick and at every point reached."""

    beat: int  # ticks so far: moves while the process runs and no code holds Python's lock
    count: int  # points reached so far; every rank passes the same points in the same order
    at: str  # the last point other than a step: "start-up", "epoch 2's checkpoint"; "" at a step
    epoch: int  # the epoch the rank is in (the last finished one before its first step)
    step: int  # optimisation steps of the run begun so far (resumed ones included)
    finished: bool  # the rank has left the run normally
    pid: int
    host: str

    @property
    def place(self) -> str:
        """Where the rank is, for messages: "epoch 4, step 301", "epoch 3's checkpoint (epoch 3,
        step 300)", "start-up" (before anything, in a run that did not resume)."""
        if not self.at:
            return f"epoch {self.epoch}, step {self.step}"
        return f"{self.at} (epoch {self.epoch}, step {self.step})" if self.epoch or self.step else self.at


@dataclass(frozen=True)
class RankView:
    """A rank as one watchdog sees it, in seconds of that watchdog's clock."""

    at: str  # its place (`Published.place`)
    count: int
    at_for_s: float  # since it was first seen at this point
    silent_for_s: float  # since its heartbeat last moved
    finished: bool = False


def hung_ranks(views: Mapping[int, RankView], me: int, limit_s: float) -> dict[int, str]:
    """The ranks that hold the run up, each with what it failed to do (empty: none).

    A rank holds the run up when its heartbeat has not moved for `limit_s` (a stopped process,
    or one stuck in code that holds Python's lock), wherever it is, or when the furthest ranks
    have waited `limit_s` at a point it has not reached. Its place is the last one it
    published: each point as the rank reaches it. Not suspects: ranks that left the run normally, and this
    rank (`me`) for its heartbeat, which is running. Ranks that all stand at one point and
    respond are not diagnosed: each may be working (a long start-up), and a collective that
    hangs there ends by PyTorch's timeout."""
    furthest = max(view.count for view in views.values())
    leaders = [view for view in views.values() if view.count == furthest]
    waited_s = max(view.at_for_s for view in leaders)
    hung = {}
    for rank, view in sorted(views.items()):
        if view.finished:
            continue
        if rank != me and view.silent_for_s >= limit_s:
            hung[rank] = f"rank {rank} stopped responding (no sign of life for {view.silent_for_s:.1f} s; last seen at {view.at})"
        elif view.count < furthest and waited_s >= limit_s:
            hung[rank] = f"rank {rank} did not reach {leaders[0].at} within {limit_s:g} s (last seen at {view.at})"
    return hung


def stop_the_run(message: str, silent: Sequence[Published]) -> None:
    """A watchdog's way out: print `message` to the job's log, SIGKILL the ranks without a sign
    of life, and end this process with EXIT_HUNG; torchrun then ends the other ranks.

    os._exit, not sys.exit: this runs in the watchdog's thread, while the main thread may be
    blocked in a collective. The silent ranks are killed here because a stopped or frozen
    process cannot act on the SIGTERM torchrun sends first, and when a worker fails torchrun
    waits 30 s before its SIGKILL (fixed in torch 2.15: --shutdown-timeout does not apply)."""
    print(message, file=sys.stderr, flush=True)
    for rank in silent:
        kill_sibling(rank.pid, rank.host)
    os._exit(EXIT_HUNG)


def kill_sibling(pid: int, host: str) -> None:
    """SIGKILL process `pid` and its children (DataLoader workers) if it is another rank of
    this run: on this host and a child of this process's parent (torchrun's agent)."""
    import psutil  # a Snakemake dependency, as in mscl.interrupt

    if host != socket.gethostname() or pid == os.getpid():
        return
    try:
        rank = psutil.Process(pid)
        if rank.ppid() != os.getppid():
            return
        processes = rank.children(recursive=True) + [rank]
    except psutil.NoSuchProcess:
        return
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


Failure = Callable[[str, Sequence[Published]], None]


class Watchdog:
    """One rank's watch over a distributed run (module docstring); `watch` starts and stops it.

    The training loop says where the rank is (`reached`) and wraps rank 0's work alone in
    `rank0_alone`. A thread publishes this rank's place and heartbeat in `store` every `tick_s`
    seconds and reads the other ranks'; once `hung_ranks` names a rank, it calls
    `fail(message, published states of the named ranks without a sign of life)`:
    `stop_the_run` unless a test passes another."""

    def __init__(self, ranks: Ranks, store: torch.distributed.Store, limits: Limits, fail: Failure = stop_the_run):
        self.ranks, self.limits, self.fail = ranks, limits, fail
        # The thread has a connection of its own: a connection serves one request at a time.
        self.store, self._thread_store = store, store.clone()
        self.tick_s = min(1.0, limits.rank_s / 10)
        # (count, at, epoch, step): replaced whole by the main thread, read by the thread
        self.point = (0, "start-up", 0, 0)
        self.finished = False
        # One writer of this rank's key at a time, so that a tick's write of an older point
        # cannot land after the main thread's write of a newer one.
        self._publishing = threading.Lock()
        self._beat = 0
        self._rank0_works = 0  # rank0_alone blocks entered so far
        # Per rank: its last published state (None: none yet) and the times (time.monotonic())
        # at which its heartbeat and its count last changed.
        self._seen: dict[int, tuple[Published | None, float, float]] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="mscl-ddp-watchdog", daemon=True)

    def start(self) -> None:
        now = time.monotonic()
        self._seen = {rank: (None, now, now) for rank in range(self.ranks.world_size)}
        self._thread.start()

    def stop(self, finished: bool) -> None:
        """Stop watching; `finished`: this rank leaves the run normally, which the others see
        (a finished rank is no suspect, e.g. while rank 0 alone writes the final files)."""
        self._stopping.set()
        self._thread.join()
        self.finished = finished
        try:
            self._publish(self._thread_store)
        except torch.distributed.DistError:
            pass  # the store is gone (the process that served it has ended): nobody is watching

    def reached(self, at: str) -> None:
        """This rank got to point `at` (in its current epoch and step). Every rank passes the
        same points in the same order."""
        count, _, epoch, step = self.point
        self._move((count + 1, at, epoch, step))

    def stepped(self, epoch: int, step: int) -> None:
        """This rank begins step `step` of the run, in epoch `epoch`: a point, like `reached`."""
        self._move((self.point[0] + 1, "", epoch, step))

    def resumed(self, epoch: int, step: int) -> None:
        """This rank resumes a run after `epoch` epochs and `step` steps: where it is, not a point."""
        count, at, _, _ = self.point
        self._move((count, at, epoch, step))

    def _move(self, point: tuple[int, str, int, int]) -> None:
        """Take the new point and publish it at once, from this (the main) thread: a rank that
        stops right after is named where it stopped, not where the last tick found it."""
        self.point = point
        try:
            self._publish(self.store)
        except torch.distributed.DistError:
            pass  # the store is gone with torchrun's agent, which ends the job itself

    @contextmanager
    def rank0_alone(self, what: str) -> Iterator[None]:
        """Rank 0 does `what` alone in the body (writes files, runs the convergence monitor);
        every rank enters, and the others wait at the end until rank 0 is done.

        They wait in the store, not in a collective, whose timeout is set for a step: rank 0's
        work may take minutes (a large model's monitor). They wait as long as rank 0 responds,
        up to limits.rank0_alone_s; a rank 0 without a sign of life for limits.rank_s is caught
        by the watchdog's thread. The wait polls, pausing 1 ms, then twice as long each time up
        to a tick: a short piece of work costs the others little, and torchrun's SIGTERM ends
        a sleep at once, where it would wait for a blocking store.wait to return."""
        self.reached(what)
        self._rank0_works += 1
        done = f"rank 0 done {self._rank0_works}"
        yield
        if self.ranks.main:
            self.store.set(done, "")
            return
        deadline, pause = time.monotonic() + self.limits.rank0_alone_s, 0.001
        while not self.store.check([done]):
            if time.monotonic() > deadline:
                limit = self.limits.rank0_alone_s
                self.fail(
                    f"pretrain: rank 0 did not finish {what} within {limit:g} s, although it responds; stopping the run "
                    f"(rank {self.ranks.rank}'s watchdog, {DDP_RANK0_TIMEOUT_ENV}={limit:g})",
                    [],
                )
                return
            time.sleep(pause)
            pause = min(2 * pause, self.tick_s)

    def _publish(self, store: torch.distributed.Store) -> None:
        """Write this rank's state through `store`: the thread's connection or the main
        thread's (a connection serves one request at a time)."""
        with self._publishing:
            count, at, epoch, step = self.point
            state = Published(self._beat, count, at, epoch, step, self.finished, os.getpid(), socket.gethostname())
            store.set(f"rank {self.ranks.rank}", json.dumps(asdict(state)))

    def _views(self) -> dict[int, RankView]:
        """Every rank's place as published, and for how long it has not changed."""
        now, views = time.monotonic(), {}
        for rank, (old, beat_since, count_since) in self._seen.items():
            key = f"rank {rank}"
            new = Published(**json.loads(self._thread_store.get(key))) if self._thread_store.check([key]) else old
            if new is not None and (old is None or new.beat != old.beat):
                beat_since = now
            if new is not None and (old is None or new.count != old.count):
                count_since = now
            self._seen[rank] = (new, beat_since, count_since)
            views[rank] = RankView(new.place, new.count, now - count_since, now - beat_since, new.finished) if new else RankView("start-up", 0, now - count_since, now - beat_since)
        return views

    def _watch(self) -> None:
        while not self._stopping.wait(self.tick_s):
            try:
                self._beat += 1
                self._publish(self._thread_store)
                views = self._views()
            except torch.distributed.DistError:
                continue  # the store is gone with torchrun's agent, which ends the job itself
            hung = hung_ranks(views, self.ranks.rank, self.limits.rank_s)
            if hung:
                silent = [self._seen[rank][0] for rank in hung if rank != self.ranks.rank and views[rank].silent_for_s >= self.limits.rank_s]
                message = (
                    f"pretrain: {'; '.join(hung.values())}; stopping the run "
                    f"(rank {self.ranks.rank}'s watchdog, {DDP_TIMEOUT_ENV}={self.limits.rank_s:g})"
                )  # fmt: skip
                self.fail(message, [state for state in silent if state is not None])
                return


class Unwatched:
    """A one-process run's stand-in for a Watchdog: nobody to wait for."""

    def reached(self, at: str) -> None:
        pass

    def stepped(self, epoch: int, step: int) -> None:
        pass

    def resumed(self, epoch: int, step: int) -> None:
        pass

    @contextmanager
    def rank0_alone(self, what: str) -> Iterator[None]:
        yield


UNWATCHED = Unwatched()


def agent_store() -> torch.distributed.Store:
    """A connection to the store of this run's rendezvous (MASTER_ADDR:MASTER_PORT, set by
    torchrun), in a namespace of the watchdog's own. Under torchrun that store is served by
    torchrun's agent process, not by rank 0, so it answers while any rank hangs."""
    store = torch.distributed.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=STORE_TIMEOUT_S)
    )
    # A worker group that torchrun restarts (--max-restarts) finds the old group's keys there.
    return torch.distributed.PrefixStore(f"mscl-watchdog/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/", store)


@contextmanager
def watch(ranks: Ranks, limits: Limits) -> Iterator[Watchdog | Unwatched]:
    """A running Watchdog for a distributed run, stopped on the way out (`finished` unless
    the body raised); a one-process run gets UNWATCHED."""
    if not ranks.distributed:
        yield UNWATCHED
        return
    watchdog = Watchdog(ranks, agent_store(), limits)
    watchdog.start()
    finished = False
    try:
        yield watchdog
        finished = True
    finally:
        watchdog.stop(finished)
