"""A fork server for the training jobs: torch is imported once per Snakemake run, not per job.

Why: every pretrain, probe and cache-prefix job is its own `python -m mscl ...` process, as a
cluster needs, and each one used to spend about 3 s importing torch, torch._dynamo (which
torch.optim loads on first use), pandas, and for text jobs transformers and peft: 4-6 s of
start-up against 5-15 s of training per job in the embedded default (`mscl bench dag`). The
same idea as multiprocessing's forkserver with preloaded modules:

- `python -m mscl job-server --socket PATH --owner-pid PID` binds a Unix socket, imports
  `PRELOAD` once, then forks one worker per request. Nothing in it touches CUDA, so a worker
  may initialise CUDA itself.
- A job's `python -m mscl pretrain ...` (likewise probe and cache-prefix) finds the socket in
  `$MSCL_JOB_SERVER`, hands its stdin/stdout/stderr file descriptors, argv, working directory
  and environment to the server, and waits. The worker, a fresh fork of the preloaded server,
  takes over those descriptors, directory and environment, runs the command, and sends its
  exit status back. The job's shell, log, outputs and benchmark wall time stay as they were;
  each job still runs alone in its own process with its own seed.
- Signals to the job (Snakemake's SIGTERM, Ctrl-C's SIGINT, SIGHUP) are forwarded to the
  worker; a worker whose job process disappears (SIGKILL) terminates itself.
- The server leaves when its owner (the Snakemake process) is gone or on SIGTERM.
- No server, or one that cannot be reached: the command runs in its own process, as before.

The workflow starts a server per run when jobs run on this machine without conda or apptainer
(`job_server` in the config, on by default; `start_for_workflow`). On a cluster every job runs
in its own process.

The server starts with Snakemake's environment and the worker takes the job's, but what a
library read while it was being imported stays the server's. OMP_NUM_THREADS (read when torch
loads) is therefore applied explicitly, and mscl reads its own variables when a job runs.

What a worker's job process cannot show: Snakemake's `benchmark:` file measures the job
process (the thin client) for CPU time and memory. The worker therefore ends its log with its
own CPU seconds and peak RSS (`USAGE_LINE`), and `mscl.report.cost` reads them from there.

Standard library only outside `serve` (the workflow imports `start_for_workflow`).
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Sequence

SOCKET_ENV = "MSCL_JOB_SERVER"
SERVED_COMMANDS = frozenset({"pretrain", "probe", "cache-prefix"})
# What a training job imports; the worker imports anything else itself.
PRELOAD = (
    "torch",
    "torch._dynamo",  # torch.optim imports it on an optimizer's first use: 1.3 s a job
    "torch.distributed.tensor",  # transformers' from_pretrained imports it
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "PIL.Image",
    "sklearn.metrics",
    "transformers",
    "transformers.modeling_utils",
    "peft",
    "mscl.train.pretrain",
    "mscl.train.probe",
    "mscl.train.prefix",
    "mscl.models.text",
    "mscl.models.plm_icd",
)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
HEADER = struct.Struct("!I")  # request length in bytes, sent with the job's three descriptors
USAGE_LINE = "mscl job-server worker usage: cpu_s={cpu_s:.2f} max_rss_mib={max_rss_mib:.1f}"
POLL_SECONDS = 1.0  # how often the server checks that its owner is alive
READY_TIMEOUT_SECONDS = 30.0  # how long the workflow waits for the server's socket
EXIT_LOST_WORKER = 1


# ------------------------------------------------------------------------- the job's side


def delegate(argv: Sequence[str]) -> int | None:
    """Run `python -m mscl <argv>` in a worker of the job server named by $MSCL_JOB_SERVER.

    Returns the worker's exit status, or None (run it in this process) when no server is
    named or it cannot be reached."""
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError as error:
        connection.close()
        print(f"mscl: job server {path} not reachable ({error.strerror or error}); running in this process", file=sys.stderr, flush=True)
        return None
    with connection:
        request = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(connection, [HEADER.pack(len(request))], [0, 1, 2])
        connection.sendall(request)
        replies = connection.makefile("r", encoding="utf-8")
        started = _read_reply(replies)
        if started is None or "pid" not in started:
            print(f"mscl: job server {path} did not start a worker; see its log", file=sys.stderr, flush=True)
            return EXIT_LOST_WORKER
        worker = int(started["pid"])
        previous = {number: signal.signal(number, _forward_to(worker)) for number in FORWARDED_SIGNALS}
        try:
            finished = _read_reply(replies)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    if finished is None or "exit" not in finished:
        print(f"mscl: job-server worker {worker} ended without an exit status (killed?)", file=sys.stderr, flush=True)
        return EXIT_LOST_WORKER
    return int(finished["exit"])


def _forward_to(pid: int) -> Callable[[int, object], None]:
    def forward(number: int, _frame: object) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    return forward


def _read_reply(replies) -> dict | None:
    line = replies.readline()
    return json.loads(line) if line.strip() else None


# ------------------------------------------------------------------------ the server's side


def serve(path: str, owner_pid: int, preload: Sequence[str] = PRELOAD) -> int:
    """Bind `path`, import `preload`, fork a worker per request until `owner_pid` is gone."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Listen before preloading: jobs that arrive meanwhile wait in the backlog, not in their
    # own imports. Bound under a temporary name and renamed, so the path exists only once
    # connections are accepted.
    listener.bind(path + ".binding")
    listener.listen(128)
    os.rename(path + ".binding", path)
    started = time.perf_counter()
    for name in preload:
        importlib.import_module(name)
    print(f"job server {os.getpid()}: preloaded {len(preload)} modules in {time.perf_counter() - started:.1f} s; serving {path}", flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    listener.settimeout(POLL_SECONDS)
    served = 0
    try:
        while not stopping.is_set() and _alive(owner_pid):
            try:
                connection, _ = listener.accept()
            except (TimeoutError, InterruptedError):
                continue
            served += _fork_worker(listener, connection)
    finally:
        listener.close()
        if os.path.exists(path):
            os.unlink(path)
    print(f"job server {os.getpid()}: stopped after {served} jobs", flush=True)
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _fork_worker(listener: socket.socket, connection: socket.socket) -> int:
    """Read one request and fork its worker; 1 if a worker started."""
    descriptors: list[int] = []
    try:
        connection.settimeout(10.0)  # a job process sends its request at once
        header, descriptors, _, _ = socket.recv_fds(connection, HEADER.size, 3)
        if len(header) != HEADER.size or len(descriptors) != 3:
            raise ValueError("malformed request header")
        body = b""
        (length,) = HEADER.unpack(header)
        while len(body) < length:
            chunk = connection.recv(length - len(body))
            if not chunk:
                raise ValueError("request cut short")
            body += chunk
        request = json.loads(body)
        connection.settimeout(None)
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            _run_worker(listener, connection, descriptors, request)  # never returns
        return 1
    except (OSError, ValueError) as error:
        print(f"job server {os.getpid()}: dropped a request: {error}", flush=True)
        return 0
    finally:
        for descriptor in descriptors:
            os.close(descriptor)
        connection.close()


def _run_worker(listener: socket.socket, connection: socket.socket, descriptors: list[int], request: dict) -> None:
    """In the forked worker: become the job process, run its command, report, exit."""
    code = 1
    try:
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the job's own subprocesses must be waitable
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, descriptor in enumerate(descriptors):
            os.dup2(descriptor, target)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1 if unbuffered or os.isatty(1) else -1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        sys.argv = [sys.argv[0], *request["argv"]]
        _apply_thread_count()
        print(f"mscl job-server worker {os.getpid()} (server {os.getppid()}) runs this job", file=sys.stderr)
        connection.sendall((json.dumps({"pid": os.getpid()}) + "\n").encode())
        threading.Thread(target=_terminate_when_job_leaves, args=(connection,), daemon=True).start()
        from mscl.__main__ import run

        code = run(request["argv"])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            # The job is over: the SIGTERM that _terminate_when_job_leaves sends once the job
            # process has read its exit status must not reach the job's own handler, which would
            # log "stopped by SIGTERM" under a job that succeeded.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print(_usage_line(), file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
            connection.sendall((json.dumps({"exit": code}) + "\n").encode())
        finally:
            os._exit(code)


def _apply_thread_count() -> None:
    """OMP_NUM_THREADS is read when torch loads, i.e. in the server: apply the job's own."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))


def _terminate_when_job_leaves(connection: socket.socket) -> None:
    """The job process never writes after its request: end of stream means it is gone."""
    try:
        while connection.recv(1):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def _usage_line() -> str:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return USAGE_LINE.format(cpu_s=cpu, max_rss_mib=max(own.ru_maxrss, children.ru_maxrss) / 1024.0)  # ru_maxrss: KiB on Linux


def parse_usage(text: str) -> dict[str, float] | None:
    """(cpu_s, max_rss_mib) from the last usage line in a job's log, or None."""
    prefix = USAGE_LINE.split(":", 1)[0] + ":"
    for line in reversed(text.splitlines()):
        if line.startswith(prefix):
            fields = dict(part.split("=", 1) for part in line[len(prefix):].split())
            return {key: float(value) for key, value in fields.items()}
    return None


# ---------------------------------------------------------------------- the workflow's side


@dataclass
class JobServer:
    """A started server: its socket path and its process."""

    socket: str
    process: subprocess.Popen

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=2 * POLL_SECONDS + 1)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)


