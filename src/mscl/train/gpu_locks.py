"""Which job holds which GPU of this machine: locks every user and every run share.

A job holds a device by an exclusive `flock` on the device's lock file (`gpu-<id>.slot<k>.lock`,
k < jobs_per_device) in one folder per machine: /tmp/mscl-gpu-locks, or $MSCL_GPU_LOCK_DIR.

**Every user.** The folder is created sticky and world-writable (1777, as /tmp): any user's
job can add a lock file, and nobody can delete another's. Lock files are created readable and
writable by all (0666, set with fchmod after the create, whatever the umask), and opened
without O_CREAT when they exist: Linux's `fs.protected_regular` refuses an O_CREAT open of
another user's file in a sticky folder even when its mode allows it. A lock file this user
cannot open (made 0600 by hand, or by something else) is skipped, with a one-line warning
naming it and the fix; only when too few devices are left does the job stop, with that line
as its error. `flock` works on a read-only descriptor too, so a file this user may only read
still locks (only the holder note, below, is not written).

**As long as any process of the job runs.** The kernel drops a flock when the last descriptor
of the open file is closed, however its holders end. The job's processes share the
descriptors: `mscl launch` holds them, the command it runs inherits them (same process, or
exec with the descriptors inheritable), a job-server worker receives them with the job's stdio
(`mscl.jobserver`), DataLoader workers inherit them by fork, and torchrun's ranks, which
torchrun starts with every inherited descriptor closed, take them over from the launching
process (torchrun's agent) through a Unix socket (`HandOver`, `adopt`). So no device is handed
out while a rank or loader worker of the old job still runs, even after its agent was killed.
$MSCL_GPU_LOCK_FDS names the descriptor numbers in each process.

**First come, first served.** Within one run Snakemake's `gpu` resource keeps the jobs within
the pool (`mscl.train.gpu_pool`); a job waits only for jobs of other runs on this machine. A
job that cannot have its devices at once takes a ticket in `queue/` (named by arrival time,
held by a flock while it waits) and only the oldest waiting ticket may claim devices; a new
job queues behind any waiting one. So a 2-GPU job is never overtaken forever by a stream of
1-GPU jobs. A ticket whose holder died is seen as stale (its flock is free) and passed over.

Each lock file holds a line naming its holder (`cat /tmp/mscl-gpu-locks/*.lock`), each ticket
its waiting job; the flocks, not these lines, are what count.

Standard library only: `mscl launch` must start fast.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import secrets
import socket
import stat
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, MutableMapping, Sequence

LOCK_DIR_ENV = "MSCL_GPU_LOCK_DIR"
# One folder for the whole machine, so that every run and every user shares out the same devices.
DEFAULT_LOCK_DIR = Path("/tmp/mscl-gpu-locks")
SHARED_FOLDER_MODE = 0o1777  # sticky and world-writable, as /tmp
# Seconds a job waits for a lock folder another job has just made to get its mode (shared_folder).
FOLDER_MODE_WAIT_S = 1.0
SHARED_FILE_MODE = 0o666
QUEUE_FOLDER = "queue"
TICKET_SUFFIX = ".ticket"
# The descriptor numbers by which this process holds its job's device locks (comma-separated).
HELD_ENV = "MSCL_GPU_LOCK_FDS"
# The abstract Unix socket where the launching process hands its locks to torchrun's ranks.
HANDOVER_ENV = "MSCL_GPU_LOCK_HANDOVER"
# More descriptors than any job holds (GPUs of one node); what a receiver accepts at most.
MAX_LOCKS = 64
# Seconds between two attempts of a waiting job, and between two of its "waiting" log lines.
POLL_S = 1.0
WAIT_REPORT_S = 60.0
# Seconds a rank waits for the launching process to hand over the job's locks.
HANDOVER_TIMEOUT_S = 30.0


class LockError(Exception):
    """A lock folder or lock file this user cannot use: a one-line message naming it and the fix."""


def owner_of(path: Path) -> str:
    """'user NAME' (or 'uid N') of a file, for messages."""
    uid = path.stat().st_uid
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def this_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def shared_folder(path: Path) -> Path:
    """`path` as a folder every user can add files to: created 1777, or an existing one this
    user can write to (a LockError naming the fix otherwise).

    One `mkdir` makes it (two jobs starting at once: one makes it, the other finds it), then
    its maker sets 1777 at once. Not made under another name and renamed into place: a rename
    replaces an empty folder that another job has just made, under that job's feet (its next
    file there fails). A job of another user that finds the folder in the moment before the
    chmod looks again for up to FOLDER_MODE_WAIT_S before it says the folder is not writable."""
    if not path.is_dir():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path)
        except FileExistsError:
            pass  # another job made it meanwhile
        except OSError as error:
            raise LockError(
                f"the GPU lock folder {path} cannot be made by user {this_user()} ({error.strerror or error}). Fix: set "
                f"${LOCK_DIR_ENV} to a folder every user of this machine can write to (e.g. one under /tmp)"
            ) from None
        else:
            os.chmod(path, SHARED_FOLDER_MODE)  # the umask took bits off
    deadline = time.monotonic() + FOLDER_MODE_WAIT_S
    while not os.access(path, os.W_OK | os.X_OK) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not os.access(path, os.W_OK | os.X_OK):
        mode = stat.S_IMODE(path.stat().st_mode)
        raise LockError(
            f"the GPU lock folder {path} ({owner_of(path)}, mode {mode:o}) is not writable by user {this_user()}. Fix: "
            f"`chmod 1777 {path}` as its owner or root (once, then every user's jobs share it), or set ${LOCK_DIR_ENV} "
            f"to a folder every user of this machine can write to"
        )
    return path


def lock_folder(environment: Mapping[str, str] = os.environ) -> Path:
    return shared_folder(Path(environment.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR))


def open_shared_file(path: Path) -> int:
    """A descriptor of the lock file or ticket `path`, created 0666 if missing; read-only when
    this user may not write it. A LockError when it may not even read it."""
    while True:
        try:
            return os.open(path, os.O_RDWR)  # no O_CREAT: fs.protected_regular (module docstring)
        except FileNotFoundError:
            pass
        except PermissionError:
            try:
                return os.open(path, os.O_RDONLY)
            except PermissionError:
                mode = stat.S_IMODE(path.stat().st_mode)
                raise LockError(
                    f"the GPU lock file {path} ({owner_of(path)}, mode {mode:o}) cannot be opened by user {this_user()}. "
                    f"Fix: `chmod 666 {path}` as its owner or root, or remove it while no job of its owner runs"
                ) from None
        try:
            handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, SHARED_FILE_MODE)
        except FileExistsError:
            continue  # another job made it meanwhile: open that one
        os.fchmod(handle, SHARED_FILE_MODE)  # the umask took bits off; every user's jobs must open it
        return handle


def write_note(handle: int, note: str) -> None:
    """Replace a lock file's or ticket's text (skipped on a read-only descriptor)."""
    try:
        os.ftruncate(handle, 0)
        os.pwrite(handle, note.encode(), 0)
    except OSError:
        pass


def holder_note(what: str) -> str:
    return f"pid {os.getpid()} user {this_user()} {what} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"


def locked(handle: int, shared: bool = False) -> bool:
    """Take a flock without waiting; whether it was free."""
    try:
        fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


@dataclass
class Claim:
    """Devices a job holds: their ids and the open lock files whose flock holds them."""

    devices: list[str]
    handles: list[int]

    def release(self) -> None:
        for handle in self.handles:
            os.close(handle)  # the last descriptor of a lock file closed drops its flock
        self.handles = []


@dataclass
class Unusable:
    """Lock files this user cannot open: skipped, each reported once. A device is lost to
    this user when none of its slots' files opens."""

    problems: dict[str, dict[int, str]] = field(default_factory=dict)  # device -> slot -> message
    reported: set[str] = field(default_factory=set)  # messages already reported

    def add(self, device: str, slot: int, problem: str) -> None:
        self.problems.setdefault(device, {})[slot] = problem

    def lost(self, jobs_per_device: int) -> list[str]:
        """The devices none of whose slots this user can open."""
        return [device for device, slots in self.problems.items() if len(slots) == jobs_per_device]

    def new_messages(self) -> list[str]:
        messages = [problem for slots in self.problems.values() for problem in slots.values() if problem not in self.reported]
        self.reported.update(messages)
        return messages


