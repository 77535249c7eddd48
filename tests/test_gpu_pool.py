"""Which GPUs a local run shares out, and Snakemake's `gpu` resource (mscl.train.gpu_pool).

No GPU is needed: NVML is a fake `pynvml` module (monkeypatched into sys.modules), nvidia-smi
and the torch probe are stand-in scripts, NVIDIA device files a patched glob.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from itertools import combinations
from pathlib import Path

import pytest
from snakemake.resources import Resources

from mscl.train import gpu_locks, gpu_pool
from test_workflow import REPO, job_env, snakemake

# A job: hold its device 1 s, then write {devices, start, end} to argv[1].
RECORDING_JOB = """import json, os, sys, time
start = time.time()
time.sleep(1.0)
held = {"devices": os.environ["CUDA_VISIBLE_DEVICES"], "start": start, "end": time.time()}
open(sys.argv[1], "w").write(json.dumps(held))
"""


def fake_nvml(count: int | None) -> types.ModuleType:
    """A `pynvml` whose nvmlInit fails as without a driver (count None) or that counts `count` GPUs."""
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init() -> None:
        if count is None:
            raise NVMLError("NVML Shared Library Not Found")

    module.NVMLError, module.nvmlInit, module.nvmlShutdown = NVMLError, init, lambda: None
    module.nvmlDeviceGetCount = lambda: count
    return module


@pytest.fixture
def bare_machine(monkeypatch, tmp_path):
    """No CUDA_VISIBLE_DEVICES, no pynvml, no nvidia-smi, no torch imported, no device file."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(gpu_pool.sys, "modules", {key: value for key, value in sys.modules.items() if key != "torch"})
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(gpu_pool, "nvidia_device_files", lambda: [])
    return tmp_path / "bin"


def stand_in(folder: Path, name: str, output: str) -> str:
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    path.chmod(0o755)
    return str(path)


def test_devices_are_asked_of_nvml_then_nvidia_smi_then_torch(bare_machine, monkeypatch):
    assert gpu_pool.find_devices() == gpu_pool.Found([], "", ["NVML: unavailable", "nvidia-smi: unavailable", "torch: unavailable"], answered=False)
    # torch: asked in a subprocess, only where NVIDIA device files exist.
    monkeypatch.setattr(gpu_pool, "nvidia_device_files", lambda: ["/dev/nvidia0"])
    monkeypatch.setattr(gpu_pool.sys, "executable", stand_in(bare_machine, "python-with-torch", "3\\n"))
    assert gpu_pool.find_devices().devices == ["0", "1", "2"] and gpu_pool.find_devices().source == "torch"
    # nvidia-smi before torch, NVML before both; a failing NVML counts as unavailable.
    stand_in(bare_machine, "nvidia-smi", "0\\n1\\n")
    assert (gpu_pool.find_devices().devices, gpu_pool.find_devices().source) == (["0", "1"], "nvidia-smi")
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(None))
    assert gpu_pool.find_devices().source == "nvidia-smi"
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(4))
    assert gpu_pool.find_devices() == gpu_pool.Found(["0", "1", "2", "3"], "NVML", ["NVML: 4 GPU(s)"], answered=True)
    # What the run itself was given wins: the devices torch would see.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1, 5")
    assert gpu_pool.find_devices().devices == ["1", "5"]


def test_a_cpu_machine_has_an_empty_pool_and_unlisted_gpus_stop_the_run(bare_machine, monkeypatch):
    cpu = gpu_pool.plan_local_gpus("auto", 1, local=True, environment={})
    assert (cpu.devices, cpu.slots, cpu.problem) == ([], 0, None)
    # NVIDIA device files, but nothing can list the GPUs (no NVML, no nvidia-smi, no torch).
    monkeypatch.setattr(gpu_pool, "nvidia_device_files", lambda: ["/dev/nvidia0", "/dev/nvidia1"])
    monkeypatch.setattr(gpu_pool.sys, "executable", str(bare_machine / "no-python"))
    unlisted = gpu_pool.plan_local_gpus("auto", 1, local=True, environment={})
    assert unlisted.devices == [] and unlisted.problem.startswith(
        "local_gpus.devices is auto, and this machine has NVIDIA device files (/dev/nvidia0, /dev/nvidia1) but no GPU could be "
        "listed (NVML: unavailable; nvidia-smi: unavailable; torch: unavailable)"
    )
    assert "Fix: list the GPUs this run may use, e.g. --config 'local_gpus={devices: [0, 1]}'" in unlisted.problem
    # Listed by hand, or torch says there is no usable GPU: no problem.
    assert gpu_pool.plan_local_gpus([0, 1], 1, local=True, environment={}).problem is None
    monkeypatch.setattr(gpu_pool.sys, "executable", stand_in(bare_machine, "python-with-torch", "0\\n"))
    assert gpu_pool.plan_local_gpus("auto", 1, local=True, environment={}).problem is None


