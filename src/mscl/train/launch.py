"""How the workflow starts a training job: its own GPUs, and one process or one per GPU.

Every pretrain, probe and cache-prefix rule runs its command through

    python -m mscl launch --gpus N [--torchrun] -- python -m mscl pretrain ...

which takes the job's devices, then runs the command: an mscl command of this interpreter in
this very process (no second interpreter start), any other by replacing itself (exec), and for
`--torchrun` with N > 1 one data-parallel run of N processes on this node (`mscl.train.distributed`),
torchrun's agent running in this process too:

    python -m torch.distributed.run --standalone --nproc_per_node N -m mscl pretrain ...

`--standalone` rendezvouses on a free local port, so concurrent jobs on one node do not collide.
N is the job's `resources.gpu`: a resource, not a param, so a changed GPU count reruns nothing.

**One GPU set per job on one machine.** Snakemake counts GPUs but does not pick them, so without
help every local job would use GPU 0. For a run on this machine the workflow finds the device
pool (`mscl.train.gpu_pool`: `local_gpus.devices`, by default the GPUs this machine shows),
makes it Snakemake's `gpu` resource and exports it ($MSCL_GPU_POOL). A job of N GPUs then holds
N distinct devices of the pool for its whole life, each by a lock every user and run of the
machine shares (`mscl.train.gpu_locks`), and sees only them in CUDA_VISIBLE_DEVICES. The locks
go with every process of the job (the command, a job-server worker, torchrun's ranks, their
DataLoader workers), so no device is handed out while any of them runs. A job that finds its
devices held by other runs waits its turn, first come first served. A job of 0 GPUs, and a job
of N on a machine where no GPU was found, sees none (CUDA_VISIBLE_DEVICES=""): nobody assigned
it one, and its log says so. The devices held are in the job's log and, as `assigned_gpus`, in
its versions.json.

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

Standard library only (torch only for a torchrun job, whose agent imports it anyway): the
workflow imports it while it parses, and `launch` must start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any, Callable, Mapping, Sequence

from mscl import cli
from mscl.train.gpu_locks import HANDOVER_ENV, HELD_ENV, Claim, HandOver, LockError, claim_devices, lock_folder, mark_held
from mscl.train.gpu_pool import JOBS_PER_DEVICE_ENV, POOL_ENV

ENCODER_GPUS_ENV = "MSCL_ENCODER_GPUS"
# What torchrun sets in each process it starts (any launcher that sets them is treated alike):
# `mscl.train.distributed` reads the rank from them, and the job server never serves a process
# that has them.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
# What the job's versions.json records of its devices (`mscl.train.runtime.software_versions`).
ASSIGNED_ENV = "MSCL_ASSIGNED_GPUS"

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
        environment["CUDA_VISIBLE_DEVICES"] = ""
        report(
            f"launch: the job asks for {gpus} GPU(s), but this run's GPU pool is empty (no GPU found on this machine, or "
            f"`local_gpus.devices` lists none): it runs on the CPU, with CUDA_VISIBLE_DEVICES=''"
        )
        return environment, None
    jobs_per_device = int(environment.get(JOBS_PER_DEVICE_ENV) or 1)
    claim = claim_devices(gpus, pool, lock_folder(environment), jobs_per_device, report)
    environment["CUDA_VISIBLE_DEVICES"] = environment[ASSIGNED_ENV] = ",".join(claim.devices)
    mark_held(claim.handles, environment)
    report(f"launch: this job holds GPU(s) {', '.join(claim.devices)} of {', '.join(pool)} until its last process ends")
    return environment, claim


def same_interpreter(program: str) -> bool:
    """Whether `program` (as a shell would find it) is this interpreter."""
    found = shutil.which(program)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def run_torchrun_here(arguments: Sequence[str], claim: Claim | None) -> int:
    """torchrun's agent in this process (`python -m torch.distributed.run ARGUMENTS` without a
    second interpreter), handing the claim's locks to the ranks it starts (gpu_locks.HandOver):
    torchrun closes every inherited descriptor in them. 1 when a rank failed, as torchrun's
    own exit status (torchrun has printed which rank and why)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    os.environ.pop(HELD_ENV, None)  # this process's descriptor numbers: nothing in the ranks
    if claim is not None:
        os.environ[HANDOVER_ENV] = HandOver(claim.handles).name
    try:
        torchrun_main(list(arguments))
    except ChildFailedError:
        return 1
    return 0


def main(argv: Sequence[str] | None = None, in_this_process: Callable[[list[str]], int] | None = None) -> int:
    """Hold the job's devices, then run its command: in this process when it is `python -m mscl
    COMMAND` of this interpreter and one process (`in_this_process`, mscl.__main__.main: the job
    saves a second interpreter's start, 0.1 s), or torchrun's agent of this interpreter; else
    by exec (other programs), with the locks' descriptors inherited."""
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

    try:
        environment, claim = job_environment(args.gpus, os.environ, report)
    except LockError as error:
        raise SystemExit(f"mscl launch: error: {error}") from None
    distributed = args.torchrun and args.gpus > 1
    if distributed:
        command = torchrun_command(command, args.gpus)
    if same_interpreter(command[0]) and (distributed or (in_this_process is not None and command[1:3] == ["-m", "mscl"])):
        os.environ.clear()
        os.environ.update(environment)  # before torch is imported: CUDA_VISIBLE_DEVICES counts then
        # The claim's locks stay held by this process until it ends, and go with the job's
        # processes from here (the job server's worker, torchrun's ranks: mscl.train.gpu_locks).
        return run_torchrun_here(command[3:], claim) if distributed else in_this_process(command[3:])
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
