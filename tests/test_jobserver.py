"""The job server (mscl.jobserver): a training job run by a forked worker gives what it gives in
its own process, and behaves like one for its caller (exit status, output, signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from mscl import jobserver, layout, usage
from mscl.report.cost import cost_frame
from test_report_tables import write_run
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
    for name in ("encoder.pt", "head.pt"):
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
    results, row = tmp_path / "results", "900.0\t0:15:00\t20.0\t-\t-\t-\t-\t-\t-\t3.6"
    paths = []
    for seed, log_text in ((0, "pretrain epoch 1/1: ...\n" + usage.USAGE_LINE.format(cpu_s=720.0, max_rss_mib=2048.0) + "\n"), (1, "no worker\n")):
        paths.append(write_run(results, ("coco", "resnet8", "any", 64, seed), [row], [row]))
        log = Path(layout.job_log(str(results), "pretrain", layout.run_name("coco", "resnet8", "any", 64, seed)))
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(log_text)
    pretrain = cost_frame(paths).set_index("rule").loc["pretrain"]
    assert pretrain["jobs"] == 2 and pretrain["wall_hours"] == pytest.approx(1800 / 3600)
    assert pretrain["cpu_hours"] == pytest.approx((720.0 + 3.6) / 3600) and pretrain["max_rss_gb"] == pytest.approx(2.0)
    assert usage.parse_usage("x\n" + usage.USAGE_LINE.format(cpu_s=1.5, max_rss_mib=3.5)) == {"cpu_s": 1.5, "max_rss_mib": 3.5}
    assert usage.parse_usage("nothing here") is None


# ------------------------------------------------------- the server checks its own assumptions

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def start_server(monkeypatch, tmp_path):
    """Start job servers preloading the given test modules (tests/ on PYTHONPATH, for the
    servers and the jobs alike), owned by this test process; stopped after the test."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    started = []

    def start(preload: list[str], owner: int | None = None) -> jobserver.JobServer:
        server = jobserver.start(sys.executable, str(tmp_path / "server.log"), owner or os.getpid(), preload=preload)
        assert server is not None, (tmp_path / "server.log").read_text()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_a_server_starts_under_a_tmpdir_too_deep_for_a_unix_socket(start_server, monkeypatch, tmp_path):
    """A socket path is limited to 107 bytes; under a deep TMPDIR the socket goes to /tmp."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert jobserver.socket_base(os.getpid()) == jobserver.SHORT_TMPDIR
    server = start_server(["served_commands"])
    assert server.socket.startswith(jobserver.SHORT_TMPDIR + os.sep) and os.path.exists(server.socket)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert jobserver.socket_base(os.getpid()) == str(tmp_path)  # a short TMPDIR keeps it


@pytest.fixture
def stand_in_server(start_server):
    """A job server whose `pretrain` is tests/served_commands.py (no training)."""
    return start_server(["served_commands"])


def running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stand_in_job(action: str, tmp_path: Path, socket: str, **env_extra: str) -> subprocess.Popen:
    """`python -m mscl pretrain --data ACTION ...` served by a stand-in server (see served_commands)."""
    return mscl(["pretrain", "--data", action, "--spec", "{}", "--out", "out"], tmp_path, socket, env_extra=env_extra,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def started_worker(job: subprocess.Popen) -> int:
    """The worker's pid, once the stand-in command runs (its line is in the job's stderr)."""
    lines = []
    while not any(line.startswith("served command:") for line in lines):
        line = job.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
    worker = worker_pid("".join(lines))
    assert worker is not None and worker != job.pid
    return worker


@pytest.mark.parametrize("number", [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM], ids=lambda n: signal.Signals(n).name)
def test_a_worker_killed_by_signal_n_reports_128_plus_n(stand_in_server, tmp_path, number):
    """What a shell reports for a job killed by a signal; SIGKILL is what the OOM killer sends."""
    job = stand_in_job("sleep", tmp_path, stand_in_server.socket)
    worker = started_worker(job)
    os.kill(worker, number)
    code, _, err = finished(job, timeout=60)
    assert code == 128 + number, err
    if number != signal.SIGTERM:  # SIGTERM is the job's own clean way out
        assert f"worker {worker} was killed by {signal.Signals(number).name} (exit {128 + number})" in err
    assert f"worker {worker} was killed by" in (tmp_path / "server.log").read_text() or number == signal.SIGTERM


@pytest.mark.parametrize("action, code", [("exit0", 0), ("exit3", 3), ("raise", 1)])
def test_the_job_exit_path_runs_atexit_handlers_and_keeps_the_exit_status(stand_in_server, tmp_path, action, code):
    """The worker leaves through the interpreter's normal exit, as `python -m mscl` does: the
    job's atexit handlers run, its status (or an uncaught exception's 1) reaches the job."""
    status, _, err = finished(stand_in_job(action, tmp_path, stand_in_server.socket), timeout=60)
    assert status == code, err
    assert worker_pid(err) is not None and "usage: cpu_s=" in err
    assert (tmp_path / "out" / "atexit.txt").read_text() == "ran"
    if action == "raise":
        assert "RuntimeError: raised by the served command" in err


def test_a_killed_job_process_gets_its_worker_terminated(stand_in_server, tmp_path):
    job = stand_in_job("sleep", tmp_path, stand_in_server.socket)
    worker = started_worker(job)
    job.kill()
    job.wait(timeout=10)
    wait_for(lambda: not psutil_exists(worker), 30, f"worker {worker} to end")
    log = (tmp_path / "server.log").read_text()
    assert "is gone; terminating the worker" in log and f"worker {worker} was killed by SIGTERM" in log


def test_a_launched_jobs_gpu_lock_goes_with_its_worker(stand_in_server, tmp_path):
    """`mscl launch --gpus 1 -- python -m mscl pretrain` served: the worker receives the job's
    GPU lock with its stdio, so a killed job process leaves the device locked until the worker
    has ended too (held stopped here, so that the server's SIGTERM waits)."""
    import psutil

    from mscl.train import gpu_locks, gpu_pool

    folder = tmp_path / "locks"
    env = {gpu_pool.POOL_ENV: "0", gpu_locks.LOCK_DIR_ENV: str(folder)}
    command = ["launch", "--gpus", "1", "--", sys.executable, "-m", "mscl", "pretrain", "--data", "sleep", "--spec", "{}", "--out", "out"]
    job = mscl(command, tmp_path, stand_in_server.socket, env_extra=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    worker = started_worker(job)
    assert str(folder / "gpu-0.slot0.lock") in [opened.path for opened in psutil.Process(worker).open_files()]
    os.kill(worker, signal.SIGSTOP)
    try:
        job.kill()
        job.wait(timeout=10)
        assert gpu_locks.try_claim(1, ["0"], folder, 1) is None  # the job process is gone, its worker is not
    finally:
        os.kill(worker, signal.SIGCONT)  # it takes the server's SIGTERM and ends
    wait_for(lambda: not psutil_exists(worker), 30, f"worker {worker} to end")
    claim = gpu_locks.try_claim(1, ["0"], folder, 1)
    assert claim is not None and claim.devices == ["0"]
    claim.release()


def test_a_killed_server_takes_its_workers_along_and_the_job_fails(stand_in_server, tmp_path):
    """PR_SET_PDEATHSIG: no worker outlives its server; the job process says so and fails."""
    job = stand_in_job("sleep", tmp_path, stand_in_server.socket)
    worker = started_worker(job)
    stand_in_server.process.kill()
    code, _, err = finished(job, timeout=60)
    assert code == jobserver.EXIT_LOST_WORKER, err
    assert f"the job server ended before worker {worker} reported; the worker was stopped" in err
    assert not running(worker)  # ended; a zombie until whatever adopted it reaps it
    # The next job finds no server and runs in its own process.
    code, _, err = finished(mscl(["pretrain", "--data", "no/such/folder", "--spec", json.dumps(SPEC), "--out", "out2"], tmp_path,
                                 stand_in_server.socket, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert code == 1 and "not reachable" in err and "mscl pretrain: error:" in err


def test_a_server_whose_owner_ends_stops_its_workers_and_reports_them(start_server, tmp_path):
    owner = subprocess.Popen(["sleep", "60"])
    server = start_server(["served_commands"], owner=owner.pid)
    job = stand_in_job("sleep", tmp_path, server.socket)
    worker = started_worker(job)
    owner.kill()
    owner.wait()
    code, _, err = finished(job, timeout=60)
    assert code == 128 + signal.SIGTERM and not psutil_exists(worker)
    server.process.wait(timeout=30)
    assert not Path(server.socket).parent.exists()  # socket and its folder removed
    assert "stopped after 1 jobs" in (tmp_path / "server.log").read_text()


def test_the_server_refuses_to_fork_with_a_thread_pool_running(start_server, tmp_path):
    """A server whose preload started torch's OpenMP pool cannot vouch for a fork: it refuses,
    says so in its log and the job's, and the job runs in its own process."""
    server = start_server(["thread_pool", "served_commands"])
    code, _, err = finished(stand_in_job("exit0", tmp_path, server.socket), timeout=120)
    # In its own process `pretrain` is the real one: --data exit0 is no dataset.
    assert code == 1 and "mscl pretrain: error:" in err and worker_pid(err) is None
    assert "job server refused this job (" in err and "thread(s) besides its own" in err and "running in this process" in err
    assert "refused a job (pretrain)" in (tmp_path / "server.log").read_text()


def test_the_server_refuses_a_job_whose_import_time_environment_differs(stand_in_server, tmp_path):
    code, _, err = finished(stand_in_job("exit0", tmp_path, stand_in_server.socket, HF_HOME=str(tmp_path / "hf")), timeout=120)
    assert code == 1 and worker_pid(err) is None
    assert "import-time environment variables differ from the server's: HF_HOME" in err
    # The same job with the server's environment is served.
    code, _, err = finished(stand_in_job("exit0", tmp_path, stand_in_server.socket), timeout=60)
    assert code == 0 and worker_pid(err) is not None


def test_fork_hazards_name_every_state_the_server_cannot_vouch_for(monkeypatch):
    """Unit checks of the refusal reasons a test server cannot easily be put into (CUDA needs
    a GPU). This test process runs threads of its own: the census is checked above."""
    import torch

    monkeypatch.setattr(jobserver, "foreign_threads", lambda: [])

    environment = {"OMP_NUM_THREADS": "1", "PYTHONPATH": "x"}
    request = {"interpreter": jobserver.interpreter(), "env": dict(environment), "affinity": sorted(os.sched_getaffinity(0))}
    assert jobserver.fork_hazards(request, environment) == []
    other_python = {**request, "interpreter": {**jobserver.interpreter(), "prefix": "/other/venv"}}
    assert "the job runs" in jobserver.fork_hazards(other_python, environment)[0]
    for env in ({"PYTHONPATH": "x"}, {**environment, "MKL_NUM_THREADS": "2"}, {**environment, "OMP_NUM_THREADS": "0"}):
        assert "thread counts" in " ".join(jobserver.fork_hazards({**request, "env": env}, environment))
    assert "PYTHONPATH" in jobserver.fork_hazards({**request, "env": {**environment, "PYTHONPATH": "y"}}, environment)[0]
    assert "CPUs" in jobserver.fork_hazards({**request, "affinity": [10_000]}, environment)[0]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert jobserver.fork_hazards(request, environment) == ["CUDA is initialised in the server"]


def test_the_server_imports_with_the_nvml_cuda_check_and_one_thread_per_library(stand_in_server, tmp_path):
    code, _, err = finished(stand_in_job("environment", tmp_path, stand_in_server.socket), timeout=60)
    assert code == 0, err
    environment = json.loads((tmp_path / "out" / "server_environment.json").read_text())
    assert environment["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
    assert all(environment[name] == "1" for name in jobserver.THREAD_VARIABLES)


def test_the_preloaded_server_runs_no_thread_but_its_own_and_jemallocs(server):
    """The workflow's server after importing PRELOAD: nothing to refuse (the tests above that
    expect a worker rely on it)."""
    names = sorted(Path(f"/proc/{server.process.pid}/task/{task}/comm").read_text().strip() for task in os.listdir(f"/proc/{server.process.pid}/task"))
    assert set(names) <= {"python", *jobserver.FORK_SAFE_THREADS} and names.count("python") == 1


def test_a_job_stops_when_the_snakemake_process_that_started_it_ends(tmp_path):
    """mscl.interrupt.stop_when_owner_ends (every `python -m mscl` job of a local run)."""
    from mscl.interrupt import OWNER_ENV

    owner = subprocess.Popen(["sleep", "60"])
    job = subprocess.Popen(
        [sys.executable, "-c", "from mscl.interrupt import stop_when_owner_ends; import time; stop_when_owner_ends(); time.sleep(60)"],
        env={**os.environ, OWNER_ENV: str(owner.pid)}, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(1.5)
    assert job.poll() is None
    owner.kill()
    owner.wait()
    _, err = job.communicate(timeout=10)
    assert job.returncode == -signal.SIGTERM and f"the Snakemake process {owner.pid} that started this job is gone" in err