def test_the_pool_is_the_listed_devices_and_none_on_a_cluster():
    listed = gpu_pool.plan_local_gpus([2, "3"], 2, local=True, environment={})
    assert (listed.devices, listed.slots, listed.source) == (["2", "3"], 4, "local_gpus.devices")
    with pytest.raises(ValueError, match="lists a device twice"):
        gpu_pool.plan_local_gpus([1, 1], 1, local=True, environment={})
    for cluster in (gpu_pool.plan_local_gpus([0], 1, local=False), gpu_pool.plan_local_gpus([0], 1, local=True, environment={"SLURM_JOB_ID": "7"})):
        assert (cluster.local, cluster.devices) == (False, [])


def test_snakemakes_gpu_resource_is_the_pool_unless_the_user_gave_one(monkeypatch):
    lines = []
    pool = gpu_pool.LocalGpus(["0", "1"], 2, local=True, source="local_gpus.devices")
    resources = Resources()
    gpu_pool.limit_gpu_jobs(resources, pool, lines.append)
    assert resources["gpu"].value == 4 and lines == ["GPU jobs at once: at most 4 (2 GPU(s) x 2 job(s) per device; Snakemake's gpu resource)"]
    given = Resources.parse(["gpu=1"], allow_expressions=False)
    gpu_pool.limit_gpu_jobs(given, pool, lines.append)
    assert given["gpu"].value == 1 and lines[-1] == "GPU jobs at once: 1 (--resources gpu=...), for a pool of 4 GPU slot(s)"
    cpu_machine = Resources()
    gpu_pool.limit_gpu_jobs(cpu_machine, gpu_pool.LocalGpus([], 1, local=True, source="none found"), lines.append)
    assert cpu_machine["gpu"].value == 0  # GPU jobs run, on the CPU: Snakemake scales their gpu down to 0
    cluster = Resources()
    gpu_pool.limit_gpu_jobs(cluster, gpu_pool.LocalGpus([], 1, local=False, source="the cluster's scheduler"), lines.append)
    assert "gpu" not in cluster
    # The pool reaches the jobs through the environment; a cluster run exports none.
    for name in (gpu_pool.POOL_ENV, gpu_pool.JOBS_PER_DEVICE_ENV):  # restored after the test: later tests' jobs inherit os.environ
        monkeypatch.delenv(name, raising=False)
    gpu_pool.share_local_gpus(pool, lines.append)
    assert os.environ[gpu_pool.POOL_ENV] == "0,1" and os.environ[gpu_pool.JOBS_PER_DEVICE_ENV] == "2"
    gpu_pool.share_local_gpus(gpu_pool.LocalGpus([], 1, local=False, source=""), lines.append)
    assert gpu_pool.POOL_ENV not in os.environ


def test_the_workflow_gives_snakemake_the_pool_as_its_gpu_resource(tmp_path):
    """The embedded default planned with a pool of 3 listed devices, 2 jobs each."""
    output = snakemake(tmp_path, "-n", "--config", "local_gpus={devices: [0, 1, 2], jobs_per_device: 2}").stdout
    assert "GPU jobs at once: at most 6 (3 GPU(s) x 2 job(s) per device; Snakemake's gpu resource)" in output


def gpu_jobs_snakefile(path: Path, devices: list[str], jobs: int) -> None:
    """A Snakefile whose `jobs` rules each launch a 1-GPU job, with the workflow's pool calls."""
    path.write_text(
        f"""
import sys
sys.path.insert(0, {str(REPO / "src")!r})
from mscl.train.gpu_pool import LocalGpus, limit_gpu_jobs, share_local_gpus

GPUS = LocalGpus({devices!r}, 1, local=workflow.local_exec, source="test")
limit_gpu_jobs(workflow.global_resources, GPUS, report=print)


onstart:
    share_local_gpus(GPUS, report=print)


rule all:
    input:
        expand("held/{{index}}.json", index=range({jobs})),


rule gpu_job:
    output:
        "held/{{index}}.json",
    log:
        "logs/{{index}}.log",
    resources:
        gpu=1,
    shell:
        "{sys.executable} -m mscl launch --gpus 1 -- {sys.executable} record.py {{output}} 2> {{log}}"
"""
    )
    (path.parent / "record.py").write_text(RECORDING_JOB)


@pytest.mark.slow
def test_snakemake_starts_no_more_gpu_jobs_than_the_pool_holds(tmp_path):
    """Five 1-GPU jobs, 5 cores, a pool of 2: never more than 2 at once (and 2 at some point),
    and no job waits in `launch`: Snakemake held the others back."""
    gpu_jobs_snakefile(tmp_path / "Snakefile", ["0", "1"], 5)
    env = {**job_env(), gpu_locks.LOCK_DIR_ENV: str(tmp_path / "locks"), "PYTHONPATH": str(REPO / "src")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(tmp_path / "Snakefile"), "--directory", str(tmp_path), "--cores", "5", "--workflow-profile", "none"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    held = [json.loads(path.read_text()) for path in sorted((tmp_path / "held").iterdir())]
    assert len(held) == 5 and {item["devices"] for item in held} == {"0", "1"}
    at_once = max(sum(other["start"] <= item["start"] < other["end"] for other in held) for item in held)
    assert at_once == 2
    for a, b in combinations(held, 2):
        assert not (a["start"] < b["end"] and b["start"] < a["end"]) or a["devices"] != b["devices"]
    assert not any("waiting for" in path.read_text() for path in (tmp_path / "logs").iterdir())
