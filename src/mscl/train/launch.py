"""How the workflow starts a pretrain job: one process, or one per GPU under torchrun.

An encoder's `resources.gpu` (config) is its jobs' GPU count. A pretrain job of N > 1 GPUs is
one data-parallel run of N processes on one node (`mscl.train.distributed`):

    python -m torch.distributed.run --standalone --nproc_per_node N -m mscl pretrain ...

`--standalone` rendezvouses on a free local port, so concurrent jobs on one node do not
collide. The probe, cache-prefix and the untrained baselines' work stay single-process.

The SLURM profiles read the counts from $MSCL_ENCODER_GPUS (`export_encoder_gpus`): a
profile's resource expression sees the job's wildcards and the environment, not the config.

How long the ranks of a DDP job wait for a rank that hangs reaches the job through the
environment too ($MSCL_DDP_TIMEOUT_S, `export_ddp_timeout`), not through its command line or
run spec: Snakemake reruns a job whose params change, and a timeout changes no result.

Standard library only: the workflow imports it while it parses.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

ENCODER_GPUS_ENV = "MSCL_ENCODER_GPUS"
# What torchrun sets in each process it starts (any launcher that sets them is treated alike):
# `mscl.train.distributed` reads the rank from them, and the job server never serves a process
# that has them.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")

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


def pretrain_command(gpus: int) -> str:
    """The command that runs `pretrain` (its options follow) as a job of `gpus` GPUs."""
    if gpus <= 1:
        return "python -m mscl pretrain"
    return f"python -m torch.distributed.run --standalone --nproc_per_node {gpus} -m mscl pretrain"


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
