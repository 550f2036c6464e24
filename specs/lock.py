"""One writer per sweep directory (a sweep, or a report): an exclusive lock file that names its holder and
works on a shared disk. It lives in specs/ so that both the orchestrator and the report take the same lock.

The lock is `flock` on `<dir>/sweep.lock`, which the kernel (and NFS v4, Lustre, GPFS) releases when the
holder dies, however it dies. The file names the holder (host, pid, start) and its mtime is a heartbeat,
refreshed while the holder lives. Two cases are not left to flock alone:
* a filesystem without locks (flock fails with ENOLCK): the holder is judged from the file, a process on
  this host by whether its pid still runs, one on another host by its heartbeat;
* a holder on another host whose heartbeat is fresh: NFS mounted with `nolock` keeps flock local to each
  client, so another host's lock is trusted until its heartbeat stops.
A lock left by a holder that is gone is taken over, with a message.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from specs import procs
from specs.safefile import open_own

HEARTBEAT_S = 15.0  # how often the holder touches the lock file
STALE_AFTER_S = 120.0  # another host's lock whose heartbeat is older than this is abandoned
_NO_LOCKS = {errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP}


class LockHeldError(RuntimeError):
    """Another live sweep holds the directory."""


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    started: str  # when the holder took the lock (ISO time)
    start_ticks: int | None = None  # the pid's start (procs.start_ticks): tells a reused pid apart
    role: str = "sweep"  # what holds it: a sweep, or a report

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {self.started}"

    @classmethod
    def me(cls, role: str = "sweep") -> Holder:
        return cls(
            host=socket.gethostname(), pid=os.getpid(), started=datetime.now(UTC).isoformat(timespec="seconds"),
            start_ticks=procs.start_ticks(os.getpid()), role=role,
        )  # fmt: skip


class SweepLock:
    """`with SweepLock(path) as lock:` holds the directory; `lock.notes` says what it took over. `role` names
    the holder in the file ("sweep" or "report"), so whoever is refused is told what to wait for."""

    def __init__(self, path: Path, role: str = "sweep") -> None:
        self.path = path
        self.role = role
        self.notes: list[str] = []
        self._fd: int | None = None
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __enter__(self) -> SweepLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise LockHeldError naming the holder. OSError: the directory is not writable."""
        for _ in range(20):  # the holder released (and removed the file) while we opened it: open again
            fd = open_own(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # never a FIFO, device or link
            try:
                if self._try(fd):
                    self._fd = fd
                    self._heartbeat = threading.Thread(target=self._beat, name="sweep-lock-heartbeat", daemon=True)
                    self._heartbeat.start()
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        raise LockHeldError(f"{self.path}: the lock file keeps changing; is another sweep starting here?")

    def _try(self, fd: int) -> bool:
        kernel = _flock(fd)
        if kernel is False:
            raise LockHeldError(self._held_message(_read_holder(fd)))
        if not _same_file(fd, self.path):
            return False
        previous = _read_holder(fd)
        if previous is not None:
            if _alive(previous, kernel_locked=kernel is True, heartbeat_age_s=time.time() - os.fstat(fd).st_mtime):
                raise LockHeldError(self._held_message(previous))
            self.notes.append(
                f"{self.path}: took over the lock of a sweep that is no longer running ({previous.describe()})"
            )
        _write_holder(fd, Holder.me(self.role))
        return True

    def release(self) -> None:
        """Remove the lock file while still holding it, then let go (a process that opened the old file
        finds it gone and opens the path again)."""
        if self._fd is None:
            return
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        try:
            if _same_file(self._fd, self.path):
                self.path.unlink()
        except OSError:
            pass  # a directory gone read-only: the next sweep finds the holder gone and takes over
        finally:
            os.close(self._fd)
            self._fd = None

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                pass  # nothing here can fix the disk; at worst another host takes the lock over later

    def _held_message(self, holder: Holder | None) -> str:
        who = holder.describe() if holder else "a sweep that has not written its name yet"
        role = holder.role if holder else "sweep"
        elsewhere = ", or use another --out" if self.role == "sweep" else ""
        return (
            f"{self.path.parent}: another {role} is writing here ({who}); wait for it to finish{elsewhere} "
            f"(if that process is gone for good, remove {self.path})"
        )


def _flock(fd: int) -> bool | None:
    """True: locked. False: held by another process. None: this filesystem has no locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        if exc.errno in _NO_LOCKS:
            return None
        raise
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _read_holder(fd: int) -> Holder | None:
    """Who the file names; None for an empty file (a lock being created, or never written)."""
    data = os.pread(fd, 4096, 0)
    if not data.strip():
        return None
    try:
        fields = json.loads(data)
        return Holder(
            host=str(fields["host"]), pid=int(fields["pid"]), started=str(fields.get("started", "?")),
            start_ticks=fields.get("start_ticks"), role=str(fields.get("role", "sweep")),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return Holder(host="?", pid=0, started="? (unreadable lock file)")


def _write_holder(fd: int, holder: Holder) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(asdict(holder)).encode("utf-8") + b"\n", 0)
    os.fsync(fd)


def _alive(holder: Holder, *, kernel_locked: bool, heartbeat_age_s: float) -> bool:
    """Whether the holder a lock file names may still be writing."""
    if holder.pid == 0:  # an unreadable lock file: trust flock, else the heartbeat
        return not kernel_locked and heartbeat_age_s < STALE_AFTER_S
    if holder.host == socket.gethostname():
        if kernel_locked:
            return False  # on this host flock is authoritative: had the holder lived, it would hold it
        ticks = procs.start_ticks(holder.pid)
        return ticks is not None and (holder.start_ticks is None or ticks == holder.start_ticks)
    return heartbeat_age_s < STALE_AFTER_S
