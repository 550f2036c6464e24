"""Which directory a sweep may write into, and proof that it can, before anything is computed.

A sweep writes only into a directory it made, an empty one, or one that holds a sweep of this package
(its checksum record or manifest): never into a user's folder with other files in it, never through a symlink
out of the folder (runs/ a link to a user's folder), never into a FIFO, device or socket.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from specs.artifacts import (
    CHECKSUMS_FILE,
    LOCK_FILE,
    MANIFEST_FILE,
    SweepLayout,
    holds_sweep,
    is_own_temporary,
    refuse_unsafe_entries,
)

PROBE_BYTES = 1 << 18  # room for a few results: a nearly full disk fails here, not after a run


class SweepDirError(ValueError):
    """An output directory the sweep may not or cannot write into; one line naming it."""


def claim(root: Path) -> None:
    """Create the directory, or accept an existing one that is empty or holds a sweep; refuse anything else."""
    if root.exists():
        if not root.is_dir():
            raise SweepDirError(f"--out {root}: is a file; give a directory (a new one, or a sweep's own)")
        if holds_sweep(root) or _only_own_leftovers(root):
            refuse_unsafe_entries(SweepLayout(root))  # UnsafeFileError: one line naming the link or FIFO
            return
        raise SweepDirError(
            f"--out {root}: not empty and holds no sweep (no {MANIFEST_FILE} or {CHECKSUMS_FILE}); a sweep writes "
            "only into a new or empty directory or one of its own, so nothing of yours is overwritten: "
            "choose another --out"
        )
    try:
        root.mkdir(parents=True)
    except FileExistsError:
        if not root.is_dir():
            raise SweepDirError(f"--out {root}: is a file; give a directory") from None
    except OSError as exc:
        raise SweepDirError(f"--out {root}: cannot create it ({_reason(exc)})") from None


def _only_own_leftovers(root: Path) -> bool:
    """Nothing but a lock file or this package's temporaries: a sweep killed as it started, or starting now."""
    try:
        return all(p.name == LOCK_FILE or is_own_temporary(p.name) for p in root.iterdir())
    except OSError:
        return False


def check_writable(layout: SweepLayout) -> None:
    """Write, fsync and remove a probe in the directory and in runs/, so a read-only mount, a read-only
    runs/ or a full disk is one line now rather than a lost result later."""
    if layout.runs.is_symlink():
        raise SweepDirError(
            f"{layout.runs}: is a symlink (to {os.readlink(layout.runs)}); a sweep keeps its run files in a "
            "directory of its own and never writes through a link: remove the link"
        )
    if layout.runs.exists() and not layout.runs.is_dir():
        raise SweepDirError(f"{layout.runs}: is a file; a sweep keeps its run files in a directory there")
    for directory in (layout.root, layout.runs):
        try:
            directory.mkdir(exist_ok=True)
            _probe(directory)
        except OSError as exc:
            raise SweepDirError(
                f"{directory}: cannot write there ({_reason(exc)}); fix its permissions or free space, "
                "or choose another --out"
            ) from None


def _probe(directory: Path) -> None:
    path = directory / f".write-check.{os.getpid()}.tmp"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            left = memoryview(b"\0" * PROBE_BYTES)
            while left:  # a nearly full disk takes part of a write, then refuses the rest
                left = left[os.write(fd, left) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _reason(exc: OSError) -> str:
    known = {errno.EROFS: "read-only filesystem", errno.ENOSPC: "no space left on the device",
             errno.EDQUOT: "disk quota exceeded", errno.EACCES: "permission denied", errno.ENOTDIR: "a parent is a file"}
    return known.get(exc.errno or 0, exc.strerror or exc.__class__.__name__)
