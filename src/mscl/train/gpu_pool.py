"""The GPUs a local run shares out among its jobs: found once, when the workflow parses.

`local_gpus.devices: auto` (the default) asks, in this order, and takes the first answer:

1. `CUDA_VISIBLE_DEVICES`, when set: the run itself was given these devices (what torch would
   see of the machine).
2. NVML (the `nvidia-ml-py` package, module `pynvml`): the driver's own count, what gpustat and
   PyTorch's tools read; milliseconds, no subprocess, no parsing.
3. `nvidia-smi --query-gpu=index`: where the package or its library is missing.
4. torch's `torch.cuda.device_count()`: where neither answers but the machine shows NVIDIA
   device files (a container given `compute` but not `utility` capabilities has libcuda without
   NVML or nvidia-smi). Importing torch takes seconds and the workflow parses without it, so it
   is asked in a subprocess, and only there; a process that has imported torch already asks it
   directly. A machine without NVIDIA device files has no CUDA to ask about.

Device ids are CUDA's indices (or whatever `local_gpus.devices` lists: indices or GPU UUIDs),
the values a job's CUDA_VISIBLE_DEVICES takes.

What a run does with the answer (`plan_local_gpus`):

- devices found or listed: the pool. Each job holds its own of them (`mscl.train.gpu_locks`),
  and Snakemake's `gpu` resource becomes the pool's size x `jobs_per_device`
  (`limit_gpu_jobs`), so the scheduler, not a job waiting in `launch`, decides how many GPU jobs
  run at once;
- none found, and no sign of NVIDIA hardware: a CPU machine. The pool is empty, the `gpu`
  resource 0, and a job that asks for GPUs runs on the CPU with CUDA_VISIBLE_DEVICES="" (as
  its log says), never seeing a GPU that nobody assigned to it;
- none found, but NVIDIA device files present and nothing could list them: the run stops
  before any job (`LocalGpus.problem`), since a job would otherwise either see every GPU or
  none without anyone having decided so; the fix is to list `local_gpus.devices`.

Standard library only (pynvml and torch are imported lazily, where present): the workflow calls
this while it parses.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Callable, MutableMapping, Sequence

# The local device pool (comma-separated ids; set by the workflow for runs on this machine).
POOL_ENV = "MSCL_GPU_POOL"
# How many jobs may hold one device at once (1 unless the user lets jobs share a device).
JOBS_PER_DEVICE_ENV = "MSCL_GPU_JOBS_PER_DEVICE"
NVIDIA_SMI_TIMEOUT_S = 20.0
# Importing torch and initialising CUDA in a fresh interpreter: seconds, more on a cold disk.
TORCH_PROBE_TIMEOUT_S = 120.0
# What the NVIDIA driver creates for each GPU (/dev/nvidia0, ...), and WSL2's GPU device.
NVIDIA_DEVICE_FILES = ("/dev/nvidia[0-9]*", "/dev/dxg")
# Snakemake's resource that counts GPUs (`resources: gpu` of the training rules).
GPU_RESOURCE = "gpu"
CONFIG_KEY = "local_gpus.devices"


@dataclass(frozen=True)
class Found:
    """What the probes found: the device ids, which probe listed them ("" when none did), what
    each probe asked said (for the log and an error message), and whether any could answer at
    all (zero devices is an answer; a missing library or command is not)."""

    devices: list[str]
    source: str
    answers: list[str]
    answered: bool


def nvml_devices() -> list[str] | None:
    """CUDA indices of the GPUs NVML counts; None when NVML is unavailable (the package is not
    installed, or the driver's library cannot be loaded or initialised)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # pynvml.NVMLError and its subclasses (library not found, driver not loaded)
        return None
    try:
        return [str(index) for index in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def nvidia_smi_devices() -> list[str] | None:
    """The GPU indices `nvidia-smi` lists; None when it is missing or fails."""
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]


def nvidia_device_files() -> list[str]:
    return sorted(path for pattern in NVIDIA_DEVICE_FILES for path in glob.glob(pattern))


def torch_devices() -> list[str] | None:
    """CUDA indices of the GPUs torch sees; None when torch cannot be asked cheaply (not
    imported here and no NVIDIA device file on the machine) or the question fails."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return [str(index) for index in range(torch.cuda.device_count())]
        except Exception:
            return None
    if not nvidia_device_files():
        return None
    try:
        asked = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
            capture_output=True, text=True, timeout=TORCH_PROBE_TIMEOUT_S, check=True,
        )  # fmt: skip
        return [str(index) for index in range(int(asked.stdout.strip().splitlines()[-1]))]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


PROBES: tuple[tuple[str, Callable[[], list[str] | None]], ...] = (
    ("NVML", nvml_devices),
    ("nvidia-smi", nvidia_smi_devices),
    ("torch", torch_devices),
)


def find_devices() -> Found:
    """This machine's GPUs, by the first probe that lists any (module docstring)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [device.strip() for device in visible.split(",") if device.strip()]
        return Found(devices, "CUDA_VISIBLE_DEVICES" if devices else "", [f"CUDA_VISIBLE_DEVICES={visible!r}"], answered=True)
    answers, answered = [], False
    for name, probe in PROBES:
        devices = probe()
        answers.append(f"{name}: {'unavailable' if devices is None else f'{len(devices)} GPU(s)'}")
        answered = answered or devices is not None
        if devices:
            return Found(devices, name, answers, answered)
    return Found([], "", answers, answered)


def listed_devices(devices: Sequence[Any]) -> list[str]:
    """`local_gpus.devices` given as a list, as device ids (a ValueError for a repeated or empty id)."""
    ids = [str(device).strip() for device in devices]
    if len(set(ids)) != len(ids) or not all(ids):
        raise ValueError(f"{CONFIG_KEY} {list(devices)} lists a device twice or an empty id; list each GPU id once, e.g. [0, 1, 2, 3]")
    return ids


@dataclass(frozen=True)
class LocalGpus:
    """A run's GPUs: the pool its local jobs share out (empty on a cluster, whose scheduler
    assigns GPUs, and on a machine without any), how many jobs may hold one device, where the
    pool came from, and what stops the run before any job (None: nothing)."""

    devices: list[str]
    jobs_per_device: int
    local: bool
    source: str
    problem: str | None = None

    @property
    def slots(self) -> int:
        """How many GPU jobs of one GPU may run at once."""
        return len(self.devices) * self.jobs_per_device


def plan_local_gpus(devices: str | Sequence[Any], jobs_per_device: int | str, local: bool, environment: MutableMapping[str, str] = os.environ) -> LocalGpus:
    """The run's pool from `local_gpus` (module docstring; `jobs_per_device` may be the text
    `--config` makes of a number). Not local, or inside a SLURM job (which SLURM gave its own
    GPUs): no pool."""
    jobs_per_device = int(jobs_per_device)
    if not local or "SLURM_JOB_ID" in environment:
        return LocalGpus([], jobs_per_device, local=False, source="the cluster's scheduler")
    if devices != "auto":
        return LocalGpus(listed_devices(devices), jobs_per_device, local=True, source=CONFIG_KEY)
    found = find_devices()
    problem = None
    if not found.answered and (device_files := nvidia_device_files()):
        problem = (
            f"{CONFIG_KEY} is auto, and this machine has NVIDIA device files ({', '.join(device_files[:4])}) but no GPU could be "
            f"listed ({'; '.join(found.answers)}): a job asking for a GPU would not know which one is its own. Fix: list the GPUs "
            f"this run may use, e.g. --config 'local_gpus={{devices: [0, 1]}}' (or [] to run every job on the CPU), or install "
            f"nvidia-ml-py or the NVIDIA driver's nvidia-smi"
        )
    return LocalGpus(found.devices, jobs_per_device, local=True, source=found.source or "none found", problem=problem)


def limit_gpu_jobs(global_resources: MutableMapping[str, Any], gpus: LocalGpus, report: Callable[[str], None]) -> None:
    """Give a local run's Snakemake a `gpu` resource of the pool's size x jobs_per_device, so
    that it starts no more GPU jobs than the pool holds (`workflow.global_resources`, which the
    scheduler reads when it starts). A `--resources gpu=N` of the user's stays; nothing for a
    cluster run, whose scheduler counts GPUs itself."""
    if not gpus.local:
        return
    if GPU_RESOURCE in global_resources:
        given = global_resources[GPU_RESOURCE]
        report(f"GPU jobs at once: {getattr(given, 'value', given)} (--resources {GPU_RESOURCE}=...), for a pool of {gpus.slots} GPU slot(s)")
        return
    global_resources[GPU_RESOURCE] = gpus.slots
    if gpus.devices:
        report(f"GPU jobs at once: at most {gpus.slots} ({len(gpus.devices)} GPU(s) x {gpus.jobs_per_device} job(s) per device; Snakemake's {GPU_RESOURCE} resource)")


def share_local_gpus(gpus: LocalGpus, report: Callable[[str], None]) -> None:
    """Export the device pool to this run's local jobs ($MSCL_GPU_POOL, read by `mscl launch`);
    nothing for a cluster run, whose scheduler assigns GPUs."""
    if not gpus.local:
        os.environ.pop(POOL_ENV, None)
        return
    os.environ[POOL_ENV] = ",".join(gpus.devices)
    os.environ[JOBS_PER_DEVICE_ENV] = str(gpus.jobs_per_device)
    if gpus.devices:
        sharing = "one job per device" if gpus.jobs_per_device == 1 else f"up to {gpus.jobs_per_device} jobs per device"
        report(f"GPUs for this run's jobs: {', '.join(gpus.devices)} ({gpus.source}; {sharing}; each job holds its own, mscl.train.launch)")
    else:
        report(f"GPUs for this run's jobs: none ({gpus.source}); jobs that ask for a GPU run on the CPU, seeing none")
