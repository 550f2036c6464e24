"""Where the package's own files are, and how a path in a spec is found: as given, else inside the package."""

from __future__ import annotations

from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def resolve_path(path: str | Path) -> Path:
    """A path as given, else relative to the installed package root (so shipped specs work anywhere)."""
    candidate = Path(path)
    if candidate.exists() or candidate.is_absolute():
        return candidate
    packaged = PACKAGE_ROOT / candidate
    return packaged if packaged.exists() else candidate
