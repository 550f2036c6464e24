"""Where the package's own files are, and how a path in a spec is found: as given, else inside the package."""

from __future__ import annotations

import errno
import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def resolve_path(path: str | Path) -> Path:
    """A path as given, else relative to the installed package root (so shipped specs work anywhere)."""
    candidate = Path(path)
    if candidate.exists() or candidate.is_absolute():
        return candidate
    packaged = PACKAGE_ROOT / candidate
    return packaged if packaged.exists() else candidate


def broken_link(path: Path) -> str | None:
    """What is there when `path` does not resolve but is not simply absent, in words: a symlink loop (or a path
    through one), or a symlink whose target is gone. None when nothing is there at all."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop (following it leads back to itself)"
        if os.path.islink(path):
            return f"is a symlink to {os.readlink(path)!r}, which does not exist"
    return None
