"""Device, precision, seeding, RNG snapshots, software versions and checkpoint I/O.

Checkpoints are loaded with `torch.load(..., weights_only=True)`, so everything in them is a
tensor or a plain Python value (dict, list, int, float, str, bool, None): RNG states are
stored as tensors and lists, never as pickled objects.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import random
import zipfile
from pathlib import Path
from typing import Any, ContextManager, Sequence

import numpy as np
import torch

from mscl.errors import InputError
from mscl.io import atomic_path, write_json
from mscl.plugins import loaded_plugins
from mscl.provenance import provenance
from mscl.train.launch import ASSIGNED_ENV

VERSIONED_PACKAGES = ("torch", "torchvision", "transformers", "peft", "numpy")


def pick_device() -> torch.device:
    """CUDA when available (Snakemake does not pick GPU ids; the job sees its own), else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_precision(precision: str, device: torch.device) -> str:
    """"auto" -> "bf16" on CUDA, "fp32" on CPU (CPU bf16 autocast is slower than fp32)."""
    if precision != "auto":
        return precision
    return "bf16" if device.type == "cuda" else "fp32"


def autocast(device: torch.device, precision: str) -> ContextManager:
    """bf16 autocast for "bf16", a no-op for "fp32"."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a CPU generator for the DataLoader (shuffle order)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def capture_rng(loader_generator: torch.Generator) -> dict[str, Any]:
    """Every RNG state a resumed run needs, as tensors and lists (weights_only-loadable)."""
    version, internal, gauss_next = random.getstate()
    name, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss_next],
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached_gaussian],
        "torch": torch.get_rng_state(),
        "loader": loader_generator.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any], loader_generator: torch.Generator) -> None:
    """Inverse of `capture_rng`."""
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    name, keys, position, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), position, has_gauss, cached_gaussian))
    torch.set_rng_state(state["torch"])
    loader_generator.set_state(state["loader"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def software_versions(device: torch.device, precision: str) -> dict[str, Any]:
    """What versions.json records as a job starts: key packages, device and numeric precision
    (`finish_versions` adds what made the job as it ends: interpreter, commit, code, stack)."""
    versions: dict[str, Any] = {}
    for package in VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    versions.update(
        device=device.type,
        device_name=device_name(device),
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if device.type == "cuda" else None,
        precision=precision,
        torch_threads=torch.get_num_threads(),
        # The GPUs `mscl launch` gave this job of the machine's pool (None: none held, e.g. on SLURM).
        assigned_gpus=os.environ.get(ASSIGNED_ENV),
    )
    return versions


def finish_versions(path: Path, versions: dict[str, Any], earlier_code: Sequence[dict[str, str] | None] = ()) -> None:
    """Write the job's versions.json as it ends: `versions` and what made the job (the mscl
    files it ran, the stack, its plugins; mscl.provenance), recorded now so that they are the
    modules this job imported, and nothing a later change to other code could touch.
    `earlier_code`: the files of a resumed run's earlier segments (None where unknown); those
    that differ from this segment's are kept as `code.earlier_segments`."""
    made_by = provenance(loaded_plugins())
    earlier = []
    for files in earlier_code:
        if files != made_by["code"]["files"] and files not in earlier:
            earlier.append(files)
    if earlier:
        made_by["code"]["earlier_segments"] = earlier
    write_json(path, {**versions, **made_by})


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """torch.save onto a temporary file beside `path`, then rename: never half written."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | Path, fix: str = "delete it and rerun") -> dict[str, Any]:
    """torch.load with weights_only=True onto the CPU; a broken file is an InputError."""
    check_checkpoint(path, fix)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - unpickling errors have many types
        first_line = str(error).splitlines()[0][:200] if str(error) else ""
        raise InputError(path, f"cannot load checkpoint ({type(error).__name__}: {first_line})", fix)


def check_checkpoint(path: str | Path, fix: str) -> None:
    """A cheap check, before any output is written, that `path` is a complete torch.save file:
    its zip directory, stored at the end, reads (a truncated copy fails here)."""
    try:
        with zipfile.ZipFile(path) as archive:
            archive.namelist()
    except (zipfile.BadZipFile, OSError) as error:
        raise InputError(path, f"not a complete torch checkpoint ({error})", fix) from error


def trainable_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's state minus frozen parameters: trainable parameters and all buffers.

    With the frozen parts rebuilt from the spec (e.g. a LoRA base model from its folder),
    this is enough to restore the trained module; for LoRA it is the adapter only.
    """
    frozen = {name for name, parameter in module.named_parameters() if not parameter.requires_grad}
    return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items() if name not in frozen}


def load_trainable_state(module: torch.nn.Module, state: dict[str, torch.Tensor], where: str | Path) -> None:
    """Load a `trainable_state` dict; an InputError unless its keys match the module's exactly."""
    expected = set(trainable_state(module))
    got = set(state)
    if expected != got:
        missing, extra = sorted(expected - got)[:5], sorted(got - expected)[:5]
        raise InputError(
            where,
            f"weights do not match the encoder built from the spec (missing {missing}, unexpected {extra})",
            "probe with the same encoder spec that pretrained these weights",
        )
    try:
        module.load_state_dict(state, strict=False)
    except RuntimeError as error:  # shape mismatches
        raise InputError(where, f"weights do not fit the encoder built from the spec ({error})",
                         "probe with the same encoder spec that pretrained these weights")
