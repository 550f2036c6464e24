"""Which directory a sweep may write into, and proof that it can, before anything is computed.

A sweep writes only into a directory it made, an empty one, or one that holds a sweep of this package (its record
whole and its own, specs/ownership.py): never into a user's folder with other files in it, never through a symlink
out of the folder (runs/ a link to a user's folder), never into a FIFO, device or socket. Nor, unknowingly,
into one that is discarded when the process ends: a container's own scratch space, a Ray job's working copy.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path

from specs.artifacts import SweepLayout, entries, refuse_unsafe_entries
from specs.ownership import is_lock_leftover, sweep_refusal
from specs.safefile import WRITER_TOKEN

PROBE_BYTES = 1 << 18  # room for a few results: a nearly full disk fails here, not after a run


class SweepDirError(ValueError):
    """An output directory the sweep may not or cannot write into; one line naming it."""


def claim(root: Path) -> None:
    """Create the directory, or accept an existing one that is empty or holds a sweep whose record is whole and
    its own; refuse anything else, by name, touching nothing."""
    if root.exists():
        if not root.is_dir():
            raise SweepDirError(f"--out {root}: is a file; give a directory (a new one, or a sweep's own)")
        if not entries(root) or is_lock_leftover(root):
            return
        refusal = sweep_refusal(root)
        if refusal is None:
            refuse_unsafe_entries(SweepLayout(root))  # UnsafeFileError: one line naming the link or FIFO
            return
        if refusal.startswith("holds no sweep"):
            refusal = ("not empty and " + refusal + "; a sweep writes only into a new or empty directory or one of "
                       "its own, so nothing of yours is overwritten: choose another --out")
        raise SweepDirError(f"--out {root}: {refusal}")
    try:
        root.mkdir(parents=True)
    except FileExistsError:
        if not root.is_dir():
            raise SweepDirError(f"--out {root}: is a file; give a directory") from None
    except OSError as exc:
        raise SweepDirError(f"--out {root}: cannot create it ({_reason(exc)})") from None


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


# Set in every Apptainer container; its per-run scratch (a tmpfs under the install's mnt/session) holds the
# passwd and group files it makes, a contained HOME and /tmp (--contain, --containall), and the upper layer
# --writable-tmpfs puts over the image. All of it is discarded when the container exits.
APPTAINER_ENV = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")
APPTAINER_SESSION = "/mnt/session/"
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set for the entry point of `ray job submit`


def vanishing(root: Path, env: Mapping[str, str] = os.environ, mountinfo: Path = Path("/proc/self/mountinfo")) -> str | None:
    """Why a sweep written to `root` would be discarded when this process ends, or None: inside Apptainer, a
    directory on the container's scratch rather than one bound from the host; under `ray job submit`, a
    relative one (it lands in the job's working copy, which Ray deletes)."""
    if env.get(RAY_JOB_ENV) and not root.is_absolute():
        return "a `ray job submit` job's working copy of the project, which Ray deletes when the job ends"
    if not any(env.get(name) for name in APPTAINER_ENV):
        return None
    device = _device(_nearest_existing(root.absolute()))
    mounts = _mounts(mountinfo)
    scratch = {dev for dev, point, fstype, _ in mounts if point in ("/etc/passwd", "/etc/group") and fstype == "tmpfs"}
    if device in scratch:
        return "the container's own scratch space, which Apptainer discards at exit (--contain/--containall: HOME and /tmp are not the host's)"
    image = next((options for dev, point, fstype, options in mounts if point == "/" and dev == device), None)
    if image is not None and any(
        option.startswith("upperdir=") and APPTAINER_SESSION in option for option in image.split(",")
    ):
        return "the image, made writable by --writable-tmpfs in a scratch layer that Apptainer discards at exit"
    return None


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _device(path: Path) -> str:
    st_dev = path.stat().st_dev
    return f"{os.major(st_dev)}:{os.minor(st_dev)}"


def _mounts(mountinfo: Path) -> list[tuple[str, str, str, str]]:
    """(major:minor, mount point, filesystem type, super options) of each mount (proc(5), /proc/pid/mountinfo)."""
    try:
        text = mountinfo.read_text()
    except OSError:
        return []
    mounts = []
    for line in text.splitlines():
        fields, _, tail = line.partition(" - ")
        head, rest = fields.split(), tail.split()
        if len(head) >= 5 and len(rest) >= 3:
            mounts.append((head[2], head[4].replace("\\040", " "), rest[0], rest[2]))
    return mounts


def _probe(directory: Path) -> None:
    path = directory / f".write-check.{WRITER_TOKEN}.{os.getpid()}.tmp"  # a name no file of anyone's has
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # made here, so removed here
    try:
        left = memoryview(b"\0" * PROBE_BYTES)
        while left:  # a nearly full disk takes part of a write, then refuses the rest
            left = left[os.write(fd, left) :]
        os.fsync(fd)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def _reason(exc: OSError) -> str:
    known = {errno.EROFS: "read-only filesystem", errno.ENOSPC: "no space left on the device",
             errno.EDQUOT: "disk quota exceeded", errno.EACCES: "permission denied", errno.ENOTDIR: "a parent is a file"}
    return known.get(exc.errno or 0, exc.strerror or exc.__class__.__name__)
