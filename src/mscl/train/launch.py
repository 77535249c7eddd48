"""How the workflow starts a pretrain job: one process, or one per GPU under torchrun.

An encoder's `resources.gpu` (config) is its jobs' GPU count. A pretrain job of N > 1 GPUs is
one data-parallel run of N processes on one node (`mscl.train.distributed`):

    python -m torch.distributed.run --standalone --nproc_per_node N -m mscl pretrain ...

`--standalone` rendezvouses on a free local port, so concurrent jobs on one node do not
collide. The probe, cache-prefix and the untrained baselines' work stay single-process.

The SLURM profiles read the counts from $MSCL_ENCODER_GPUS (`export_encoder_gpus`): a
profile's resource expression sees the job's wildcards and the environment, not the config.

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