def start(python: str, log_path: str, owner_pid: int, preload: Sequence[str] = (), timeout: float = READY_TIMEOUT_SECONDS) -> JobServer | None:
    """Start `python -m mscl job-server` (importing `preload`, default `PRELOAD`) and wait for
    its socket; None if it did not come up (the jobs then run in their own processes). It is
    stopped at this process's exit at the latest."""
    directory = tempfile.mkdtemp(prefix="mscl-jobs-")  # mode 0700: only this user may connect
    path = os.path.join(directory, "socket")
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "w") as log:
        # A session of its own: Ctrl-C in the terminal reaches the jobs, which forward it.
        process = subprocess.Popen(
            [python, "-m", "mscl", "job-server", "--socket", path, "--owner-pid", str(owner_pid), *(["--preload", *preload] if preload else [])],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    server = JobServer(path, process)
    atexit.register(server.stop)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if os.path.exists(path):
            return server
        time.sleep(0.05)
    server.stop()
    return None


def start_for_workflow(enabled: bool, local: bool, isolated_environments: bool, log_path: str, report: Callable[[str], None]) -> JobServer | None:
    """The workflow's onstart: a job server for this run when jobs run here, in this
    environment (`local` and not `isolated_environments`, i.e. no conda/apptainer), and
    `enabled`. Exports its socket to the jobs through $MSCL_JOB_SERVER."""
    if not (enabled and local and not isolated_environments):
        return None
    python = shutil.which("python")  # what the jobs' shells run
    if python is None:
        report("job server: no `python` on PATH; jobs start their own interpreters")
        return None
    server = start(python, log_path, os.getpid())
    if server is None:
        report(f"job server did not start (see {log_path}); jobs start their own interpreters")
        return None
    os.environ[SOCKET_ENV] = server.socket
    report(f"job server: training jobs fork from one preloaded interpreter (log {log_path}; `--config job_server=False` turns it off)")
    return server


def main(argv: Sequence[str] | None = None) -> int:
    from mscl import cli

    args = cli.parse_args("job-server", argv)
    return serve(args.socket, args.owner_pid, args.preload or PRELOAD)
