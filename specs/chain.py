"""A sweep's record (checksums.jsonl): one JSON line for each file a sweep or its report writes or removes, for what
the sweep plans and for each process that writes there, every line carrying the sha256 of all the bytes before it.

What the chain proves: the lines were written in this order and none has been edited, reordered, inserted or cut
out since, because any such change breaks the link of the next line. What it cannot prove on its own: that the
whole file was not rewritten by someone who recomputed every link, which anyone can (there is no secret). Its head,
the sha256 of the whole record, printed by `verify`, proves that too when it is kept elsewhere
(a job log, a commit) and compared: `llada-bench verify DIR --head HEAD`. docs/failures.md says the same.

Lines of an older version carry no link; they are read as a prefix the first linked line then seals.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from specs.safefile import CHECKSUMS_MAX_BYTES, WRITER_TOKEN, append_line, atomic_write, read_bytes, unshare

LINK = "prev"  # each linked line: the sha256 of every byte of the record before it
GENESIS = hashlib.sha256(b"").hexdigest()  # the link of a record's first line
# `.<name>.<writer>.<random>.tmp` (specs/safefile.atomic_write): a temporary of the writer the record names.
_TEMPORARY = re.compile(r"^\.[^/]+\.(?P<writer>[0-9a-f]{16})\.[A-Za-z0-9_]+\.tmp$")


@dataclass
class Record:
    """A record as read: each file's checksums in the order written (None: removed by the package), the latest
    plan, the writers whose temporaries these are, and whether the chain is whole (`broken` says why not)."""

    path: Path
    files: dict[str, list[str | None]] = field(default_factory=dict)
    plan: tuple[str, ...] | None = None  # the run ids the sweep last planned
    plan_spec: str | None = None  # the sha256 of the frozen spec that plan is of
    writers: set[str] = field(default_factory=set)
    sweeps: set[str] = field(default_factory=set)  # the sweep names its writers gave
    heads: set[str] = field(default_factory=set)  # the record's sha256 after each whole line
    head: str = GENESIS
    legacy: int = 0  # lines of an older version, before the chain began
    chained: int = 0
    broken: str | None = None
    torn: int = 0  # bytes after the last newline: a writer killed mid-append
    _whole_bytes: int = 0
    _hasher: hashlib._Hash = field(default_factory=hashlib.sha256, repr=False)

    def recorded(self, key: str) -> set[str]:
        """Every checksum ever recorded for the file `key` (runs/<id>.json, report.md, ...)."""
        return {digest for digest in self.files.get(key, []) if digest is not None}

    def latest(self, key: str) -> str | None:
        """The checksum last recorded for `key`; None when never recorded or last removed."""
        written = self.files.get(key)
        return written[-1] if written else None

    def names(self, key: str) -> bool:
        return key in self.files

    def is_temporary(self, name: str) -> bool:
        """A temporary file of a writer this record names (never a file that merely looks like one)."""
        match = _TEMPORARY.match(name)
        return match is not None and match["writer"] in self.writers

    @property
    def is_empty(self) -> bool:
        return self.legacy + self.chained == 0

    def refuses_sweep(self, sweep: str) -> str | None:
        """Why a writer of `sweep` may not join this record (a record names one sweep), or None."""
        if not self.sweeps or sweep in self.sweeps:
            return None
        return (f"{self.path}: is the record of sweep {sorted(self.sweeps)[0]!r}, and a record names one sweep, "
                f"so nothing of sweep {sweep!r} is added to it: use another --out directory")


def read_record(path: Path) -> Record | None:
    """The record at `path`; None when there is none. UnsafeFileError (one line) for a FIFO, a device, a symlink or
    a record too large to read; a record that is not whole is returned with `broken` saying where and why."""
    try:
        data = read_bytes(path, CHECKSUMS_MAX_BYTES)
    except FileNotFoundError:
        return None
    record = Record(path)
    lines = data.split(b"\n")
    tail = lines.pop()
    record.torn = len(tail)
    for number, raw in enumerate(lines, 1):
        before = record._hasher.hexdigest()
        why = _apply(record, raw, before)
        if why is not None:
            record.broken = f"line {number} {why}"
            return record
        record._hasher.update(raw + b"\n")
        record._whole_bytes += len(raw) + 1
        record.head = record._hasher.hexdigest()
        record.heads.add(record.head)
    return record


def _apply(record: Record, raw: bytes, before: str) -> str | None:
    """Read one line into the record; why it does not belong in a whole record, or None."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return "is not JSON (a record's line never is)"
    if not isinstance(entry, dict):
        return "is not a line of a sweep's record"
    if LINK not in entry:
        if record.chained:
            return "carries no link to the lines before it, after lines that do: it was inserted"
        if not (isinstance(entry.get("file"), str) and isinstance(entry.get("sha256"), str)):
            return "is not a line of a sweep's record"
        record.legacy += 1
        record.files.setdefault(entry["file"], []).append(entry["sha256"])
        return None
    if entry[LINK] != before:
        return ("does not follow the lines before it (its link is not their sha256): the record was edited, or "
                "lines were removed or inserted before it")
    record.chained += 1
    if "file" in entry and isinstance(entry["file"], str) and isinstance(entry.get("sha256"), (str, type(None))):
        record.files.setdefault(entry["file"], []).append(entry["sha256"])
    elif isinstance(entry.get("plan"), list) and all(isinstance(i, str) for i in entry["plan"]):
        record.plan, record.plan_spec = tuple(entry["plan"]), entry.get("spec_sha256")
    elif isinstance(entry.get("writer"), str) and isinstance(entry.get("sweep"), str):
        if record.sweeps and entry["sweep"] not in record.sweeps:
            return (f"names sweep {entry['sweep']!r}, but the lines before it are sweep {sorted(record.sweeps)[0]!r}'s, "
                    "and a record names one sweep")
        record.writers.add(entry["writer"])
        record.sweeps.add(entry["sweep"])
    else:
        return "is not a line of a sweep's record"
    return None


class RecordWriter:
    """Appends to a sweep's record: a file's checksum before the file is written (so no file on disk went
    unrecorded), a removal before the file goes, the plan. The caller holds the folder's lock (specs/lock.py)."""

    def __init__(self, record: Record, root: Path) -> None:
        if record.broken is not None:
            raise ValueError(f"{record.path}: {record.broken}")
        self.record = record
        self.root = root
        self.notes: list[str] = []
        if record.torn:  # a writer killed mid-append left part of a line: never a line, and never linked
            unshare(record.path)
            os.truncate(record.path, record._whole_bytes)
            self.notes.append(f"{record.path}: dropped the {record.torn} bytes of a line a killed writer left unfinished")
            record.torn = 0

    @classmethod
    def open(cls, path: Path, root: Path, sweep: str, role: str) -> RecordWriter:
        """The record at `path` (started when there is none), with this process named as one of its writers."""
        record = read_record(path) or Record(path)
        assert record.refuses_sweep(sweep) is None, record.refuses_sweep(sweep)  # callers refuse it in their words
        writer = cls(record, root)
        if WRITER_TOKEN not in record.writers:
            writer._append({"open": role, "sweep": sweep, "writer": WRITER_TOKEN, "at": _now()})
            record.writers.add(WRITER_TOKEN)
            record.sweeps.add(sweep)
        return writer

    def key(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def write(self, path: Path, data: bytes) -> str:
        """Record the checksum, then write the file atomically; the checksum."""
        digest = hashlib.sha256(data).hexdigest()
        self._append({"file": self.key(path), "sha256": digest, "at": _now()})
        self.record.files.setdefault(self.key(path), []).append(digest)
        atomic_write(path, data)
        return digest

    def remove(self, path: Path) -> None:
        """Record the removal, then remove the file."""
        self._append({"file": self.key(path), "sha256": None, "at": _now()})
        self.record.files.setdefault(self.key(path), []).append(None)
        path.unlink(missing_ok=True)

    def plan(self, run_ids: list[str], spec_sha256: str) -> None:
        """Record the runs the sweep plans (when they differ from the plan last recorded)."""
        if self.record.plan == tuple(run_ids) and self.record.plan_spec == spec_sha256:
            return
        self._append({"plan": run_ids, "spec_sha256": spec_sha256, "at": _now()})
        self.record.plan, self.record.plan_spec = tuple(run_ids), spec_sha256

    def _append(self, entry: dict[str, object]) -> None:
        line = json.dumps({**entry, LINK: self.record.head}, separators=(", ", ": "))
        append_line(self.record.path, line)
        self.record._hasher.update(line.encode("utf-8") + b"\n")
        self.record._whole_bytes += len(line.encode("utf-8")) + 1
        self.record.head = self.record._hasher.hexdigest()
        self.record.heads.add(self.record.head)
        self.record.chained += 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