def unusable_slots(pool: Sequence[str], folder: Path, jobs_per_device: int) -> Unusable:
    """The lock files of `pool` this user cannot open (each made, if missing, on the way): a
    job that could never have enough devices stops at once instead of waiting its turn."""
    unusable = Unusable()
    for device in pool:
        for slot in range(jobs_per_device):
            try:
                os.close(open_shared_file(folder / f"gpu-{device}.slot{slot}.lock"))
            except LockError as error:
                unusable.add(device, slot, str(error))
    return unusable


def try_claim(count: int, pool: Sequence[str], folder: Path, jobs_per_device: int, unusable: Unusable | None = None) -> Claim | None:
    """`count` distinct devices of `pool`, each by one free slot's lock; None (nothing held)
    when fewer than `count` devices have a free slot. Lock files this user cannot open are
    skipped and recorded in `unusable` (a LockError when there is none to record them in)."""
    claim = Claim([], [])
    for device in pool:
        if len(claim.devices) == count:
            break
        for slot in range(jobs_per_device):
            path = folder / f"gpu-{device}.slot{slot}.lock"
            try:
                handle = open_shared_file(path)
            except LockError as error:
                if unusable is None:
                    claim.release()
                    raise
                unusable.add(device, slot, str(error))
                continue
            if not locked(handle):
                os.close(handle)
                continue
            write_note(handle, holder_note(f"holds GPU {device}"))
            claim.devices.append(device)
            claim.handles.append(handle)
            break
    if len(claim.devices) < count:
        claim.release()  # all or nothing: holding some while waiting for more could deadlock two jobs
        return None
    return claim


