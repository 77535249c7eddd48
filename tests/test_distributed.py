"""Distributed pretraining (DDP, `mscl.train.distributed`), on CPU processes with gloo.

- Every loss, computed on a global batch gathered over 2 and over 3 processes, equals one
  process's loss on the concatenated batch: the loss value and, after DDP's averaging, the
  gradient of every parameter (prototypes included), in float64. The batch has uneven label
  cardinality over the ranks (0 to 4 labels a sample) and anchors without a positive (empty
  label sets).
- `python -m torch.distributed.run --nproc_per_node 2 -m mscl pretrain` (the workflow's command)
  gives the weights of one process at the same global batch, and a DDP run stopped after its
  first epoch and resumed equals an uninterrupted one bit for bit.
- A rank that hangs: the watchdog's diagnosis on made-up views; two watchdogs over one store
  (a rank whose heartbeat stops is named, rank 0's work alone keeps the others waiting while
  it responds, up to its own limit); and under torchrun, a rank stopped (SIGSTOP) mid-run
  fails the job within MSCL_DDP_TIMEOUT_S with a message naming it.
- `none` under torchrun: rank 0 saves the initial encoder alone, the other ranks exit.

All test names carry `distributed` or `ddp`: `pytest -k "ddp or distributed"` runs them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_curves import read_curves
from torch import nn

from mscl.train.curves import EVENT_FILE_PREFIX

LOSSES = ("all", "any", "mulsupcon", "jaccard", "sim", "dissim", "simdissim", "eq12", "proto", "msc", "bce")
BATCH, FEATURES, DIM, NUM_LABELS = 12, 5, 4, 7  # 12 samples split over 2 and over 3 ranks
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------ losses on a gathered batch


def global_batch() -> tuple[torch.Tensor, list[list[int]]]:
    """Two views of 12 samples (float64 inputs) and label sets of 0 to 4 labels: rank slices
    hold different numbers of label ids, and the empty sets (samples 3 and 10, on different
    ranks) are anchors without any positive."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(BATCH, 2, FEATURES, generator=generator, dtype=torch.float64)
    labels = [[0, 1, 2, 3], [0], [1, 4], [], [2, 5, 6], [0, 1], [6], [3, 4, 5, 6], [1], [0, 2], [], [5]]
    return inputs, labels


class Projection(nn.Module):
    """A linear map to unit vectors (or, for bce, to per-label logits) and the loss, as one
    module the way `mscl.train.pretrain.ContrastiveStep` holds them, so that DDP averages the
    gradients of both (the prototypes of proto and msc)."""

    def __init__(self, loss: str, group: object = None, gather: bool = False):
        super().__init__()
        from mscl.losses import SupervisedBCE, make_loss

        torch.manual_seed(1)  # the same parameters in every process
        width = NUM_LABELS if loss == "bce" else DIM
        self.linear = nn.Linear(FEATURES, width, dtype=torch.float64)
        options = {"num_labels": NUM_LABELS, "dim": DIM} if loss in ("proto", "msc") else {}
        self.loss = SupervisedBCE() if loss == "bce" else make_loss(loss, **options).double()
        self.is_bce, self.group, self.gather = loss == "bce", group, gather

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        from mscl.train.distributed import gather_features, gather_labels

        outputs = self.linear(inputs)
        features = outputs if self.is_bce else nn.functional.normalize(outputs, dim=-1)
        if self.gather:
            features, labels = gather_features(features, self.group), gather_labels(labels, self.group)
        return self.loss(features, labels)


