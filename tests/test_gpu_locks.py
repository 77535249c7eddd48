"""GPU locks every user and run of one machine share (mscl.train.gpu_locks).

No GPU is needed: devices are fake ids, and a "job" is `python -m mscl launch --gpus N -- python
-c ...` that records the devices it was given. The two-user test runs the second user's jobs
with `setpriv` as user nobody (uid 65534) from a copy of src/ it can read, with an interpreter
it may run; it is skipped, saying why, where that is impossible (not root, no setpriv).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mscl.train import gpu_locks, gpu_pool

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
# A job: write {devices, start, end} as a JSON line to argv[1], holding its devices argv[2] s.
RECORDING_JOB = (
    "import json, os, sys, time; start = time.time(); time.sleep(float(sys.argv[2])); "
    "line = json.dumps({'devices': os.environ['CUDA_VISIBLE_DEVICES'], 'start': start, 'end': time.time()}); "
    "open(sys.argv[1], 'a').write(line + chr(10))"
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def job_environment(folder: Path, pool: str, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", "MSCL_JOB_SERVER")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return {**env, gpu_pool.POOL_ENV: pool, gpu_locks.LOCK_DIR_ENV: str(folder), **extra}


def launch(gpus: int, record: Path, seconds: float, env: dict[str, str], python: str = sys.executable, prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    command = [*prefix, python, "-m", "mscl", "launch", "--gpus", str(gpus), "--", python, "-c", RECORDING_JOB, str(record), str(seconds)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_until_held(folder: Path, device: str, timeout_s: float = 30) -> None:
    """Until a job holds `device` (its lock file's flock is taken)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        claim = gpu_locks.try_claim(1, [device], folder, 1) if folder.is_dir() else None
        if claim is None and (folder / f"gpu-{device}.slot0.lock").exists():
            return
        if claim is not None:
            claim.release()
        time.sleep(0.05)
    raise AssertionError(f"nobody took GPU {device} within {timeout_s} s")


def test_the_lock_folder_and_files_are_every_users_whatever_the_umask(tmp_path):
    """Created under a umask that shares nothing (077): the folder (named or default) and the
    queue folder 1777, lock files 0666; the holder's line is in its file."""
    previous = os.umask(0o077)
    try:
        folder = gpu_locks.lock_folder({gpu_locks.LOCK_DIR_ENV: str(tmp_path / "named" / "locks")})
        claim = gpu_locks.try_claim(2, ["0", "1"], folder, 1)
        gpu_locks.shared_folder(folder / gpu_locks.QUEUE_FOLDER)
    finally:
        os.umask(previous)
    assert claim is not None and claim.devices == ["0", "1"]
    assert mode_of(folder) == mode_of(folder / gpu_locks.QUEUE_FOLDER) == 0o1777
    for device in ("0", "1"):
        lock = folder / f"gpu-{device}.slot0.lock"
        assert mode_of(lock) == 0o666 and f"pid {os.getpid()} " in lock.read_text() and f"holds GPU {device}" in lock.read_text()
    assert [path.name for path in folder.parent.iterdir()] == ["locks"]  # nothing left of its making
    claim.release()


def test_a_stale_ticket_is_passed_over_and_a_live_one_keeps_its_place(tmp_path):
    queue = gpu_locks.shared_folder(tmp_path / "queue")
    first = gpu_locks.take_ticket(queue, 2)
    second = gpu_locks.take_ticket(queue, 1)
    assert gpu_locks.waiting_before(queue, second.path.name) == [first.path.name]
    assert gpu_locks.waiting_before(queue, first.path.name) == []
    assert f"waits for 2 GPU(s)" in first.path.read_text()
    os.close(first.handle)  # its job died while waiting: the file stays, its flock is gone
    assert gpu_locks.waiting_before(queue, second.path.name) == []
    assert not first.path.exists()  # removed by the job that found it stale
    second.leave()
    assert os.listdir(queue) == []


@pytest.mark.slow
def test_waiting_jobs_are_served_first_come_first_served(tmp_path):
    """Two 1-GPU jobs hold a pool of two; a 2-GPU job arrives, then a stream of 1-GPU jobs. The
    2-GPU job starts as soon as both devices are free, before any job that came after it
    (without the queue the later 1-GPU jobs would take each device as it frees)."""
    folder, record = tmp_path / "locks", tmp_path / "held.jsonl"
    env = job_environment(folder, "0,1")
    holders = [launch(1, record, seconds, env) for seconds in (2.0, 3.0)]
    for device in ("0", "1"):
        wait_until_held(folder, device)
    pair = launch(2, record, 0.5, env)
    time.sleep(0.5)
    stream = []
    for _ in range(3):
        stream.append(launch(1, record, 1.0, env))
        time.sleep(0.4)
    outputs = [job.communicate(timeout=120) for job in [*holders, pair, *stream]]
    assert all(job.returncode == 0 for job in [*holders, pair, *stream]), outputs
    held = records(record)
    (pair_held,) = [item for item in held if item["devices"] == "0,1"]
    later = [item for item in held if item["start"] > pair_held["start"]]
    assert len(later) == 3 and all(item["start"] >= pair_held["end"] for item in later)
    assert "waiting for 2 free GPU(s) of 0, 1" in outputs[2][1] and "0 job(s) ahead" in outputs[2][1]
    assert "1 job(s) ahead" in outputs[3][1]  # the first of the stream queued behind the pair
    assert os.listdir(folder / gpu_locks.QUEUE_FOLDER) == []  # every ticket gone with its job


def unprivileged_python(base: Path) -> tuple[str, Path]:
    """An interpreter user nobody may run, and a copy of src/ it can read (under `base`); skips
    the test, saying why, when there is none."""
    if os.geteuid() != 0:
        pytest.skip("starting a second user's process needs root (setpriv)")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to start a process as another user")
    source = base / "src"
    shutil.copytree(REPO / "src" / "mscl", source / "mscl", ignore=shutil.ignore_patterns("__pycache__"))
    for path in [base, *base.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    candidates = [sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")]
    for python in filter(None, candidates):
        probe = subprocess.run(
            # Import mscl, then start the interpreter again by its path, as `launch` runs a job.
            [*as_nobody(), python, "-c", "import os, sys, mscl.train.launch; os.execv(sys.executable, [sys.executable, '-c', ''])"],
            env={"PYTHONPATH": str(source), "HOME": str(base)},
            capture_output=True, text=True,
        )  # fmt: skip
        if probe.returncode == 0:
            return python, source
    pytest.skip(f"no Python interpreter user nobody may run and import mscl with ({candidates}; the venv's may sit under a private home)")


def as_nobody() -> tuple[str, ...]:
    return ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


@pytest.fixture
def shared_base():
    """A folder user nobody can reach (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="mscl-two-users-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_two_users_share_one_machines_gpus_without_a_traceback(shared_base):
    """Root's job holds GPU 0 of a pool of two (root's umask shares nothing); user nobody's job
    gets GPU 1, from the folder and files root's job made. A lock file nobody cannot open
    (0600, as made by hand) is passed over with a line naming it and the fix, and nobody's job
    waits for the other device; a job that would need it stops with that line as its error,
    never a traceback. A lock folder nobody cannot write to, or make, is one line too."""
    python, source = unprivileged_python(shared_base)
    folder, records_dir = shared_base / "locks", shared_base / "records"
    records_dir.mkdir(mode=0o777)
    records_dir.chmod(0o777)
    env = job_environment(folder, "0,1", PYTHONPATH=str(source), HOME=str(shared_base))
    root_record, nobody_record = records_dir / "root.jsonl", records_dir / "nobody.jsonl"
    root_job = subprocess.Popen(
        ["sh", "-c", 'umask 077 && exec "$@"', "sh", python, "-m", "mscl", "launch", "--gpus", "1", "--", python, "-c", RECORDING_JOB, str(root_record), "2.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until_held(folder, "0")
    # The second user, while root's job holds GPU 0: the free one.
    code_err = launch(1, nobody_record, 0.0, env, python, as_nobody()).communicate(timeout=60)
    assert [item["devices"] for item in records(nobody_record)] == ["1"], code_err
    assert "Traceback" not in code_err[1]
    assert mode_of(folder) == 0o1777 and mode_of(folder / "gpu-1.slot0.lock") == 0o666

    # GPU 1's lock file made unusable for nobody: passed over, and nobody's job waits for GPU 0.
    unusable = folder / "gpu-1.slot0.lock"
    unusable.chmod(0o600)
    waiting = launch(1, nobody_record, 0.0, env, python, as_nobody())
    too_many = launch(2, nobody_record, 0.0, env, python, as_nobody())
    _, too_many_err = too_many.communicate(timeout=60)
    assert too_many.returncode == 1 and "Traceback" not in too_many_err
    assert too_many_err.strip().splitlines()[-1] == (
        f"mscl launch: error: the GPU lock file {unusable} (user root, mode 600) cannot be opened by user nobody. "
        f"Fix: `chmod 666 {unusable}` as its owner or root, or remove it while no job of its owner runs"
    )
    _, waiting_err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and "Traceback" not in waiting_err, waiting_err
    assert f"launch: passing over a lock file, since the GPU lock file {unusable}" in waiting_err
    assert [item["devices"] for item in records(nobody_record)] == ["1", "0"]  # GPU 0, once root's job was done
    assert root_job.wait(timeout=60) == 0 and records(root_record)[0]["end"] <= records(nobody_record)[1]["start"]

    # A lock folder made without the shared mode (by hand, or by an older version): one line.
    private = shared_base / "private-locks"
    private.mkdir(mode=0o755)
    private.chmod(0o755)
    refused = launch(1, nobody_record, 0.0, {**env, gpu_locks.LOCK_DIR_ENV: str(private)}, python, as_nobody())
    _, refused_err = refused.communicate(timeout=60)
    assert refused.returncode == 1 and "Traceback" not in refused_err
    assert refused_err.strip().splitlines()[-1] == (
        f"mscl launch: error: the GPU lock folder {private} (user root, mode 755) is not writable by user nobody. "
        f"Fix: `chmod 1777 {private}` as its owner or root (once, then every user's jobs share it), or set "
        f"$MSCL_GPU_LOCK_DIR to a folder every user of this machine can write to"
    )
    # ... and one nobody cannot make at all.
    unmakeable = private / "locks"
    refused = launch(1, nobody_record, 0.0, {**env, gpu_locks.LOCK_DIR_ENV: str(unmakeable)}, python, as_nobody())
    _, refused_err = refused.communicate(timeout=60)
    assert refused.returncode == 1 and refused_err.strip().splitlines()[-1] == (
        f"mscl launch: error: the GPU lock folder {unmakeable} cannot be made by user nobody (Permission denied). Fix: set "
        f"$MSCL_GPU_LOCK_DIR to a folder every user of this machine can write to (e.g. one under /tmp)"
    )


def test_a_lock_folder_another_job_has_just_made_is_used_as_it_is(tmp_path, monkeypatch):
    """Two jobs starting at once on a fresh machine: both find no folder, the other one makes it
    first (here: before this job's look ends). This job must use that folder, not put one of its
    own in its place: lock files the other job makes there would otherwise be lost to this one
    (a folder made under another name and renamed into place did replace it: 6 of 80 such starts
    under load failed making the queue folder)."""
    folder = tmp_path / "locks"
    looked = []

    def made_meanwhile(path):
        if path == folder and not looked:  # the other job makes it right after this job looked
            path.mkdir()
            path.chmod(gpu_locks.SHARED_FOLDER_MODE)
            looked.append(path.stat().st_ino)
            return False
        return os.path.isdir(path)

    monkeypatch.setattr(Path, "is_dir", made_meanwhile)
    assert gpu_locks.shared_folder(folder) == folder
    assert [folder.stat().st_ino] == looked  # the other job's folder, not one put in its place
    assert mode_of(folder) == gpu_locks.SHARED_FOLDER_MODE and not [p for p in tmp_path.iterdir() if p != folder]
