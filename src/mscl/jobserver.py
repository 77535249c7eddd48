"""A fork server for the training jobs: torch is imported once per Snakemake run, not per job.

Why: every pretrain, probe and cache-prefix job is its own `python -m mscl ...` process, as a
cluster needs, and each one used to spend about 3 s importing torch, torch._dynamo (which
torch.optim loads on first use), pandas, and for text jobs transformers and peft: 4-6 s of
start-up against 5-15 s of training per job in the embedded default (`mscl bench dag`). The
same idea as multiprocessing's forkserver with preloaded modules:

- `python -m mscl job-server --socket PATH --owner-pid PID` binds a Unix socket, imports
  `PRELOAD` once, then forks one worker per request. It runs with one thread per library
  (`SERVER_ENVIRONMENT`) and never touches CUDA, so it holds no thread pool or GPU context a
  fork would copy half of.
- A job's `python -m mscl pretrain ...` (likewise probe and cache-prefix) finds the socket in
  `$MSCL_JOB_SERVER`, hands its stdin/stdout/stderr file descriptors (and its GPU locks', which
  the worker then holds too: mscl.train.gpu_locks), argv, working directory,
  environment, umask, CPU affinity and interpreter to the server, and waits. Before each fork
  the server checks that it can vouch for the worker (`fork_hazards`): the same interpreter
  and mscl, the same import-time environment, CUDA not initialised, no thread besides its own
  and jemalloc's. If not, it refuses, says why in its log and the job's, and the job runs in
  its own process. Otherwise the worker, a fresh fork, takes over the job's descriptors,
  directory, environment, umask, affinity and thread counts, runs the command and leaves the
  way a job process does (atexit handlers, stdio flushed). The server reaps it and sends the
  job its exit status: a worker killed by signal N reports 128 + N, as a shell would.
- Signals to the job (Snakemake's SIGTERM, Ctrl-C's SIGINT, SIGHUP) are forwarded to the
  worker; a job process that disappears (SIGKILL) gets its worker terminated by the server; a
  worker whose server disappears gets SIGTERM from the kernel (PR_SET_PDEATHSIG), and its job
  process makes sure it is gone before it reports the job failed.
- The server leaves when its owner (the Snakemake process) is gone or on SIGTERM, after
  terminating its workers and reporting their exit statuses.
- No server, or one that cannot be reached: the command runs in its own process, as before.

The workflow starts a server per run when jobs run on this machine without conda or apptainer
(`job_server` in the config, on by default; `start_for_workflow`), on Linux. On a cluster
every job runs in its own process. What differs between a served and an unserved job is
listed in docs/job-server.md, the one place that keeps that list.

Standard library only outside the server and its workers (the workflow imports
`start_for_workflow`, every job process `delegate`).
"""

from __future__ import annotations

import atexit
import ctypes
import glob
import importlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from mscl import cli
from mscl.interrupt import GRACE_SECONDS, alive
from mscl import sockets
from mscl.sockets import SHORT_TMPDIR
from mscl.train import gpu_locks
from mscl.train.launch import RANK_VARIABLES  # torchrun's: ranks are never served (`delegate`)
from mscl.usage import usage_line

