"""Where `llada-bench train` may write the pair: the sweeps' rule for users' folders (specs/ownership.py), for a pair.

`--out` is written only when it is new, empty, or a pair this package wrote there (its SHA256SUMS lists a
provenance.json that states the training rule); a file in it is replaced only when that SHA256SUMS lists it,
so a user's own files are neither overwritten nor listed as part of the pair. The pair is staged in the work
folder and copied in at the end, each file by copy and rename, so an interrupted run leaves `--out` as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from miniature.export import CHECKSUMS_FILE

PROVENANCE_FILE = "provenance.json"
MEMBERS = ("llama", "llada", "fast_dllm_v2")


class PairFolderError(ValueError):
    """An --out the trainer may not write into; one line naming it and what to do."""


def listed_files(out: Path) -> dict[str, str] | None:
    """The files (relative name → sha256) that a pair this package wrote in `out` lists; None when `out` holds no
    such pair (no SHA256SUMS, one that is not sha256sum's format, or no provenance.json of a trained pair)."""
    try:
        text = (out / CHECKSUMS_FILE).read_text(encoding="utf-8")
        listed = {}
        for line in text.splitlines():
            digest, name = line.split(maxsplit=1)
            listed[name.strip()] = digest
        provenance = json.loads((out / PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if PROVENANCE_FILE not in listed or not isinstance(provenance, dict) or "training_rule" not in provenance:
        return None
    return listed


def check_out(out: Path, names: list[str] | None = None) -> None:
    """PairFolderError unless the pair may be written to `out`: a new or empty folder, or a pair of this package
    in which every file the pair would write (`names`; by default every file under the pair's own entries) is
    one its SHA256SUMS lists."""
    if not out.exists():
        return
    if not out.is_dir():
        raise PairFolderError(f"--out {out}: is a file; give a folder (a new one, or a pair this command wrote)")
    if not any(out.iterdir()):
        return
    listed = listed_files(out)
    if listed is None:
        raise PairFolderError(f"--out {out}: not empty and holds no pair this command wrote (no {CHECKSUMS_FILE} "
                              f"listing a {PROVENANCE_FILE} of a trained pair), so nothing of yours is overwritten: "
                              "choose another --out")
    theirs = [name for name in (names if names is not None else _own_entries(out)) if name not in listed
              and (out / name).exists()]
    if theirs:
        shown = ", ".join(theirs[:5]) + (f" and {len(theirs) - 5} more" if len(theirs) > 5 else "")
        raise PairFolderError(f"--out {out}: {shown} not written by this command (its {CHECKSUMS_FILE} does not "
                              "list them), so training could replace what may be yours: move them out of "
                              f"{out}, or choose another --out")


def _own_entries(out: Path) -> list[str]:
    """The files under the names a pair writes (its members' folders and provenance.json)."""
    names = [PROVENANCE_FILE]
    for member in MEMBERS:
        if (out / member).is_dir():
            names += [p.relative_to(out).as_posix() for p in sorted((out / member).rglob("*")) if not p.is_dir()]
        else:
            names.append(member)
    return names


def publish(staged: Path, out: Path) -> None:
    """Copy the pair staged in `staged` (its SHA256SUMS written) into `out`, after checking `out` again; files an
    earlier pair listed that this one does not write are removed when they still hold what was written."""
    names = [p.relative_to(staged).as_posix() for p in sorted(staged.rglob("*")) if p.is_file()]
    check_out(out, [name for name in names if name != CHECKSUMS_FILE])
    earlier = listed_files(out) or {}
    for name in sorted(names, key=lambda n: n == CHECKSUMS_FILE):  # the list last: it names a whole pair
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.partial")
        shutil.copy2(staged / name, temporary)
        os.replace(temporary, target)
    for name, digest in earlier.items():
        path = out / name
        if name not in names and path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
            path.unlink()
