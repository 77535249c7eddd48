"""`python -m mscl launch`: each local job holds its own GPUs (mscl.train.launch).

No GPU is needed: the pool is declared as fake device ids ($MSCL_GPU_POOL, what the workflow
exports for a local run), and each "job" is a small Python command that records the devices it
was given (CUDA_VISIBLE_DEVICES) and when it held them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from itertools import combinations
from pathlib import Path

from mscl.train import gpu_locks, gpu_pool, launch

POOL = "0,1,2,3"
# A job: record (devices, start, end) as a JSON line, holding the devices for `seconds`.
RECORDING_JOB = (
    "import json, os, sys, time; start = time.time(); time.sleep(float(sys.argv[2])); "
    "line = json.dumps({'devices': os.environ['CUDA_VISIBLE_DEVICES'], 'assigned': os.environ.get('MSCL_ASSIGNED_GPUS'), "
    "'start': start, 'end': time.time()}); open(sys.argv[1], 'a').write(line + chr(10))"
)


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    inherited = ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", launch.ASSIGNED_ENV, gpu_pool.POOL_ENV, gpu_pool.JOBS_PER_DEVICE_ENV)
    env = {key: value for key, value in os.environ.items() if key not in inherited}
    return {**env, gpu_pool.POOL_ENV: POOL, gpu_locks.LOCK_DIR_ENV: str(tmp_path / "locks"), **extra}


def start_job(tmp_path: Path, gpus: int, record: Path, seconds: float, env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "mscl", "launch", "--gpus", str(gpus), "--", sys.executable, "-c", RECORDING_JOB, str(record), str(seconds)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def overlapping(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_concurrent_jobs_never_hold_the_same_device(tmp_path):
    """Ten jobs of 1 or 2 GPUs (14 device-holdings) started at once on a pool of four: each gets
    as many distinct devices as it asked for, none shares one with a job running at the same
    time, and the ones that found the pool full waited instead (their log says so)."""
    record = tmp_path / "held.jsonl"
    env = environment(tmp_path)
    asked = [2, 1, 1, 2, 1, 1, 2, 1, 2, 1]
    jobs = [start_job(tmp_path, gpus, record, 1.5, env) for gpus in asked]
    outputs = [job.communicate(timeout=120) for job in jobs]
    assert all(job.returncode == 0 for job in jobs), outputs
    held = records(record)
    assert sorted(len(item["devices"].split(",")) for item in held) == sorted(asked)
    for item in held:
        devices = item["devices"].split(",")
        assert len(set(devices)) == len(devices) and set(devices) <= set(POOL.split(","))
        assert item["assigned"] == item["devices"]  # what versions.json records
    for a, b in combinations(held, 2):
        if overlapping(a, b):
            assert not set(a["devices"].split(",")) & set(b["devices"].split(",")), (a, b)
    assert any("waiting for" in err for _, err in outputs)  # 14 holdings > 4 devices: some waited
    assert all("holds GPU(s)" in err for _, err in outputs)


def test_jobs_per_device_lets_that_many_jobs_share_a_device(tmp_path):
    record = tmp_path / "held.jsonl"
    env = environment(tmp_path, **{gpu_pool.POOL_ENV: "0", gpu_pool.JOBS_PER_DEVICE_ENV: "2"})
    jobs = [start_job(tmp_path, 1, record, 0.5, env) for _ in range(4)]
    for job in jobs:
        job.communicate(timeout=60)
    held = records(record)
    assert {item["devices"] for item in held} == {"0"}
    for item in held:  # when any job started, at most two held the device (the others waited)
        assert sum(other["start"] <= item["start"] < other["end"] for other in held) <= 2


def test_a_killed_job_gives_its_devices_back(tmp_path):
    """The kernel drops a dead holder's locks, whatever killed it (SIGKILL here)."""
    env = environment(tmp_path, **{gpu_pool.POOL_ENV: "0,1"})
    holder = start_job(tmp_path, 2, tmp_path / "never.jsonl", 600, env)
    lock_folder = tmp_path / "locks"
    deadline = time.monotonic() + 30
    while not (lock_folder.is_dir() and len(list(lock_folder.glob("*.lock"))) == 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # past the claim, into the exec'd command
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    record = tmp_path / "after.jsonl"
    started = time.monotonic()
    follower = start_job(tmp_path, 2, record, 0.0, env)
    follower.communicate(timeout=30)
    assert follower.returncode == 0 and records(record)[0]["devices"] == "0,1"
    assert time.monotonic() - started < 10


def test_a_job_of_no_gpu_sees_none_and_slurm_keeps_its_own_assignment(tmp_path):
    show = [sys.executable, "-c", "import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"]
    launched = lambda gpus, env: subprocess.run([sys.executable, "-m", "mscl", "launch", "--gpus", str(gpus), "--", *show], env=env, capture_output=True, text=True, check=True)  # noqa: E731
    run = lambda gpus, env: launched(gpus, env).stdout.strip()  # noqa: E731
    assert run(0, environment(tmp_path)) == "''"
    # A machine where no GPU was found (an empty pool): a GPU job sees none either, and says so.
    cpu_machine = launched(2, environment(tmp_path, **{gpu_pool.POOL_ENV: ""}))
    assert cpu_machine.stdout.strip() == "''"
    assert "asks for 2 GPU(s), but this run's GPU pool is empty" in cpu_machine.stderr and "CUDA_VISIBLE_DEVICES=''" in cpu_machine.stderr
    slurm = environment(tmp_path, SLURM_JOB_ID="42", CUDA_VISIBLE_DEVICES="3")
    assert run(1, slurm) == "'3'"  # SLURM's assignment, untouched
    outside = {key: value for key, value in environment(tmp_path).items() if key != gpu_pool.POOL_ENV}
    assert run(1, outside) == "None"  # no pool exported: not a local workflow run, nothing changes


def test_a_job_asking_for_more_devices_than_the_pool_has_fails_at_once(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mscl", "launch", "--gpus", "5", "--", sys.executable, "-c", "pass"],
        env=environment(tmp_path), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode != 0
    assert "asks for 5 GPU(s) but the local pool has 4 (0, 1, 2, 3)" in result.stderr and "local_gpus.devices" in result.stderr


def test_torchrun_runs_one_process_per_gpu_of_a_module_command(tmp_path):
    command = ["python", "-m", "mscl", "pretrain", "--data", "d"]
    assert launch.torchrun_command(command, 2) == ["python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "mscl", "pretrain", "--data", "d"]
    result = subprocess.run([sys.executable, "-m", "mscl", "launch", "--gpus", "2", "--torchrun", "--", "echo", "x"], capture_output=True, text=True)
    assert result.returncode == 2 and "--torchrun needs a `python -m MODULE ...` command" in result.stderr


def test_versions_json_records_the_assigned_devices(monkeypatch):
    import torch

    from mscl.train.runtime import software_versions

    monkeypatch.setenv(launch.ASSIGNED_ENV, "2,3")
    assert software_versions(torch.device("cpu"), "fp32")["assigned_gpus"] == "2,3"
    monkeypatch.delenv(launch.ASSIGNED_ENV)
    assert software_versions(torch.device("cpu"), "fp32")["assigned_gpus"] is None


def test_an_mscl_command_runs_in_the_launching_process_holding_its_devices(tmp_path, monkeypatch):
    """`launch -- python -m mscl CMD` of this interpreter runs CMD in the same process (no second
    interpreter start), with the devices set before anything imports torch and still held."""
    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    seen = {}

    def mscl_main(argv):
        seen.update(argv=argv, devices=os.environ["CUDA_VISIBLE_DEVICES"])
        seen["held"] = gpu_locks.try_claim(4, POOL.split(","), tmp_path / "locks", 1) is None  # 2 of 4 are taken
        return 7

    code = launch.main(["--gpus", "2", "--", sys.executable, "-m", "mscl", "probe", "--data", "d"], in_this_process=mscl_main)
    assert code == 7 and seen == {"argv": ["probe", "--data", "d"], "devices": "0,1", "held": True}
