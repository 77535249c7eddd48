"""How the workflow starts a training job: its own GPUs, and one process or one per GPU.

Every pretrain, probe and cache-prefix rule runs its command through

    python -m mscl launch --gpus N [--torchrun] -- python -m mscl pretrain ...

which takes the job's devices, then runs the command: an mscl command of this interpreter in
this very process (no second interpreter start), any other by replacing itself (exec), and for
`--torchrun` with N > 1 one data-parallel run of N processes on this node (`mscl.train.distributed`):

    python -m torch.distributed.run --standalone --nproc_per_node N -m mscl pretrain ...

`--standalone` rendezvouses on a free local port, so concurrent jobs on one node do not collide.
N is the job's `resources.gpu`: a resource, not a param, so a changed GPU count reruns nothing.

**One GPU set per job on one machine.** Snakemake counts GPUs (`--resources gpu=4`) but does
not pick them, so without help every local job would use GPU 0. For a run on this machine the
workflow exports the device pool ($MSCL_GPU_POOL: the ids in `local_gpus.devices`, by default
the GPUs this machine shows). A job of N GPUs then holds N distinct devices of the pool for its
whole life, each by an exclusive `flock` on a lock file of the device (`local_gpus.jobs_per_device`
lock files a device when the user lets jobs share one), and sees only them in
CUDA_VISIBLE_DEVICES. The locks live in one folder per machine (/tmp/mscl-gpu-locks, or
$MSCL_GPU_LOCK_DIR), so two Snakemake runs on one workstation share out the same GPUs; the kernel
drops a lock when its holder ends, however it ends, so a killed job never leaves a device
taken. A job that finds too few free devices waits (and says so in its log) until another ends;
it never takes a device already held. A job of 0 GPUs sees none (CUDA_VISIBLE_DEVICES=""): the
scheduler reserved no GPU for it. The devices held are in the job's log and, as
`assigned_gpus`, in its versions.json.

Inside a SLURM job ($SLURM_JOB_ID set) the pool is ignored: SLURM assigns the job's GPUs.

The SLURM profiles read every encoder's GPU count from $MSCL_ENCODER_GPUS
(`export_encoder_gpus`): a profile's resource expression sees the job's wildcards and the
environment, not the config.

How long the ranks of a DDP job wait for a rank that hangs reaches the job through the
environment too ($MSCL_DDP_TIMEOUT_S, `export_ddp_timeout`, from the config's
`distributed.timeout_s`), not through its command line or run spec: Snakemake reruns a job
whose params change, and a timeout changes no result. So does whether a job writes TensorBoard
curves, and how many points an epoch ($MSCL_TENSORBOARD, `export_curves`, from the config's
`tensorboard` block; mscl.train.curves).

Standard library only: the workflow imports it while it parses, and `launch` must start fast.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mscl import cli

ENCODER_GPUS_ENV = "MSCL_ENCODER_GPUS"
# What torchrun sets in each process it starts (any launcher that sets them is treated alike):
# `mscl.train.distributed` reads the rank from them, and the job server never serves a process
# that has them.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
# The local device pool (comma-separated ids; set by the workflow for runs on this machine).
POOL_ENV = "MSCL_GPU_POOL"
# How many jobs may hold one device at once (1 unless the user lets jobs share a device).
JOBS_PER_DEVICE_ENV = "MSCL_GPU_JOBS_PER_DEVICE"
LOCK_DIR_ENV = "MSCL_GPU_LOCK_DIR"
# One folder for the whole machine, so that every run on it shares out the same devices.
DEFAULT_LOCK_DIR = Path("/tmp/mscl-gpu-locks")
# What the job's versions.json records of its devices (`mscl.train.runtime.software_versions`).
ASSIGNED_ENV = "MSCL_ASSIGNED_GPUS"
# Seconds between two attempts of a waiting job, and between two of its "waiting" log lines.
POLL_S = 1.0
WAIT_REPORT_S = 60.0
NVIDIA_SMI_TIMEOUT_S = 20.0

# Seconds the ranks of a DDP job wait for a rank that is behind them or shows no sign of life
# before the job fails naming it (`mscl.train.distributed.Watchdog`). A step takes seconds;
# 5 minutes leaves room for a slow rank without letting a hung one hold N GPUs for an hour.
DDP_TIMEOUT_ENV = "MSCL_DDP_TIMEOUT_S"
DDP_TIMEOUT_S = 300.0
# Seconds the other ranks wait for rank 0's work alone (checkpoint writing, the convergence
# monitor's pass over train and val) while rank 0 responds; one that stops responding fails
# the job after DDP_TIMEOUT_S. A large model's monitor takes minutes, hence the hour.
DDP_RANK0_TIMEOUT_ENV = "MSCL_DDP_RANK0_TIMEOUT_S"
DDP_RANK0_TIMEOUT_S = 3600.0

# TensorBoard curves of a training job (mscl.train.curves): "0" writes none, a positive integer
# N about N loss points an epoch; unset: CURVE_POINTS_PER_EPOCH.
CURVES_ENV = "MSCL_TENSORBOARD"
CURVE_POINTS_PER_EPOCH = 50


def visible_devices() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else every GPU
    `nvidia-smi` lists ([] without it, or when it fails)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [device.strip() for device in visible.split(",") if device.strip()]
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]


def resolve_pool(devices: str | Sequence[Any]) -> list[str]:
    """`local_gpus.devices` as device ids: "auto" is `visible_devices()`."""
    if devices == "auto":
        return visible_devices()
    ids = [str(device).strip() for device in devices]
    if len(set(ids)) != len(ids) or not all(ids):
        raise ValueError(f"local_gpus.devices {list(devices)} lists a device twice or an empty id; list each GPU id once, e.g. [0, 1, 2, 3]")
    return ids


def share_local_gpus(devices: str | Sequence[Any], jobs_per_device: int, local: bool, report: Callable[[str], None]) -> list[str]:
    """Export the device pool to this run's local jobs (nothing for a cluster run, whose
    scheduler assigns GPUs); return it."""
    if not local:
        os.environ.pop(POOL_ENV, None)
        return []
    pool = resolve_pool(devices)
    os.environ[POOL_ENV] = ",".join(pool)
    os.environ[JOBS_PER_DEVICE_ENV] = str(jobs_per_device)
    if pool:
        sharing = "one job per device" if jobs_per_device == 1 else f"up to {jobs_per_device} jobs per device"
        report(f"GPUs for this run's jobs: {', '.join(pool)} ({sharing}; each job holds its own, mscl.train.launch)")
    return pool


@dataclass
class Claim:
    """Devices a job holds: their ids and the open lock files whose flock holds them."""

    devices: list[str]
    handles: list[int]

    def release(self) -> None:
        for handle in self.handles:
            os.close(handle)  # closing the last descriptor of a lock file drops its flock
        self.handles = []


def lock_folder() -> Path:
    folder = Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        if folder == DEFAULT_LOCK_DIR:
            os.chmod(folder, 0o1777)  # every user's jobs share the machine's GPUs (sticky, as /tmp)
    return folder


def try_claim(count: int, pool: Sequence[str], folder: Path, jobs_per_device: int) -> Claim | None:
    """`count` distinct devices of `pool`, each by one free slot's lock; None (nothing held)
    when fewer than `count` devices have a free slot."""
    claim = Claim([], [])
    for device in pool:
        if len(claim.devices) == count:
            break
        for slot in range(jobs_per_device):
            path = folder / f"gpu-{device}.slot{slot}.lock"
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(handle)
                if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            # Who holds it, for `cat` when a job waits (the lock, not this text, is what counts).
            os.ftruncate(handle, 0)
            os.write(handle, f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            claim.devices.append(device)
            claim.handles.append(handle)
            break
    if len(claim.devices) < count:
        claim.release()  # all or nothing: holding some while waiting for more could deadlock two jobs
        return None
    return claim


def claim_devices(count: int, pool: Sequence[str], folder: Path, jobs_per_device: int, report: Callable[[str], None]) -> Claim:
    """Wait until `count` distinct devices of `pool` are free, then hold them."""
    if count > len(pool):
        raise SystemExit(
            f"mscl launch: error: the job asks for {count} GPU(s) but the local pool has {len(pool)} ({', '.join(pool) or 'none'}). "
            f"Fix: lower the encoder's resources.gpu, or list more devices in `local_gpus.devices`"
        )
    waited_since = reported_at = None
    while (claim := try_claim(count, pool, folder, jobs_per_device)) is None:
        now = time.monotonic()
        if waited_since is None:
            waited_since = now
        if reported_at is None or now - reported_at >= WAIT_REPORT_S:
            report(f"launch: waiting for {count} free GPU(s) of {', '.join(pool)} (held by other jobs; {now - waited_since:.0f} s so far)")
            reported_at = now
        time.sleep(POLL_S)
    return claim


def is_module_command(command: Sequence[str]) -> bool:
    """`python -m MODULE ...`: what --torchrun can run as several processes."""
    return len(command) >= 3 and command[1] == "-m"


def torchrun_command(command: Sequence[str], processes: int) -> list[str]:
    """`python -m MODULE ARGS...` as one run of `processes` processes under torchrun."""
    return [command[0], "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes), *command[1:]]


def job_environment(gpus: int, environment: Mapping[str, str], report: Callable[[str], None]) -> tuple[dict[str, str], Claim | None]:
    """The job's environment with its own devices (see the module docstring), and the claim
    that holds them (None when nothing is held)."""
    environment = dict(environment)
    pool_text = environment.get(POOL_ENV)
    if pool_text is None or "SLURM_JOB_ID" in environment:
        return environment, None  # not a local workflow run, or SLURM assigns the GPUs
    if gpus == 0:
        environment["CUDA_VISIBLE_DEVICES"] = ""
        return environment, None
    pool = [device for device in pool_text.split(",") if device]
    if not pool:
        report(f"launch: the job asks for {gpus} GPU(s) and this machine shows none: it runs on the CPU")
        return environment, None
    jobs_per_device = int(environment.get(JOBS_PER_DEVICE_ENV) or 1)
    claim = claim_devices(gpus, pool, lock_folder(), jobs_per_device, report)
    environment["CUDA_VISIBLE_DEVICES"] = environment[ASSIGNED_ENV] = ",".join(claim.devices)
    report(f"launch: this job holds GPU(s) {', '.join(claim.devices)} of {', '.join(pool)} until it ends")
    return environment, claim


def same_interpreter(program: str) -> bool:
    """Whether `program` (as a shell would find it) is this interpreter."""
    found = shutil.which(program)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def main(argv: Sequence[str] | None = None, in_this_process: Callable[[list[str]], int] | None = None) -> int:
    """Hold the job's devices, then run its command: in this process when it is `python -m mscl
    COMMAND` of this interpreter and one process (`in_this_process`, mscl.__main__.main: the job
    saves a second interpreter's start, 0.1 s), else by exec (torchrun, other programs)."""
    parser = cli.build_parser("launch")
    args: argparse.Namespace = parser.parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("the following arguments are required: command (-- and the job's command, e.g. -- python -m mscl probe ...)")
    if args.gpus < 0:
        parser.error(f"--gpus must be >= 0, got {args.gpus}")
    if args.torchrun and not is_module_command(command):
        parser.error(f"--torchrun needs a `python -m MODULE ...` command, got {' '.join(command)!r}")

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    environment, claim = job_environment(args.gpus, os.environ, report)
    distributed = args.torchrun and args.gpus > 1
    if in_this_process is not None and not distributed and command[1:3] == ["-m", "mscl"] and same_interpreter(command[0]):
        os.environ.clear()
        os.environ.update(environment)  # before torch is imported: CUDA_VISIBLE_DEVICES counts then
        return in_this_process(command[3:])  # the claim's locks stay held by this process until it ends
    if distributed:
        command = torchrun_command(command, args.gpus)
    if claim is not None:
        for handle in claim.handles:
            os.set_inheritable(handle, True)  # the command, which replaces this process, holds them
    sys.stdout.flush()
    os.execvpe(command[0], command, environment)
    return 0  # pragma: no cover - exec does not return


def export_encoder_gpus(encoders: Mapping[str, Mapping[str, Any]]) -> None:
    """Every encoder's configured GPU count as a JSON object (also a Python dict literal) in
    $MSCL_ENCODER_GPUS, which the SLURM profiles' `gpu`/`gres` expressions expand. Jobs and
    their SLURM steps inherit it (sbatch --export=ALL), and the workflow sets it again
    wherever it parses."""
    os.environ[ENCODER_GPUS_ENV] = json.dumps({name: int(encoder["resources"]["gpu"]) for name, encoder in encoders.items()})


def ddp_timeout_environment(timeout_s: float) -> dict[str, str]:
    """The environment that gives a DDP job's ranks `timeout_s` seconds for a hung rank."""
    if not timeout_s > 0:
        raise ValueError(f"the DDP timeout must be a number of seconds > 0, got {timeout_s!r}")
    return {DDP_TIMEOUT_ENV: f"{float(timeout_s):g}"}


def export_ddp_timeout(timeout_s: float) -> None:
    """Set $MSCL_DDP_TIMEOUT_S for the jobs this process starts (the workflow calls it while it
    parses, from the config); jobs and their SLURM steps inherit it like $MSCL_ENCODER_GPUS."""
    os.environ.update(ddp_timeout_environment(timeout_s))


def curves_environment(enabled: bool, points_per_epoch: int) -> dict[str, str]:
    """The environment that turns a job's TensorBoard curves off, or on at `points_per_epoch`."""
    if enabled and not (isinstance(points_per_epoch, int) and points_per_epoch >= 1):
        raise ValueError(f"the curve points per epoch must be an integer >= 1, got {points_per_epoch!r}")
    return {CURVES_ENV: str(points_per_epoch) if enabled else "0"}


def export_curves(enabled: bool, points_per_epoch: int) -> None:
    """Set $MSCL_TENSORBOARD for the jobs this process starts (the workflow calls it while it
    parses, from the config's `tensorboard` block), as `export_ddp_timeout` does."""
    os.environ.update(curves_environment(enabled, points_per_epoch))