def one_process(loss: str) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradients of one process on the whole batch."""
    from mscl.losses import csr_labels

    inputs, labels = global_batch()
    model = Projection(loss)
    value = model(inputs, csr_labels(labels, NUM_LABELS))
    value.backward()
    return value.item(), {name: parameter.grad for name, parameter in model.named_parameters()}


def check_rank(loss: str, rank: int, world_size: int, group: object) -> None:
    """This rank's slice through DDP: the loss (every rank's is the global batch's; bce's local
    means average to it) and the averaged gradients equal one process's."""
    from torch.nn.parallel import DistributedDataParallel

    from mscl.losses import csr_labels

    expected_loss, expected_gradients = one_process(loss)
    inputs, labels = global_batch()
    size = BATCH // world_size
    rows = slice(rank * size, (rank + 1) * size)
    model = Projection(loss, group, gather=loss != "bce")  # bce is not gathered, as in pretrain
    ddp = DistributedDataParallel(model, process_group=group)
    value = ddp(inputs[rows], csr_labels(labels[rows], NUM_LABELS))
    value.backward()
    if loss == "bce":
        value = value.detach().clone()
        torch.distributed.all_reduce(value, group=group)
        value /= world_size
    torch.testing.assert_close(value.item(), expected_loss, rtol=1e-12, atol=0, msg=f"{loss}, {world_size} ranks: loss")
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(parameter.grad, expected_gradients[name], rtol=1e-12, atol=1e-13, msg=lambda m: f"{loss}, {world_size} ranks, {name}: {m}")


def loss_ranks(index: int, store: str) -> None:
    """One of 3 gloo processes: every loss over all 3 ranks, then over ranks 0 and 1 (a
    subgroup, so that one set of processes checks both sizes)."""
    # A short timeout: a rank that fails leaves the others waiting in a collective.
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=index, world_size=3, timeout=timedelta(minutes=2))
    try:
        pair = torch.distributed.new_group([0, 1])  # every rank takes part in creating it
        for loss in LOSSES:
            check_rank(loss, index, 3, None)
            if index < 2:
                check_rank(loss, index, 2, pair)
    finally:
        torch.distributed.destroy_process_group()


def test_distributed_losses_and_gradients_equal_one_process_on_the_concatenated_batch(tmp_path: Path) -> None:
    # Spawned, not forked: a fork of this process, whose other threads (torch's pool, tqdm's
    # monitor) may hold a lock at that moment, hung in its first torch op on a CI machine.
    torch.multiprocessing.start_processes(loss_ranks, args=(str(tmp_path / "store"),), nprocs=3, join=True, start_method="spawn")


# --------------------------------------------------------------- pretrain under torchrun