SOCKET_ENV = "MSCL_JOB_SERVER"
SERVED_COMMANDS = frozenset({"pretrain", "probe", "cache-prefix"})
# What a training job imports; the worker imports anything else itself. The server notes which
# mscl modules each preloaded module imports (mscl.provenance.track_imports), so that a job's
# versions.json still names exactly the mscl modules that job imported (a pretraining lists no
# probe or report code).
PRELOAD = (
    "torch",
    "torch._dynamo",  # torch.optim imports it on an optimizer's first use: 1.3 s a job
    "torch.distributed.tensor",  # transformers' from_pretrained imports it
    "torch.utils.tensorboard",  # the training curves' writer (mscl.train.curves): 0.1 s a job
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "PIL.Image",
    "sklearn.metrics",
    "transformers",
    "transformers.modeling_utils",
    "peft",
    "threadpoolctl",
    "mscl.train.pretrain",
    "mscl.train.probe",
    "mscl.train.prefix",
    "mscl.models.text",
    "mscl.models.plm_icd",
)
# The thread counts a job sets (Snakemake sets all six to the rule's threads). Libraries read
# them when they are loaded, i.e. in the server, so the server loads them with one thread each
# (no pool to copy into a fork) and the worker applies the job's count (`_apply_thread_count`).
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
)  # fmt: skip
# The server's own settings. The NVML-based check answers torch.cuda.is_available() without
# initialising CUDA, should anything in the preload ask.
SERVER_ENVIRONMENT = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1", **{name: "1" for name in THREAD_VARIABLES}}
# Environment variables that the interpreter or a preloaded library reads at start-up or import,
# i.e. that a worker sees with the server's value: a job whose values differ is refused.
IMPORT_TIME_PREFIXES = ("PYTHON", "HF_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "TOKENIZERS_", "ARROW_", "SKLEARN_", "LD_")
# Not compared: applied to the worker (PYTHONUNBUFFERED: its stdio is reopened; the thread
# counts) or the server's own setting.
APPLIED_VARIABLES = frozenset({"PYTHONUNBUFFERED", *THREAD_VARIABLES, *SERVER_ENVIRONMENT})
# Threads the server may have when it forks: jemalloc's background thread (pyarrow) stops and
# restarts itself around fork. Any other thread (an OpenMP pool, a Python thread) refuses.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
HEADER = struct.Struct("!I")  # request length in bytes, sent with the job's stdio and GPU lock descriptors
WORKER_LINE = "mscl job-server worker {pid} (server {server}) runs this job"
POLL_SECONDS = 1.0  # how often the server checks that its owner is alive
READY_TIMEOUT_SECONDS = 30.0  # how long the workflow waits for the server's socket
EXIT_LOST_WORKER = 1
SOCKET_DIR_PREFIX = "mscl-jobs-"  # + owner pid + "-": a folder whose owner is gone is stale
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


# ------------------------------------------------------------------------- the job's side


def interpreter() -> dict[str, str]:
    """What a worker must share with the job: the interpreter, its environment (venv) and the
    mscl package its modules come from."""
    import mscl

    return {
        "executable": os.path.realpath(sys.executable),
        "prefix": sys.prefix,
        "version": sys.version,
        "mscl": os.path.dirname(os.path.abspath(mscl.__file__)),
    }


def delegate(argv: Sequence[str]) -> int | None:
    """Run `python -m mscl <argv>` in a worker of the job server named by $MSCL_JOB_SERVER.

    Returns the worker's exit status, or None (run it in this process) when no server is
    named, it cannot be reached or it refuses the job, and always for a rank of a distributed
    run: torchrun starts and watches its ranks' processes (it stops them all when one fails
    and reports their exit codes), and a rank's process group and GPU belong to the process it
    started, not to a worker forked from another process tree."""
    path = os.environ.get(SOCKET_ENV)
    if not path or any(name in os.environ for name in RANK_VARIABLES):
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError as error:
        connection.close()
        say(f"job server {path} not reachable ({error.strerror or error}); running in this process")
        return None
    with connection:
        request = json.dumps(
            {
                "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask(),
                "affinity": sorted(os.sched_getaffinity(0)), "interpreter": interpreter(),
            }
        ).encode()
        try:
            # The job's stdio, and the descriptors of its GPU locks: the worker holds them too
            # (mscl.train.gpu_locks), so that no device is free while it runs.
            socket.send_fds(connection, [HEADER.pack(len(request))], [0, 1, 2, *gpu_locks.held_descriptors()])
            connection.sendall(request)
        except OSError as error:  # the server went away between connect and send
            say(f"job server {path} dropped the request ({error.strerror or error}); running in this process")
            return None
        replies = connection.makefile("r", encoding="utf-8")
        started = _read_reply(replies)
        if started is not None and "refused" in started:
            say(f"job server refused this job ({started['refused']}); running in this process")
            return None
        if started is None or "pid" not in started:
            say(f"job server {path} did not start a worker; see its log")
            return EXIT_LOST_WORKER
        worker = int(started["pid"])
        previous = {number: signal.signal(number, _forward_to(worker)) for number in FORWARDED_SIGNALS}
        try:
            finished = _read_reply(replies)
            if finished is None or "exit" not in finished:
                _stop(worker)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    if finished is None or "exit" not in finished:
        say(f"the job server ended before worker {worker} reported; the worker was stopped")
        return EXIT_LOST_WORKER
    if finished.get("signal"):
        say(f"job-server worker {worker} was killed by {signal.Signals(finished['signal']).name} (exit {finished['exit']})")
    return int(finished["exit"])


def say(message: str) -> None:
    print(f"mscl: {message}", file=sys.stderr, flush=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _forward_to(pid: int) -> Callable[[int, object], None]:
    def forward(number: int, _frame: object) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    return forward


def _read_reply(replies) -> dict | None:
    try:
        line = replies.readline()
    except OSError:  # connection reset: the server was killed
        return None
    return json.loads(line) if line.strip() else None


def _stop(pid: int) -> None:
    """Make sure a worker whose server is gone has ended: it got SIGTERM from the kernel when
    the server died (PR_SET_PDEATHSIG); SIGTERM again, then SIGKILL after GRACE_SECONDS."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        for number in (signal.SIGTERM, signal.SIGKILL):
            try:
                signal.pidfd_send_signal(handle, number)
            except ProcessLookupError:
                return
            if select.select([handle], [], [], GRACE_SECONDS)[0]:  # readable once it has ended
                return
    finally:
        os.close(handle)


# ------------------------------------------------------------------------ the server's side


def fork_hazards(request: Mapping, server_environment: Mapping[str, str]) -> list[str]:
    """Why this server cannot vouch for a worker running `request` (empty: it can).

    `server_environment` is the environment the server started with."""
    hazards = []
    if request.get("interpreter") != interpreter():
        hazards.append(f"the job runs {request.get('interpreter')}, the server {interpreter()}")
    environment = request.get("env", {})
    differing = sorted(
        name for name in set(environment) | set(server_environment)
        if name.startswith(IMPORT_TIME_PREFIXES) and name not in APPLIED_VARIABLES
        and environment.get(name) != server_environment.get(name)
    )  # fmt: skip
    if differing:
        hazards.append(f"import-time environment variables differ from the server's: {', '.join(differing)}")
    counts = {environment[name] for name in THREAD_VARIABLES if name in environment}
    if "OMP_NUM_THREADS" not in environment or len(counts) != 1 or not _positive_int(counts.pop()):
        hazards.append(f"the job's thread counts are not one positive OMP_NUM_THREADS ({ {n: environment.get(n) for n in THREAD_VARIABLES} })")
    if not set(request.get("affinity", [])) <= os.sched_getaffinity(0):
        hazards.append(f"the job may run on CPUs {request.get('affinity')}, the server only on {sorted(os.sched_getaffinity(0))}")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        hazards.append("CUDA is initialised in the server")
    threads = foreign_threads()
    if threads:
        hazards.append(f"the server runs {len(threads)} thread(s) besides its own ({', '.join(sorted(threads))}): a thread pool was started")
    return hazards


def _positive_int(text: str) -> bool:
    return text.isdigit() and int(text) > 0


def foreign_threads() -> list[str]:
    """Names of this process's threads other than the main one and `FORK_SAFE_THREADS`."""
    main = threading.main_thread().native_id
    names = []
    for task in os.listdir("/proc/self/task"):
        if int(task) == main:
            continue
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as handle:
                name = handle.read().strip()
        except FileNotFoundError:  # ended meanwhile
            continue
        if name not in FORK_SAFE_THREADS:
            names.append(name)
    return names


@dataclass
class Job:
    """A request accepted in a worker: what the worker needs to become the job process."""

    request: dict
    descriptors: list[int]


@dataclass
class _Worker:
    connection: socket.socket  # to the job process: the exit status goes here
    terminate_at: float | None = None  # monotonic time of the SIGTERM, once sent


@dataclass
class Server:
    """The accept/fork/reap loop. `run` returns None in the server once it stops, and the
    accepted `Job` in a freshly forked worker."""

    listener: socket.socket
    path: str
    owner_pid: int
    environment: dict[str, str]  # what the server started with, before SERVER_ENVIRONMENT
    pid: int = field(default_factory=os.getpid)
    workers: dict[int, _Worker] = field(default_factory=dict)
    served: int = 0
    stopping: bool = False

    def run(self) -> Job | None:
        wakeup, self._wakeup_write = os.pipe()
        self._wakeup = wakeup
        for descriptor in (wakeup, self._wakeup_write):
            os.set_blocking(descriptor, False)
        signal.set_wakeup_fd(self._wakeup_write)  # SIGCHLD and SIGTERM wake the select below
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        try:
            while not self.stopping and alive(self.owner_pid):
                # Workers already terminated are not watched: their end of stream stays readable.
                connections = {worker.connection.fileno(): pid for pid, worker in self.workers.items() if worker.terminate_at is None}
                readable, _, _ = select.select([self.listener, wakeup, *connections], [], [], POLL_SECONDS)
                if wakeup in readable:
                    _drain(wakeup)
                self._reap()
                for descriptor in readable:
                    if descriptor in connections and connections[descriptor] in self.workers:
                        self._check_job(connections[descriptor])
                self._escalate()
                if self.listener in readable:
                    job = self._accept()
                    if job is not None:
                        return job  # in the worker
        finally:
            if os.getpid() == self.pid:
                self._shutdown()
        return None

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def _accept(self) -> Job | None:
        try:
            connection, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return None
        descriptors: list[int] = []
        pid = None
        try:
            request, descriptors = _read_request(connection)
            hazards = fork_hazards(request, self.environment)
            if hazards:
                log(f"refused a job ({' '.join(request['argv'][:1])}): {'; '.join(hazards)}; it runs in its own process")
                _send(connection, {"refused": "; ".join(hazards)})
            else:
                sys.stdout.flush()
                sys.stderr.flush()
                pid = _fork_with_signals_blocked()
        except (OSError, ValueError) as error:
            log(f"dropped a request: {error}")
        if pid == 0:
            self._close_in_worker(connection)
            return Job(request, descriptors)
        for descriptor in descriptors:  # the job's stdio and GPU locks: a copy held here keeps its readers waiting, its GPUs taken
            os.close(descriptor)
        if pid is None:
            connection.close()
            return None
        self.workers[pid] = _Worker(connection)
        self.served += 1
        _send(connection, {"pid": pid})
        return None

    def _close_in_worker(self, own: socket.socket) -> None:
        """Drop the server's descriptors in a new worker: the job processes of other workers
        must see end of stream when the server dies, not when this worker ends."""
        for number, handler in ((signal.SIGCHLD, signal.SIG_DFL), (signal.SIGTERM, signal.SIG_DFL), (signal.SIGHUP, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
            signal.signal(number, handler)  # the job's own subprocesses must be waitable: SIGCHLD too
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        signal.set_wakeup_fd(-1)
        for descriptor in (self._wakeup, self._wakeup_write):
            os.close(descriptor)
        self.listener.close()
        for worker in self.workers.values():
            worker.connection.close()
        own.close()
        self.workers = {}

    def _reap(self) -> None:
        """Collect ended workers and send each one's job its exit status (128 + N if killed by
        signal N)."""
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            killed_by = -code if code < 0 else None
            if killed_by:
                log(f"worker {pid} was killed by {signal.Signals(killed_by).name}")
            _send(worker.connection, {"exit": 128 + killed_by if killed_by else code, "signal": killed_by})
            worker.connection.close()

    def _check_job(self, pid: int) -> None:
        """A job process never writes after its request: end of stream means it is gone, and
        its worker is terminated."""
        worker = self.workers[pid]
        try:
            gone = not worker.connection.recv(1, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            gone = True
        if gone and worker.terminate_at is None:
            log(f"the job process of worker {pid} is gone; terminating the worker")
            self._terminate(pid)

    def _terminate(self, pid: int) -> None:
        self.workers[pid].terminate_at = time.monotonic()
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def _escalate(self) -> None:
        for pid, worker in list(self.workers.items()):
            if worker.terminate_at is not None and time.monotonic() - worker.terminate_at > GRACE_SECONDS:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _shutdown(self) -> None:
        """Stop accepting, terminate the workers, report their exit statuses, clean up."""
        self.listener.close()
        _remove_socket(self.path)
        for pid, worker in self.workers.items():
            if worker.terminate_at is None:
                self._terminate(pid)
        deadline = time.monotonic() + GRACE_SECONDS
        while self.workers and time.monotonic() < deadline:
            select.select([self._wakeup], [], [], 0.1)
            _drain(self._wakeup)
            self._reap()
        for pid in list(self.workers):
            os.kill(pid, signal.SIGKILL)
        while self.workers:
            select.select([self._wakeup], [], [], 0.1)
            self._reap()
        signal.set_wakeup_fd(-1)
        os.close(self._wakeup)
        os.close(self._wakeup_write)


def serve(path: str, owner_pid: int, run_command: Callable[[list[str]], int], preload: Sequence[str] = PRELOAD) -> int:
    """Bind `path`, import `preload`, fork a worker per request until `owner_pid` is gone.
    In a worker, run the job's command with `run_command` instead and return its exit status."""
    started_with = dict(os.environ)
    os.environ.update(SERVER_ENVIRONMENT)  # before any import reads it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Listen before preloading: jobs that arrive meanwhile wait in the backlog, not in their
    # own imports. Bound under a temporary name and renamed, so the path exists only once
    # connections are accepted.
    listener.bind(path + ".binding")
    listener.listen(128)
    os.rename(path + ".binding", path)
    listener.setblocking(False)
    started = time.perf_counter()
    from mscl import provenance

    provenance.track_imports()
    for name in preload:
        importlib.import_module(name)
    # What each job's versions.json reads of the installed distributions and the locks: read
    # once here, not per job.
    provenance.warm_caches()
    log(f"preloaded {len(preload)} modules in {time.perf_counter() - started:.1f} s; serving {path}")
    server = Server(listener, path, owner_pid, started_with)
    job = server.run()
    if job is None:
        log(f"stopped after {server.served} jobs")
        return 0
    return run_worker(job, run_command)


def _fork_with_signals_blocked() -> int:
    """os.fork(); in the child the forwarded signals stay blocked until `_close_in_worker`
    has replaced the server's handlers, so none is lost to them."""
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
        raise
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
    return pid


def log(message: str) -> None:
    print(f"job server {os.getpid()}: {message}", flush=True)


def _drain(descriptor: int) -> None:
    try:
        while os.read(descriptor, 512):
            pass
    except BlockingIOError:
        pass


def _send(connection: socket.socket, message: dict) -> None:
    try:
        connection.sendall((json.dumps(message) + "\n").encode())
    except OSError:  # the job process is gone; its worker is or will be terminated
        pass


def _read_request(connection: socket.socket) -> tuple[dict, list[int]]:
    connection.setblocking(True)
    connection.settimeout(10.0)  # a job process sends its request at once
    header, descriptors, _, _ = socket.recv_fds(connection, HEADER.size, 3 + gpu_locks.MAX_LOCKS)
    if len(header) != HEADER.size or len(descriptors) < 3:
        for descriptor in descriptors:
            os.close(descriptor)
        raise ValueError("malformed request header")
    body = b""
    (length,) = HEADER.unpack(header)
    try:
        while len(body) < length:
            chunk = connection.recv(length - len(body))
            if not chunk:
                raise ValueError("request cut short")
            body += chunk
    except (OSError, ValueError):
        for descriptor in descriptors:
            os.close(descriptor)
        raise
    connection.settimeout(None)
    return json.loads(body), descriptors


def _remove_socket(path: str) -> None:
    """The socket, and the folder `start` made for it."""
    if os.path.exists(path):
        os.unlink(path)
    folder = os.path.dirname(path)
    if os.path.basename(folder).startswith(SOCKET_DIR_PREFIX):
        try:
            os.rmdir(folder)
        except OSError:
            pass


# ------------------------------------------------------------------------- the worker's side


def run_worker(job: Job, run_command: Callable[[list[str]], int]) -> int:
    """In a fresh worker: become the job process, run its command, return its exit status.

    Exceptions, SystemExit and KeyboardInterrupt leave the way they leave `python -m mscl`:
    through the interpreter's normal exit (atexit handlers, stdio flushed)."""
    _become_job_process(job)
    try:
        return run_command(job.request["argv"])
    finally:
        print(usage_line(), file=sys.stderr, flush=True)


def _become_job_process(job: Job) -> None:
    request = job.request
    _die_with_server()
    for target, descriptor in enumerate(job.descriptors[:3]):
        os.dup2(descriptor, target)
        os.close(descriptor)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    gpu_locks.mark_held(job.descriptors[3:], os.environ)  # kept open until this worker ends
    os.umask(request["umask"])
    os.sched_setaffinity(0, request["affinity"])
    tempfile.tempdir = None  # recomputed from the job's TMPDIR, not the server's cached one
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", buffering=1 if unbuffered or os.isatty(1) else -1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.argv = [sys.argv[0], *request["argv"]]
    from mscl.provenance import start_job  # imported by the server already

    start_job()  # from here on, this job's own imports (its versions.json names them)
    _apply_thread_count(int(os.environ["OMP_NUM_THREADS"]))
    print(WORKER_LINE.format(pid=os.getpid(), server=os.getppid()), file=sys.stderr)


def _die_with_server() -> None:
    """SIGTERM when the server dies (Linux PR_SET_PDEATHSIG), so that no worker outlives its
    server; exit at once if it died before this was set."""
    server = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != server:
        os._exit(128 + signal.SIGTERM)


def _apply_thread_count(threads: int) -> None:
    """Thread counts are read when torch, OpenBLAS and OpenMP load, i.e. in the server (one
    thread each): apply the job's count, as its own process would have read it."""
    from threadpoolctl import threadpool_limits

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    threadpool_limits(limits=threads)


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
                self.process.wait(timeout=GRACE_SECONDS + 2 * POLL_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)


def start(python: str, log_path: str, owner_pid: int, preload: Sequence[str] = (), timeout: float = READY_TIMEOUT_SECONDS) -> JobServer | None:
    """Start `python -m mscl job-server` (importing `preload`, default `PRELOAD`) and wait for
    its socket; None if it did not come up (the jobs then run in their own processes). It is
    stopped at this process's exit at the latest."""
    _remove_stale_socket_folders()
    # mode 0700: only this user may connect. The owner's pid in the name marks it stale once
    # the owner is gone (a server killed with its owner cannot remove it).
    directory = tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{owner_pid}-", dir=socket_base(owner_pid))
    path = os.path.join(directory, "socket")
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "w") as log_file:
        # A session of its own: Ctrl-C in the terminal reaches the jobs, which forward it.
        process = subprocess.Popen(
            [python, "-m", "mscl", "job-server", "--socket", path, "--owner-pid", str(owner_pid), *(["--preload", *preload] if preload else [])],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
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


def socket_base(owner_pid: int) -> str:
    """TMPDIR, or SHORT_TMPDIR when the server's socket path under TMPDIR would exceed what
    AF_UNIX allows: a deep TMPDIR (a cluster job's scratch, pytest's tmp_path) would otherwise
    keep the server from starting."""
    folder = f"{SOCKET_DIR_PREFIX}{owner_pid}-{'x' * 8}"  # mkdtemp adds 8 random characters
    return sockets.socket_base(os.path.join(folder, "socket.binding"))  # the name serve() binds before renaming


def _remove_stale_socket_folders() -> None:
    """Socket folders of servers whose owner is gone (both killed: nobody removed them)."""
    bases = dict.fromkeys([tempfile.gettempdir(), SHORT_TMPDIR])
    for folder in (found for base in bases for found in glob.glob(os.path.join(base, f"{SOCKET_DIR_PREFIX}*-*"))):
        owner = os.path.basename(folder)[len(SOCKET_DIR_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)


def run_jobs_from(source: str) -> None:
    """Put the workflow's own `source` folder first on PYTHONPATH for every job (and job server)
    this process starts, ahead of whatever mscl the environment has installed. A virtualenv
    shared by two clones (its editable install points at one of them) would otherwise run the
    other clone's code in the jobs, and their results would name that clone's commit."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))


def start_for_workflow(enabled: bool, local: bool, isolated_environments: bool, log_path: str, report: Callable[[str], None]) -> JobServer | None:
    """The workflow's onstart: a job server for this run when jobs run here, in this
    environment (`local` and not `isolated_environments`, i.e. no conda/apptainer), on Linux,
    and `enabled`. Exports its socket to the jobs through $MSCL_JOB_SERVER."""
    if not (enabled and local and not isolated_environments):
        return None
    if not sys.platform.startswith("linux"):
        report("job server: Linux only (it relies on /proc and PR_SET_PDEATHSIG); jobs start their own interpreters")
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


def main(argv: Sequence[str] | None, run_command: Callable[[list[str]], int]) -> int:
    """`python -m mscl job-server`: `mscl.__main__` passes its `run`, which the workers call
    with their jobs' arguments, as a job process would."""
    args = cli.parse_args("job-server", argv)
    return serve(args.socket, args.owner_pid, run_command, args.preload or PRELOAD)
