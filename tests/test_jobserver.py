"""The job server (mscl.jobserver): a training job run by a forked worker gives what it gives in
its own process, and behaves like one for its caller (exit status, output, signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from mscl import jobserver
from mscl.report.cost import cost_frame
from test_train import assert_same_tensors, image_data  # noqa: F401 - the fixture
from test_workflow import psutil_exists, wait_for, worker_pid

RESNET8 = {"kind": "cifar_resnet", "widths": [8, 16, 32], "blocks": 1}
SPEC = {
    "dataset": "coco",
    "encoder_name": "resnet8",
    "encoder": RESNET8,
    "loss": "simdissim",
    "batch_size": 8,
    "seed": 3,
    "pretrain": {"epochs": 2, "image_size": 16, "projection_dim": 16, "crop_scale_min": 0.8},
    "probe": {"epochs": 3, "batch_size": 8},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """A job server with the workflow's preload, owned by this test process."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    started = jobserver.start(sys.executable, str(log), os.getpid())
    assert started is not None, log.read_text()
    yield started
    started.stop()
    assert not Path(started.socket).exists()


def mscl(args: list[str], cwd: Path, socket: str | None, env_extra: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """`python -m mscl ARGS` as a job would run it, through the server at `socket` or alone."""
    env = {key: value for key, value in os.environ.items() if key != jobserver.SOCKET_ENV}
    if socket is not None:
        env[jobserver.SOCKET_ENV] = socket
    env["OMP_NUM_THREADS"] = "1"
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "mscl", *args], cwd=cwd, env=env, text=True, **popen)