@dataclass
class Ticket:
    """A waiting job's place in the machine's queue: its file and the descriptor whose flock
    says it is still waiting."""

    path: Path
    handle: int

    def leave(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(self.handle)


def take_ticket(queue: Path, count: int) -> Ticket:
    """A ticket named by this moment (ns) and pid: made under a hidden name, locked, then renamed,
    so that no other job sees it before its flock says it is alive."""
    name = f"{time.time_ns():020d}-{os.getpid():010d}{TICKET_SUFFIX}"
    hidden = queue / f".{name}.new"
    handle = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL, SHARED_FILE_MODE)
    os.fchmod(handle, SHARED_FILE_MODE)
    fcntl.flock(handle, fcntl.LOCK_EX)
    write_note(handle, holder_note(f"waits for {count} GPU(s)"))
    os.rename(hidden, queue / name)
    return Ticket(queue / name, handle)


def waiting_before(queue: Path, name: str | None = None) -> list[str]:
    """The live tickets ahead of ticket `name` (all of them for None), oldest first. A ticket
    whose flock is free belongs to a job that died while waiting: passed over (and removed
    where this user may)."""
    ahead = []
    for other in sorted(os.listdir(queue)):
        if not other.endswith(TICKET_SUFFIX) or other.startswith(".") or (name is not None and other >= name):
            continue
        try:
            handle = os.open(queue / other, os.O_RDONLY)
        except (FileNotFoundError, PermissionError):
            continue  # gone meanwhile, or unreadable: it cannot hold anybody up
        try:
            if locked(handle, shared=True):
                try:
                    (queue / other).unlink()
                except OSError:
                    pass
            else:
                ahead.append(other)
        finally:
            os.close(handle)
    return ahead


