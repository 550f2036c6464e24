"""Reading and writing files without touching what is not ours: a path is read only when it is a regular file
no larger than a stated limit, and never through a symlink where none may be.

A FIFO blocks its reader forever, a device such as /dev/zero never ends, a socket is no data, and a symlink
inside a sweep leads out of it; each of these is refused with one line naming the path (UnsafeFileError)
before a byte is read. The check is made twice: `lstat` before opening (so a device is never even opened),
then `fstat` on the descriptor opened with O_NONBLOCK (a FIFO's open cannot block) and, inside a sweep,
O_NOFOLLOW (a file swapped for a symlink in between is refused too).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"
MIB = 1 << 20
# What each kind of file may weigh before it is read whole: generous for any real one, far below memory.
SPEC_MAX_BYTES = 1 * MIB  # the largest shipped spec is a few KiB
MANIFEST_MAX_BYTES = 16 * MIB  # ~100 bytes per run
CHECKSUMS_MAX_BYTES = 64 * MIB  # ~130 bytes per write, every resume included
RUN_MAX_BYTES = 64 * MIB  # a run file holds raw samples and generations: the H200 ones are under 200 KiB
PROMPTS_MAX_BYTES = 256 * MIB  # a local prompt file (.txt or .jsonl)
# This process's name in the temporaries it makes (`.<name>.<writer>.<random>.tmp`): a sweep's record names the
# writers that wrote there (specs/chain.py), so a sweep removes a leftover temporary only when it is one of theirs.
WRITER_TOKEN = secrets.token_hex(8)


class UnsafeFileError(ValueError):
    """A path that is no regular file, a symlink where none may be, or too large; one line naming it."""


def kind_of(mode: int) -> str:
    """'a FIFO', 'a character device', ...: what a path is, in words."""
    kinds = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
             (stat.S_ISREG, "a regular file"))
    for test, name in kinds:
        if test(mode):
            return name
    return "not a regular file"


def is_special(mode: int) -> bool:
    """A FIFO, device or socket: never data, and opening or reading one may block or never end."""
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode)


def lstat_or_none(path: Path) -> os.stat_result | None:
    """The path's own status (a symlink's, not its target's), or None when nothing is there."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def open_regular(path: Path, *, follow: bool = False) -> int:
    """A read-only descriptor of `path`, only when it is a regular file; `follow`: a symlink to one is
    accepted (a spec the user links to), else refused (a sweep's own files). UnsafeFileError or OSError."""
    status = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISREG(status.st_mode):
        raise UnsafeFileError(_refusal(path, status.st_mode, follow))
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # swapped for a symlink or a socket since the lstat
            raise UnsafeFileError(_refusal(path, os.lstat(path).st_mode, follow)) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # swapped for a FIFO or a device since the lstat
        os.close(fd)
        raise UnsafeFileError(_refusal(path, mode, follow))
    return fd


def _refusal(path: Path, mode: int, follow: bool) -> str:
    what = kind_of(mode)
    if stat.S_ISLNK(mode) and not follow:
        return (f"{path}: is a symlink; files of a sweep are read only inside it, never through a link: "
                "replace it with the file")
    if stat.S_ISDIR(mode):
        return f"{path}: is a directory, not a file"
    return (f"{path}: is {what}, not a regular file; it is never read (it could block or never end): "
            "give a file")


def read_bytes(path: Path, limit: int, *, follow: bool = False) -> bytes:
    """The whole file, refused (UnsafeFileError) when it is not a regular file or holds more than `limit`
    bytes (also one whose size the kernel does not report, as /proc's: never more than limit + 1 are read)."""
    fd = open_regular(path, follow=follow)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafeFileError(_too_large(path, size, limit))
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(MIB, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise UnsafeFileError(_too_large(path, total, limit))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path, limit: int, *, follow: bool = False) -> str:
    """read_bytes decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bytes(path, limit, follow=follow).decode("utf-8")


@contextmanager
def open_binary(path: Path, *, follow: bool = False) -> Iterator[BinaryIO]:
    """A regular file opened for streaming (a checksum over a file of any size, read in chunks)."""
    with os.fdopen(open_regular(path, follow=follow), "rb") as handle:
        yield handle


def _too_large(path: Path, size: int, limit: int) -> str:
    shown = f"{size / MIB:.1f} MiB" if size >= MIB else f"{size} bytes"
    return f"{path}: {shown}, more than the {limit // MIB} MiB such a file may hold; it is not read"


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


SHARED_MODE = 0o666 & ~_umask()


def atomic_write(path: Path, data: bytes) -> None:
    """Temporary file in the same directory under a name of its own (`.<name>.<writer>.<random>.tmp`: two writers
    never share one), fsync, rename, fsync the directory: all or nothing. The rename replaces a symlink at `path`,
    never writes through it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{WRITER_TOKEN}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, SHARED_MODE)  # mkstemp's 0600 would hide results from colleagues on a shared disk
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def open_own(path: Path, flags: int, mode: int = SHARED_MODE) -> int:
    """os.open for writing a file of a sweep (its checksum record, its lock): created when absent, else only a
    regular file, never through a symlink, never a FIFO (whose open would block) or a device."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        status = lstat_or_none(path)
        if status is not None and not stat.S_ISREG(status.st_mode):
            raise UnsafeFileError(_refusal(path, status.st_mode, False)) from None
        raise exc from None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise UnsafeFileError(_refusal(path, status.st_mode, False))
    return fd


def unshare(path: Path) -> None:
    """Replace a regular file that has other hard links (a `cp -al` snapshot of its folder) by a copy of itself, so
    that writing into it in place (an append, a truncation) leaves what the other names hold as it was."""
    status = lstat_or_none(path)
    if status is None or not stat.S_ISREG(status.st_mode) or status.st_nlink <= 1:
        return
    with open_binary(path) as handle:
        data = handle.read()
    atomic_write(path, data)


def append_line(path: Path, line: str) -> None:
    """Append one line and fsync it (O_APPEND: a line is never interleaved with another writer's), into this name's
    own copy of the file (unshare)."""
    unshare(path)
    fd = open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