def finished(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out or "", err or ""


def train_and_probe(data: Path, workdir: Path, socket: str | None, spec: dict = SPEC) -> str:
    """Pretrain and probe into workdir/run (relative paths: they resolve in the job's own
    working directory); the two jobs' stderr."""
    workdir.mkdir(parents=True, exist_ok=True)
    logs = ""
    for stage in (
        ["pretrain", "--data", str(data), "--spec", json.dumps(spec), "--out", "run/pretrain"],
        ["probe", "--data", str(data), "--pretrained", "run/pretrain", "--spec", json.dumps(spec), "--out", "run/probe"],
    ):
        code, _, err = finished(mscl(stage, workdir, socket, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        assert code == 0, err[-3000:]
        logs += err
    return logs


@pytest.mark.slow
def test_a_job_run_by_a_worker_equals_the_same_job_in_its_own_process(server, image_data, tmp_path):  # noqa: F811
    served = train_and_probe(image_data, tmp_path / "served", server.socket)
    alone = train_and_probe(image_data, tmp_path / "alone", None)
    assert worker_pid(served) is not None and worker_pid(alone) is None
    assert served.count("mscl job-server worker usage: cpu_s=") == 2 and "usage" not in alone
    assert "SIGTERM" not in served  # a finished worker is not "stopped" when its job process leaves
    for name in ("encoder.pt", "checkpoint.pt"):
        assert_same_tensors(
            torch.load(tmp_path / "served/run/pretrain" / name, weights_only=True),
            torch.load(tmp_path / "alone/run/pretrain" / name, weights_only=True),
        )
    metrics = [json.loads((tmp_path / side / "run/probe/metrics.json").read_text()) for side in ("served", "alone")]
    for key in ("test", "val_best", "best_epoch"):
        assert metrics[0][key] == metrics[1][key]
    scores = [pd.read_parquet(tmp_path / side / "run/probe/test_scores.parquet") for side in ("served", "alone")]
    pd.testing.assert_frame_equal(*scores)
    # The worker applied the job's OMP_NUM_THREADS (1), not the server's default.
    assert json.loads((tmp_path / "served/run/probe/versions.json").read_text())["torch_threads"] == 1


def test_exit_status_and_error_message_reach_the_job_process(server, tmp_path):
    code, out, err = finished(
        mscl(["pretrain", "--data", "no/such/folder", "--spec", json.dumps(SPEC), "--out", "out"], tmp_path, server.socket,
             stdout=subprocess.PIPE, stderr=subprocess.PIPE),
    )
    assert code == 1 and worker_pid(err) is not None
    assert "mscl pretrain: error:" in err and "no/such/folder" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_stopped_job_stops_its_worker(server, image_data, tmp_path, how):  # noqa: F811
    """SIGTERM to the job process is forwarded (the worker stops like a job on its own: last
    checkpoint kept, exit 143); after SIGKILL the worker notices and terminates itself. The
    job's checkpoint interval (0: every epoch) reaches the worker, which imported the training
    module before the job existed."""
    spec = {**SPEC, "pretrain": {**SPEC["pretrain"], "epochs": 10_000, "max_steps_per_epoch": 1}}
    log = tmp_path / "job.log"
    with log.open("w") as handle:
        job = mscl(["pretrain", "--data", str(image_data), "--spec", json.dumps(spec), "--out", "run"], tmp_path, server.socket,
                   env_extra={"MSCL_CHECKPOINT_INTERVAL_S": "0"}, stdout=handle, stderr=subprocess.STDOUT)
    wait_for(lambda: (tmp_path / "run" / "checkpoint.pt").exists(), 30, "a first checkpoint")
    worker = worker_pid(log.read_text())
    assert worker is not None and worker != job.pid
    job.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    job.wait(timeout=60)
    wait_for(lambda: not psutil_exists(worker), 30, f"worker {worker} to end")
    if how == "sigterm":
        assert job.returncode == 143, log.read_text()[-2000:]
        assert "usage: cpu_s=" in log.read_text()
    assert not (tmp_path / "run" / "encoder.pt").exists()
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["epoch"] >= 1


def test_without_a_reachable_server_the_job_runs_in_its_own_process(tmp_path):
    code, _, err = finished(
        mscl(["pretrain", "--data", "no/such/folder", "--spec", json.dumps(SPEC), "--out", "out"], tmp_path, str(tmp_path / "gone.sock"),
             stdout=subprocess.PIPE, stderr=subprocess.PIPE),
    )
    assert code == 1 and "not reachable" in err and "running in this process" in err
    assert worker_pid(err) is None and "mscl pretrain: error:" in err


def test_the_server_leaves_when_its_owner_ends(tmp_path):
    owner = subprocess.Popen(["sleep", "60"])
    started = jobserver.start(sys.executable, str(tmp_path / "server.log"), owner.pid, preload=["json"])
    assert started is not None and Path(started.socket).exists()
    try:
        owner.kill()
        owner.wait()
        started.process.wait(timeout=10 * jobserver.POLL_SECONDS)
        assert not Path(started.socket).exists()
        assert "stopped after 0 jobs" in (tmp_path / "server.log").read_text()
    finally:
        started.stop()


@pytest.mark.parametrize(
    "enabled, local, isolated", [(False, True, False), (True, False, False), (True, True, True)], ids=["off", "cluster", "conda"]
)
def test_the_workflow_starts_no_server_when_off_on_a_cluster_or_in_isolated_environments(monkeypatch, tmp_path, enabled, local, isolated):
    monkeypatch.delenv(jobserver.SOCKET_ENV, raising=False)
    said = []
    assert jobserver.start_for_workflow(enabled, local, isolated, str(tmp_path / "server.log"), said.append) is None
    assert jobserver.SOCKET_ENV not in os.environ and not (tmp_path / "server.log").exists() and not said


def test_the_cost_table_takes_cpu_and_memory_from_the_worker_log(tmp_path):
    """Snakemake measured the thin job process; the worker's own figures in the log win. A job
    without a worker line keeps the benchmark's figures."""
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    paths = []
    for seed, log_text in ((0, "pretrain epoch 1/1: ...\n" + jobserver.USAGE_LINE.format(cpu_s=720.0, max_rss_mib=2048.0) + "\n"), (1, "no worker\n")):
        run = f"pretrain/coco/resnet8/any/bs64/seed{seed}"
        benchmark = tmp_path / "results" / "benchmarks" / f"{run}.tsv"
        log = tmp_path / "results" / "logs" / f"{run}.log"
        for path in (benchmark, log):
            path.parent.mkdir(parents=True, exist_ok=True)
        benchmark.write_text(header + "900.0\t0:15:00\t20.0\t-\t-\t-\t-\t-\t-\t3.6\n")
        log.write_text(log_text)
        paths.append(benchmark)
    row = cost_frame(paths).iloc[0]
    assert row["jobs"] == 2 and row["wall_hours"] == pytest.approx(1800 / 3600)
    assert row["cpu_hours"] == pytest.approx((720.0 + 3.6) / 3600) and row["max_rss_gb"] == pytest.approx(2.0)
    assert jobserver.parse_usage("x\n" + jobserver.USAGE_LINE.format(cpu_s=1.5, max_rss_mib=3.5)) == {"cpu_s": 1.5, "max_rss_mib": 3.5}
    assert jobserver.parse_usage("nothing here") is None