# An MLP without dropout and views without masking: nothing random reaches the weights, so 2
# processes at the global batch of 16 train exactly what one process trains (msc: prototypes too).
DDP_SPEC = {
    "dataset": "yeast", "encoder_name": "mlp", "encoder": {"kind": "mlp", "input_dim": 6, "hidden_dims": [16, 8], "dropout": 0.0},
    "loss": "msc", "batch_size": 16, "seed": 3,
    "pretrain": {"epochs": 2, "max_steps_per_epoch": 1, "projection_dim": 8, "feature_mask_rate": 0.0},
}  # fmt: skip
# Measured: bit-identical weights and optimiser state on a 2-core AVX-512 machine (torch 2.15,
# 1 or 2 threads a process). The tolerance leaves room for reductions that another BLAS or thread
# count splits differently between one batch of 16 and two of 8 (docs/training.md).
WEIGHT_TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(scope="module")
def tabular_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64/16/16 samples of 6 features and 0-3 of 5 labels (uneven label counts per rank)."""
    from mscl.data.manifest import write_dataset

    names = ["l0", "l1", "l2", "l3", "l4"]
    rng = np.random.default_rng(0)
    splits = {}
    for split, size in (("train", 64), ("val", 16), ("test", 16)):
        rows = []
        for i, features in enumerate(rng.normal(size=(size, 6)).astype(np.float32)):
            labels = sorted(rng.choice(5, size=rng.integers(0, 4), replace=False).tolist())
            rows.append({"id": f"{split}{i}", "features": features.tolist(), "labels": [names[k] for k in labels]})
        splits[split] = pd.DataFrame(rows)
    out = tmp_path_factory.mktemp("ddp") / "data"
    write_dataset(out, splits, labels=names, info={})
    return out


def torchrun(data: Path, out: Path, *extra: str, spec: dict = DDP_SPEC, environment: dict[str, str] | None = None) -> subprocess.Popen:
    """The workflow's command for a 2-GPU encoder, on CPU (gloo), one thread a process."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "mscl", "pretrain",
        "--data", str(data), "--spec", json.dumps(spec), "--out", str(out), *extra,
    ]  # fmt: skip
    # This checkout's mscl first, as the workflow puts it (mscl.jobserver.run_jobs_from).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])), OMP_NUM_THREADS="1")
    return subprocess.Popen(command, env={**env, **(environment or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen) -> str:
    """Its output once it has exited (torchrun exits 1 when its ranks exit 3 by --stop-after-epoch)."""
    output = process.communicate(timeout=300)[0]
    assert "stopped after epoch" in output, output[-3000:]
    return output


def assert_equal_state(left: object, right: object, where: str = "checkpoint") -> None:
    """Bit-identical tensors and equal plain values, recursively."""
    if isinstance(left, torch.Tensor):
        assert torch.equal(left, right), where
    elif isinstance(left, dict):
        assert left.keys() == right.keys(), where
        for key in left:
            assert_equal_state(left[key], right[key], f"{where}.{key}")
    elif isinstance(left, (list, tuple)):
        assert len(left) == len(right), where
        for index, (a, b) in enumerate(zip(left, right)):
            assert_equal_state(a, b, f"{where}[{index}]")
    else:
        assert left == right, where


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pretrain_rank(index: int, argv: list[str], port: int, expected_exit: int) -> None:
    """Rank `index` of 2, spawned by the test process, with torchrun's variables: what
    `python -m mscl pretrain` does under torchrun."""
    from mscl.train.pretrain import main

    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # as torchrun's ranks (OMP_NUM_THREADS=1)
    assert main(argv) == expected_exit


def spawned_ddp_run(data: Path, out: Path, stop_after_epoch: int) -> None:
    argv = ["--data", str(data), "--spec", json.dumps(DDP_SPEC), "--out", str(out), "--stop-after-epoch", str(stop_after_epoch)]
    from mscl.train.pretrain import EXIT_STOPPED

    torch.multiprocessing.start_processes(pretrain_rank, args=(argv, free_port(), EXIT_STOPPED), nprocs=2, start_method="spawn")


@pytest.mark.slow
def test_ddp_pretrain_under_torchrun_equals_one_process_at_the_same_global_batch(tabular_manifest: Path, tmp_path: Path) -> None:
    """Two steps (2 epochs of 1) on 2 processes under torchrun, the workflow's command, and in
    one process: the same weights, optimiser moments and losses; rank 0 alone wrote the run."""
    from mscl.__main__ import main as mscl_main
    from mscl.train.pretrain import EXIT_STOPPED

    ddp, single = tmp_path / "ddp", tmp_path / "single"
    launched = torchrun(tabular_manifest, ddp, "--stop-after-epoch", "2")
    arguments = ["--data", str(tabular_manifest), "--spec", json.dumps(DDP_SPEC), "--out", str(single), "--stop-after-epoch", "2"]
    assert mscl_main(["pretrain", *arguments]) == EXIT_STOPPED  # meanwhile, in this process
    output = finish(launched)

    assert sorted(path.name for path in ddp.iterdir() if not path.name.startswith(EVENT_FILE_PREFIX)) == [
        "checkpoint.pt", "resolved_spec.json", "train_log.csv", "versions.json"
    ]  # fmt: skip
    assert len(list(ddp.glob(EVENT_FILE_PREFIX + "*"))) == 1  # rank 0's TensorBoard curves, the one writer
    ddp_curve, one_curve = (read_curves(folder)["train/loss"] for folder in (ddp, single))
    assert [step for step, _ in ddp_curve] == [1, 2] and [v for _, v in ddp_curve] == pytest.approx([v for _, v in one_curve], rel=1e-5)
    assert json.loads((ddp / "versions.json").read_text())["world_size"] == 2
    assert output.count("pretrain epoch 2/2: loss") == 1
    distributed, one = (torch.load(folder / "checkpoint.pt", weights_only=True) for folder in (ddp, single))
    assert (distributed["world_size"], len(distributed["rank_rng"]), one["world_size"], distributed["step"]) == (2, 1, 1, 2)
    for part in ("encoder", "head", "loss"):
        for name, tensor in one[part].items():
            torch.testing.assert_close(distributed[part][name], tensor, **WEIGHT_TOLERANCE, msg=lambda m: f"{part}.{name}: {m}")
    for index, moments in one["optimizer"]["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(distributed["optimizer"]["state"][index][name], moments[name], **WEIGHT_TOLERANCE)
    assert pd.read_csv(ddp / "train_log.csv")["loss"].tolist() == pd.read_csv(single / "train_log.csv")["loss"].tolist()


@pytest.mark.slow
def test_a_resumed_ddp_run_equals_an_uninterrupted_one(tabular_manifest: Path, tmp_path: Path) -> None:
    """2 ranks stopped after epoch 1 and resumed by 2 fresh ranks end in the uninterrupted run's
    state: every tensor, both ranks' random streams (rank 1's in rank_rng) included. (The ranks
    draw views' masks even at mask rate 0, so their streams move.)"""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    spawned_ddp_run(tabular_manifest, straight, stop_after_epoch=2)
    spawned_ddp_run(tabular_manifest, resumed, stop_after_epoch=1)
    assert torch.load(resumed / "checkpoint.pt", weights_only=True)["epoch"] == 1
    spawned_ddp_run(tabular_manifest, resumed, stop_after_epoch=2)
    expected = torch.load(straight / "checkpoint.pt", weights_only=True)
    assert expected["world_size"] == 2 and len(expected["rank_rng"]) == 1
    got = torch.load(resumed / "checkpoint.pt", weights_only=True)
    # The resumed run names its first segment's code too (mscl.provenance): the same files.
    assert got.pop("code") == {"earlier": [expected["code"]["now"]], "now": expected.pop("code")["now"]}
    assert_equal_state(got, expected)
    assert pd.read_csv(resumed / "train_log.csv")["loss"].tolist() == pd.read_csv(straight / "train_log.csv")["loss"].tolist()


def test_distributed_batch_size_must_split_evenly_over_the_processes(tabular_manifest: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """Refused before any process group or output: 16 samples do not split over 3 ranks."""
    from mscl.__main__ import main as mscl_main

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_RANK", "0")
    arguments = ["--data", str(tabular_manifest), "--spec", json.dumps(DDP_SPEC), "--out", str(tmp_path / "out")]
    assert mscl_main(["pretrain", *arguments]) == 1
    error = capsys.readouterr().err
    assert "batch_size 16 is the global batch and does not split evenly over 3 processes" in error
    assert "use a multiple of 3 (e.g. 15 or 18)" in error and "(field 'batch_size')" in error
    assert not (tmp_path / "out").exists()


def test_a_distributed_rank_never_goes_through_the_job_server(monkeypatch, tmp_path: Path, capsys) -> None:
    """A rank runs in the process torchrun started, whatever $MSCL_JOB_SERVER says: not even a
    connection is tried (a missing socket would say so)."""
    from mscl import jobserver

    monkeypatch.setenv(jobserver.SOCKET_ENV, str(tmp_path / "no-such-socket"))
    assert jobserver.delegate(["pretrain"]) is None
    assert "not reachable" in capsys.readouterr().err  # the socket is really missing
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert jobserver.delegate(["pretrain"]) is None
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------- a rank that hangs


def view(at: str, count: int, at_for_s: float = 0.0, silent_for_s: float = 0.0, finished: bool = False):
    from mscl.train.distributed import RankView

    return RankView(at, count, at_for_s, silent_for_s, finished)


def test_ddp_watchdog_names_the_ranks_behind_or_without_a_sign_of_life() -> None:
    from mscl.train.distributed import hung_ranks

    # Rank 0 has waited at step 7 for rank 1, still at step 6: named once the limit is reached.
    waiting = {0: view("step 7", 7, at_for_s=4.9), 1: view("step 6", 6, at_for_s=30)}
    assert hung_ranks(waiting, me=0, limit_s=5) == {}
    waiting[0] = view("step 7", 7, at_for_s=5)
    assert hung_ranks(waiting, me=0, limit_s=5) == {1: "rank 1 did not reach step 7 within 5 s (last seen at step 6)"}
    # Whichever rank's watchdog looks, the diagnosis is the same; a rank behind diagnoses itself
    # (one in an endless loop: its watchdog thread runs on).
    assert hung_ranks(waiting, me=1, limit_s=5) == hung_ranks(waiting, me=0, limit_s=5)
    # The waiting time is the first leader's: rank 2 only just arrived at step 7.
    three = {0: view("step 7", 7, at_for_s=6), 1: view("step 6", 6), 2: view("step 7", 7, at_for_s=0.1)}
    assert list(hung_ranks(three, me=2, limit_s=5)) == [1]
    # A heartbeat that stopped names its rank wherever it is, with how long it has been silent.
    stopped = {0: view("step 7", 7, at_for_s=9, silent_for_s=9), 1: view("step 7", 7, at_for_s=9, silent_for_s=5.04)}
    assert hung_ranks(stopped, me=0, limit_s=5) == {1: "rank 1 stopped responding (no sign of life for 5.0 s; last seen at step 7)"}
    # ... but never this rank's own (`me`: its watchdog is running), nor a finished rank's.
    assert hung_ranks(stopped, me=1, limit_s=5) == {0: "rank 0 stopped responding (no sign of life for 9.0 s; last seen at step 7)"}
    stopped[1] = view("step 7", 7, at_for_s=9, silent_for_s=60, finished=True)
    assert hung_ranks(stopped, me=0, limit_s=5) == {}
    # Several ranks, in rank order; one behind and silent is named for its silence, the cause.
    several = {
        0: view("epoch 2's checkpoint", 9, at_for_s=12), 1: view("step 8", 8, silent_for_s=12.3),
        2: view("epoch 2's checkpoint", 9, silent_for_s=7), 3: view("step 8", 8),
    }  # fmt: skip
    assert hung_ranks(several, me=0, limit_s=5) == {
        1: "rank 1 stopped responding (no sign of life for 12.3 s; last seen at step 8)",
        2: "rank 2 stopped responding (no sign of life for 7.0 s; last seen at epoch 2's checkpoint)",
        3: "rank 3 did not reach epoch 2's checkpoint within 5 s (last seen at step 8)",
    }
    # Every rank at one point and responding: working, or a collective that PyTorch's timeout ends.
    assert hung_ranks({0: view("start-up", 0, at_for_s=900), 1: view("start-up", 0, at_for_s=900)}, me=0, limit_s=5) == {}


def test_ddp_watchdog_places_say_the_epoch_and_step_a_rank_was_last_seen_at() -> None:
    """What a hung-rank message calls a rank's place: its epoch and step, after a resume too;
    "start-up" only for a rank that has not begun anything."""
    from mscl.train.distributed import Published, Ranks, Watchdog

    def place(at: str, epoch: int, step: int) -> str:
        return Published(1, 1, at, epoch, step, False, 1, "host").place

    assert place("", 4, 301) == "epoch 4, step 301"
    assert place("epoch 3's checkpoint", 3, 300) == "epoch 3's checkpoint (epoch 3, step 300)"
    assert place("start-up", 0, 0) == "start-up"
    store = torch.distributed.HashStore()
    watchdog = Watchdog(Ranks(0, 2, 0), store, distributed_limits(), lambda *_: None)
    watchdog.resumed(3, 300)  # published at once, without a tick
    assert Published(**json.loads(store.get("rank 0"))).place == "start-up (epoch 3, step 300)"
    watchdog.stepped(4, 301)
    state = Published(**json.loads(store.get("rank 0")))
    assert (state.place, state.count) == ("epoch 4, step 301", 1)


def distributed_limits():
    from mscl.train.distributed import Limits

    return Limits(rank_s=1.0)


class Failures:
    """What a watchdog's `fail` receives, in place of stopping the test process."""

    def __init__(self):
        self.calls, self.times, self.event = [], [], threading.Event()

    def __call__(self, message, silent) -> None:
        self.calls.append((message, [state.pid for state in silent]))
        self.times.append(time.monotonic())
        self.event.set()


def watchdog_pair(limits, store=None) -> tuple[object, object, Failures, Failures]:
    """Watchdogs of ranks 0 and 1 of a 2-rank run in this process, sharing a store."""
    from mscl.train.distributed import Ranks, Watchdog

    store = store or torch.distributed.HashStore()
    failures = Failures(), Failures()
    rank0, rank1 = (Watchdog(Ranks(rank, 2, rank), store, limits, failures[rank]) for rank in (0, 1))
    return rank0, rank1, *failures


def test_ddp_watchdog_names_a_rank_whose_heartbeat_stops() -> None:
    """Rank 1's watchdog stops without finishing (as a SIGSTOPped process's thread stops):
    rank 0's watchdog names it once it has been silent for the limit, and not before."""
    from mscl.train.distributed import Limits

    limits = Limits(rank_s=1.0)
    rank0, rank1, failed0, failed1 = watchdog_pair(limits)
    rank0.start()
    rank1.start()
    try:
        for step in (1, 2):
            rank0.stepped(1, step)
            rank1.stepped(1, step)
            time.sleep(3 * rank0.tick_s)
        rank1.stop(finished=False)
        stopped = time.monotonic()
        assert failed0.event.wait(10)
    finally:
        rank0.stop(finished=False)
    message, silent = failed0.calls[0]
    assert re.fullmatch(
        r"pretrain: rank 1 stopped responding \(no sign of life for 1\.\d s; last seen at epoch 1, step 2\); stopping the run \(rank 0's watchdog, MSCL_DDP_TIMEOUT_S=1\)", message
    ), message
    assert silent == [os.getpid()]  # its published state, with the pid that stop_the_run would kill
    # Silent for the limit since its last heartbeat, which came at most a tick before it stopped.
    assert limits.rank_s - rank0.tick_s <= failed0.times[0] - stopped <= limits.rank_s + 3 * rank0.tick_s + 1.0
    assert failed1.calls == []


def test_ddp_watchdog_names_a_rank_that_stays_behind() -> None:
    """Rank 1 responds but never reaches step 2 (an endless loop, a stuck data loader): once
    rank 0 has waited there for the limit, both watchdogs name rank 1."""
    from mscl.train.distributed import Limits

    limits = Limits(rank_s=1.0)
    rank0, rank1, failed0, failed1 = watchdog_pair(limits)
    rank0.start()
    rank1.start()
    try:
        rank0.stepped(1, 1)
        rank1.stepped(1, 1)
        time.sleep(3 * rank0.tick_s)
        rank0.stepped(1, 2)
        arrived = time.monotonic()
        assert failed0.event.wait(10) and failed1.event.wait(10)
    finally:
        rank0.stop(finished=False)
        rank1.stop(finished=False)
    expected = "pretrain: rank 1 did not reach epoch 1, step 2 within 1 s (last seen at epoch 1, step 1); stopping the run (rank {}'s watchdog, MSCL_DDP_TIMEOUT_S=1)"
    assert [failed0.calls, failed1.calls] == [[(expected.format(0), [])], [(expected.format(1), [])]]
    assert limits.rank_s <= failed0.times[0] - arrived <= limits.rank_s + 3 * rank0.tick_s + 1.0


def test_ddp_watchdog_keeps_the_other_ranks_waiting_for_rank_0_while_it_responds() -> None:
    """Rank 0 works alone for 2.5 times the rank limit: rank 1 waits at the end of the block,
    and no watchdog fails (rank 0 responds, and rank 1 stands at the same point). Beyond the
    limit for rank 0's work, rank 1 fails with a message saying what rank 0 did not finish."""
    from mscl.train.distributed import Limits

    limits = Limits(rank_s=1.0, rank0_alone_s=10.0)
    rank0, rank1, failed0, failed1 = watchdog_pair(limits)
    for watchdog in (rank0, rank1):
        watchdog.start()

    def rank0_works(seconds: float, what: str) -> None:
        with rank0.rank0_alone(what):
            time.sleep(seconds)

    try:
        for what, seconds in (("epoch 1's checkpoint", 2.5), ("epoch 2's checkpoint", 0.0)):
            worker = threading.Thread(target=rank0_works, args=(seconds, what))
            started = time.monotonic()
            worker.start()
            with rank1.rank0_alone(what):
                pass
            waited = time.monotonic() - started
            worker.join()
            assert seconds <= waited <= seconds + 1.0, (what, waited)
        assert failed0.calls == failed1.calls == []

        rank0.limits = rank1.limits = Limits(rank_s=1.0, rank0_alone_s=1.0)
        worker = threading.Thread(target=rank0_works, args=(2.0, "epoch 3's log and convergence monitor"))
        worker.start()
        started = time.monotonic()
        with rank1.rank0_alone("epoch 3's log and convergence monitor"):
            pass
        waited = time.monotonic() - started
        worker.join()
    finally:
        rank0.stop(finished=False)
        rank1.stop(finished=False)
    assert failed1.calls == [
        (
            "pretrain: rank 0 did not finish epoch 3's log and convergence monitor within 1 s, although it responds; "
            "stopping the run (rank 1's watchdog, MSCL_DDP_RANK0_TIMEOUT_S=1)",
            [],
        )
    ]
    assert 1.0 <= waited <= 2.0
    assert failed0.calls == []


def test_ddp_timeouts_come_from_the_environment(monkeypatch) -> None:
    from mscl.errors import InputError
    from mscl.train.distributed import COLLECTIVE_MARGIN_S, Limits
    from mscl.train.launch import DDP_RANK0_TIMEOUT_S, DDP_TIMEOUT_S, ddp_timeout_environment

    monkeypatch.delenv("MSCL_DDP_TIMEOUT_S", raising=False)
    monkeypatch.delenv("MSCL_DDP_RANK0_TIMEOUT_S", raising=False)
    assert Limits.from_environment() == Limits(DDP_TIMEOUT_S, DDP_RANK0_TIMEOUT_S) == Limits(300.0, 3600.0)
    assert ddp_timeout_environment(45) == {"MSCL_DDP_TIMEOUT_S": "45"}
    monkeypatch.setenv("MSCL_DDP_TIMEOUT_S", ddp_timeout_environment(45)["MSCL_DDP_TIMEOUT_S"])
    limits = Limits.from_environment()
    assert limits == Limits(45.0, DDP_RANK0_TIMEOUT_S)
    assert limits.collective == timedelta(seconds=45 + COLLECTIVE_MARGIN_S)
    for bad in ("0", "-3", "five", "nan"):
        monkeypatch.setenv("MSCL_DDP_RANK0_TIMEOUT_S", bad)
        with pytest.raises(InputError, match=f"MSCL_DDP_RANK0_TIMEOUT_S='{bad}' is not a number of seconds > 0"):
            Limits.from_environment()
    with pytest.raises(ValueError, match="> 0"):
        ddp_timeout_environment(0)


def read_until(process: subprocess.Popen, marker: str) -> tuple[list[str], threading.Event, threading.Thread]:
    """`process`'s output lines, collected by a thread as they come, and an event set once a
    line holds `marker`."""
    lines, seen = [], threading.Event()

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if marker in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, seen, reader


@pytest.mark.slow
def test_a_ddp_run_with_a_stopped_rank_fails_within_the_timeout_naming_it(tabular_manifest: Path, tmp_path: Path) -> None:
    """The workflow's torchrun command with MSCL_DDP_TIMEOUT_S=5: rank 0 (which alone writes the
    run's files, and whose process torchrun's store does not live in) is stopped by SIGSTOP in
    the middle of the run. Rank 1's watchdog names it, kills it (a stopped process cannot act on
    torchrun's SIGTERM) and torchrun fails: 5 s after the stop plus a tick, not after
    PyTorch's collective timeout (65 s) or torchrun's 30 s grace for a stopped process."""
    import psutil

    from mscl.train.launch import ddp_timeout_environment

    timeout_s, hung = 5, 0
    spec = {**DDP_SPEC, "pretrain": {**DDP_SPEC["pretrain"], "epochs": 1000}}  # never reaches its end here
    launched = torchrun(tabular_manifest, tmp_path / "out", spec=spec, environment=ddp_timeout_environment(timeout_s))
    lines, training, reader = read_until(launched, "pretrain epoch 3/1000")
    processes = []
    try:
        assert training.wait(120), "".join(lines)[-3000:]
        processes = psutil.Process(launched.pid).children(recursive=True)
        (rank,) = [process for process in processes if process.environ().get("RANK") == str(hung)]
        rank.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        launched.wait(timeout=60)
        failed_after = time.monotonic() - stopped
    finally:
        for process in processes:  # nothing left behind, whatever happened
            try:
                process.send_signal(signal.SIGCONT)
                process.kill()
            except psutil.NoSuchProcess:
                pass
        launched.kill()
        launched.wait()
    reader.join(10)
    output = "".join(lines)
    assert launched.returncode != 0, output[-3000:]
    assert timeout_s - 1 <= failed_after <= timeout_s + 8, (failed_after, output[-3000:])
    # Where it was last seen is the last point it reached, published as it got there (epochs take
    # less than a tick here, so a heartbeat's place lagged: "start-up" for a rank past epoch 3).
    named = rf"pretrain: rank {hung} stopped responding \(no sign of life for \d+\.\d s; last seen at (?P<place>[^;]+)\); "
    found = re.search(named + rf"stopping the run \(rank 1's watchdog, MSCL_DDP_TIMEOUT_S={timeout_s}\)\n", output)
    assert found, output[-3000:]
    epoch = re.search(r"epoch (\d+), step (\d+)\)?$", found["place"])
    assert epoch and int(epoch[1]) >= 3, found["place"]
    assert not re.search(r"rank 1 (stopped responding|did not reach)", output), output[-3000:]


@pytest.mark.slow
def test_a_ddp_jobs_gpus_stay_locked_until_its_last_rank_ends_even_when_its_agent_is_killed(tabular_manifest: Path, tmp_path: Path) -> None:
    """`mscl launch --gpus 2 --torchrun` on a pool of 2 (fake ids, gloo on CPU): both ranks hold
    the job's two lock files (handed over by the launching process, torchrun's agent). The agent
    killed (SIGKILL) while its ranks live on (stopped here, so that they cannot end meanwhile):
    no device is free; the ranks gone, both are."""
    import psutil

    from mscl.train import gpu_locks, gpu_pool

    folder, pool = tmp_path / "locks", ["0", "1"]
    spec = {**DDP_SPEC, "pretrain": {**DDP_SPEC["pretrain"], "epochs": 1000}}  # never reaches its end here
    command = [
        sys.executable, "-m", "mscl", "launch", "--gpus", "2", "--torchrun", "--", sys.executable, "-m", "mscl", "pretrain",
        "--data", str(tabular_manifest), "--spec", json.dumps(spec), "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key not in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", "MSCL_JOB_SERVER")}
    env.update({gpu_pool.POOL_ENV: ",".join(pool), gpu_locks.LOCK_DIR_ENV: str(folder), "OMP_NUM_THREADS": "1"})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    agent = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, training, _ = read_until(agent, "pretrain epoch 2/1000")
    ranks = []
    try:
        assert training.wait(120), "".join(lines)[-3000:]
        ranks = [process for process in psutil.Process(agent.pid).children() if "RANK" in process.environ()]
        assert len(ranks) == 2
        locks = {str(folder / f"gpu-{device}.slot0.lock") for device in pool}
        for rank in ranks:
            assert locks <= {opened.path for opened in rank.open_files()}, rank.environ()["RANK"]
            rank.send_signal(signal.SIGSTOP)
        agent.kill()
        agent.wait(timeout=30)
        assert all(rank.is_running() for rank in ranks)
        assert gpu_locks.try_claim(1, pool, folder, 1) is None  # the ranks hold both devices
    finally:
        for rank in ranks:
            try:
                rank.kill()
            except psutil.NoSuchProcess:
                pass
        agent.kill()
        agent.wait()
    psutil.wait_procs(ranks, timeout=30)
    claim = gpu_locks.try_claim(2, pool, folder, 1)
    assert claim is not None and claim.devices == pool
    claim.release()
    assert "launch: this job holds GPU(s) 0, 1 of 0, 1 until its last process ends" in "".join(lines)


def test_ddp_launch_of_an_untrained_method_runs_on_rank_0_alone(tabular_manifest: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """`none` started as 2 ranks: rank 1 exits at once, rank 0 saves the initial encoder as a
    one-process run. Neither joins a process group: without MASTER_ADDR joining would fail."""
    from mscl.__main__ import main as mscl_main

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    spec = {**DDP_SPEC, "loss": "none"}
    arguments = ["pretrain", "--data", str(tabular_manifest), "--spec", json.dumps(spec), "--out", str(tmp_path / "out")]
    for rank in (1, 0):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert mscl_main(arguments) == 0
        assert (tmp_path / "out").exists() == (rank == 0)
    assert not torch.distributed.is_initialized()
    written = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert written[0] == "encoder.pt" and written[1].startswith(EVENT_FILE_PREFIX) and written[2:] == ["resolved_spec.json", "versions.json"]
    assert json.loads((tmp_path / "out" / "versions.json").read_text())["world_size"] == 1
    assert "method 'none' trains nothing: rank 0 saves the encoder alone, the other 1 rank(s) exit" in capsys.readouterr().err