def claim_devices(count: int, pool: Sequence[str], folder: Path, jobs_per_device: int, report: Callable[[str], None]) -> Claim:
    """Wait until `count` distinct devices of `pool` are free and this job is first in line,
    then hold them (module docstring). A LockError when lock files this user cannot open leave
    fewer than `count` devices."""
    if count > len(pool):
        raise LockError(
            f"the job asks for {count} GPU(s) but the local pool has {len(pool)} ({', '.join(pool) or 'none'}). "
            f"Fix: lower the encoder's resources.gpu, or list more devices in `local_gpus.devices`"
        )
    queue = shared_folder(folder / QUEUE_FOLDER)
    unusable = unusable_slots(pool, folder, jobs_per_device)
    ticket = None
    waited_since = reported_at = None
    try:
        while True:
            first = not waiting_before(queue, ticket.path.name if ticket else None)
            claim = try_claim(count, pool, folder, jobs_per_device, unusable) if first else None
            for problem in unusable.new_messages():
                report(f"launch: passing over a lock file, since {problem}")
            lost = unusable.lost(jobs_per_device)
            if len(pool) - len(lost) < count:
                raise LockError(next(iter(unusable.problems[lost[0]].values())))
            if claim is not None:
                return claim
            if ticket is None:
                ticket = take_ticket(queue, count)
            now = time.monotonic()
            if waited_since is None:
                waited_since = now
            if reported_at is None or now - reported_at >= WAIT_REPORT_S:
                place = f"{len(waiting_before(queue, ticket.path.name))} job(s) ahead in {queue}"
                report(f"launch: waiting for {count} free GPU(s) of {', '.join(pool)} (held by other runs' jobs; {place}; {now - waited_since:.0f} s so far)")
                reported_at = now
            time.sleep(POLL_S)
    finally:
        if ticket is not None:
            ticket.leave()


# ------------------------------------------------------------------ the job's processes


def held_descriptors(environment: Mapping[str, str] = os.environ) -> list[int]:
    """The open descriptors by which this process holds its job's locks ($MSCL_GPU_LOCK_FDS)."""
    held = []
    for text in environment.get(HELD_ENV, "").split(","):
        try:
            number = int(text)
            os.fstat(number)
        except (ValueError, OSError):
            continue
        held.append(number)
    return held


def mark_held(handles: Sequence[int], environment: MutableMapping[str, str]) -> None:
    """Record in `environment` that this process holds the job's locks by `handles`."""
    if handles:
        environment[HELD_ENV] = ",".join(map(str, handles))
    else:
        environment.pop(HELD_ENV, None)


class HandOver:
    """Hands the job's lock descriptors to every process of this user that asks on an
    abstract Unix socket (torchrun's ranks, `adopt`): a thread of the launching process, which
    is torchrun's agent, serves them until the process ends. Another user's process gets
    nothing (SO_PEERCRED)."""

    def __init__(self, handles: Sequence[int]):
        self.handles = list(handles)
        self.name = f"mscl-gpu-locks-{os.getpid()}-{secrets.token_hex(8)}"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0" + self.name)
        self.listener.listen(MAX_LOCKS)
        threading.Thread(target=self._serve, name="mscl-gpu-lock-handover", daemon=True).start()

    def _serve(self) -> None:
        while True:
            connection, _ = self.listener.accept()
            with connection:
                _, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
                if uid == os.geteuid():
                    try:
                        socket.send_fds(connection, [b"L"], self.handles)
                    except OSError:  # the asking process is gone
                        pass


def adopt(environment: MutableMapping[str, str] = os.environ) -> list[int]:
    """In a process started by torchrun for a launched job: take over the job's lock
    descriptors from the launching process ($MSCL_GPU_LOCK_HANDOVER) and hold them as long as
    this process and its forked children live; [] when nothing is handed over. A LockError
    when the launching process is gone or does not answer: this process must not use a GPU
    that no lock of its job holds."""
    name = environment.get(HANDOVER_ENV)
    if not name:
        return []
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(HANDOVER_TIMEOUT_S)
    try:
        with connection:
            connection.connect("\0" + name)
            _, handles, _, _ = socket.recv_fds(connection, 1, MAX_LOCKS)
    except OSError as error:
        raise LockError(
            f"this process of a launched job could not take over the job's GPU locks from its launching process "
            f"(torchrun's agent; socket {name}: {error.strerror or error}), which has probably ended. Fix: rerun the job"
        ) from None
    if not handles:
        raise LockError(f"the launching process (socket {name}) handed over no GPU lock. Fix: rerun the job")
    mark_held(handles, environment)
    return handles
