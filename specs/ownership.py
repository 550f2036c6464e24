"""Which folders are sweeps and which files in them are the package's: the one rule every command that deletes or
overwrites follows. A folder is a sweep only when its record (checksums.jsonl, specs/chain.py) is whole and its own:
every line linked, its frozen spec one the record names, its manifest of the sweep the record names. A file is the
package's to replace only when the record says the package wrote the file there (and removed it not since); to
remove, only when the file also still holds what the package wrote. Anything else is refused by name, with what to
do, and left as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from specs.artifacts import (
    CHECKSUMS_FILE,
    LOCK_FILE,
    MANIFEST_FILE,
    RUNS_DIR,
    SPEC_FILE,
    SweepLayout,
    checksum_key,
    entries,
    is_regular,
    read_manifest,
    read_sweep_record,
    refuse_unsafe_entries,
    sha256_file,
)
from specs.chain import Record
from specs.safefile import UnsafeFileError, lstat_or_none, read_bytes

LOCK_MAX_BYTES = 4096


class NotOursError(ValueError):
    """A file the command would replace or remove that its sweep's record does not name as written there; one line."""


def sweep_refusal(root: Path) -> str | None:
    """Why `root` is not a sweep this package may write into or read as one; None when it is."""
    layout = SweepLayout(root)
    try:
        record = read_sweep_record(layout)
    except (UnsafeFileError, OSError) as exc:
        return str(exc) if isinstance(exc, UnsafeFileError) else f"{layout.checksums}: unreadable ({exc.strerror})"
    if record is None:
        found = sweep_entries(root)
        if found:
            return (f"holds no sweep whose record is whole: {', '.join(found)} but no {CHECKSUMS_FILE}, the record of "
                    "every file a sweep writes (deleted, or the folder predates it), so nothing in it can be checked, "
                    "resumed or replaced: sweep into a new --out")
        return f"holds no sweep (no {CHECKSUMS_FILE})"
    try:
        refuse_unsafe_entries(layout)  # a folder that claims to be a sweep: no FIFO, device or link in it
    except UnsafeFileError as exc:
        return str(exc)
    if record.broken is not None or record.is_empty:
        why = record.broken or "it records nothing"
        return (f"{layout.checksums}: not a whole record of a sweep ({why}), so this folder is not taken for one: "
                "`llada-bench verify` names what changed; sweep into a new --out")
    return _not_own(layout, record)


def sweep_entries(root: Path) -> list[str]:
    """The names of a sweep's own entries that `root` holds besides its record: none in a folder that never held
    one."""
    return [name for name in (SPEC_FILE, MANIFEST_FILE, RUNS_DIR) if lstat_or_none(root / name) is not None]


def holds_sweep(root: Path) -> bool:
    return sweep_refusal(root) is None


def _not_own(layout: SweepLayout, record: Record) -> str | None:
    """Why a whole record is not this folder's own: its frozen spec or its manifest is not one it names."""
    if not is_regular(layout.spec) or _digest(layout.spec) not in record.recorded(SPEC_FILE):
        return (f"{layout.spec}: missing, or not a spec its {CHECKSUMS_FILE} names (its checksum is not recorded), "
                "so this is not a whole sweep of its own: sweep into a new --out")
    try:
        manifest = read_manifest(layout)
    except UnsafeFileError as exc:
        return str(exc)
    except (ValidationError, ValueError, OSError):
        return f"{layout.manifest}: not a sweep's manifest, so this is not a whole sweep: sweep into a new --out"
    if manifest is not None and record.sweeps and manifest.sweep not in record.sweeps:
        return (f"{layout.manifest}: of sweep {manifest.sweep!r}, but {CHECKSUMS_FILE} of "
                f"{', '.join(repr(s) for s in sorted(record.sweeps))}: not one sweep; sweep into a new --out")
    return None


def owned(layout: SweepLayout, record: Record, path: Path) -> bool:
    """Whether `path` is absent, or a regular file the record says the package wrote there (an edit of it is
    damage to repair: verify names it, and writing again replaces it)."""
    if lstat_or_none(path) is None:
        return True
    return is_regular(path) and record.latest(checksum_key(layout, path)) is not None


def removable(layout: SweepLayout, record: Record, path: Path) -> bool:
    """Whether `path` is a file the package wrote there that still holds what it wrote: the only kind it removes."""
    key = checksum_key(layout, path)
    return is_regular(path) and record.latest(key) is not None and _digest(path) in record.recorded(key)


def refuse_unowned(layout: SweepLayout, record: Record, paths: Iterable[Path], doing: str) -> None:
    """NotOursError naming every path the command would replace that the record does not say the package wrote
    there (put there by someone): moved away, nothing of anyone's is lost."""
    theirs = [path for path in paths if not owned(layout, record, path)]
    if theirs:
        shown = ", ".join(str(p) for p in theirs[:5]) + (f" and {len(theirs) - 5} more" if len(theirs) > 5 else "")
        one = len(theirs) == 1
        raise NotOursError(
            f"{shown}: {'is' if one else 'are'} not written by this sweep ({CHECKSUMS_FILE} records no such file "
            f"there), so {doing} would replace what may be yours: move {'it' if one else 'them'} out of "
            f"{layout.root}, then run the same command again"
        )


def is_lock_leftover(root: Path) -> bool:
    """A folder holding nothing but this package's lock file, empty or naming a holder: a sweep killed as it
    started (before its record), or starting now."""
    names = [p.name for p in entries(root)]
    if names != [LOCK_FILE] or not is_regular(root / LOCK_FILE):
        return False
    try:
        data = read_bytes(root / LOCK_FILE, LOCK_MAX_BYTES)
    except (UnsafeFileError, OSError):
        return False
    if not data.strip():
        return True
    try:
        holder = json.loads(data)
    except ValueError:
        return False
    return isinstance(holder, dict) and {"host", "pid", "started"} <= holder.keys()


def _digest(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except (UnsafeFileError, OSError):
        return None
