"""The artifact layout and its checksums: the contract between the driver that writes and the report that reads."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from specs.chain import Record, read_record
from specs.results import RunResult
from specs.safefile import (
    MANIFEST_MAX_BYTES,
    RUN_MAX_BYTES,
    UnsafeFileError,
    is_special,
    kind_of,
    lstat_or_none,
    open_binary,
    read_bytes,
)

SPEC_FILE = "spec.yaml"
RUNS_DIR = "runs"
MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.parquet"
FIGURES_DIR = "figures"
# The sweep's record (specs/chain.py): every file the sweep and its report wrote or removed, and what the sweep
# planned, chained line to line; the manifest and report-manifest.json are views of it that verify checks.
CHECKSUMS_FILE = "checksums.jsonl"
LOCK_FILE = "sweep.lock"  # present while a sweep writes here: host, pid, start time
# The report: the HTML, its Markdown, and the Findings as data (both pairings; report/answer/pairing/build.py).
REPORT_FILES = ("report.html", "report.md", "findings.json")
# The checksum of every file the report last wrote (specs/report_record.py).
REPORT_MANIFEST_FILE = "report-manifest.json"
FIGURE_SUFFIXES = (".png", ".svg")
# What a sweep directory may hold; anything else is a stray that `verify` names.
SWEEP_FILES = frozenset({SPEC_FILE, MANIFEST_FILE, CHECKSUMS_FILE, RESULTS_FILE, LOCK_FILE, REPORT_MANIFEST_FILE,
                         *REPORT_FILES})
SWEEP_DIRS = frozenset({RUNS_DIR, FIGURES_DIR})
class Manifest(BaseModel):
    """run_id → sha256 of its file, plus the frozen spec's sha256."""

    model_config = ConfigDict(extra="forbid")

    sweep: str
    spec_sha256: str
    runs: dict[str, str]


@dataclass(frozen=True)
class SweepLayout:
    """Where each file of one sweep lives: artifacts/<sweep>/..."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / SPEC_FILE

    @property
    def runs(self) -> Path:
        return self.root / RUNS_DIR

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def results(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def figures(self) -> Path:
        return self.root / FIGURES_DIR

    @property
    def checksums(self) -> Path:
        return self.root / CHECKSUMS_FILE

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def report_manifest(self) -> Path:
        return self.root / REPORT_MANIFEST_FILE

    def run_file(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    def run_files(self) -> dict[str, Path]:
        """Every finished run file on disk, by run id (temporary files and directories are not runs)."""
        if not is_own_dir(self.runs):
            return {}
        return {p.stem: p for p in sorted(self.runs.glob("*.json")) if is_regular(p)}

    def temporaries(self, record: Record) -> list[Path]:
        """Temporary files of the writers the record names, left by an interrupted write (never anything else)."""
        found = entries(self.root)
        for directory in (self.runs, self.figures):
            found += entries(directory) if is_own_dir(directory) else []
        return [p for p in found if record.is_temporary(p.name) and is_regular(p)]


def entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def is_regular(path: Path) -> bool:
    """A regular file itself, not a symlink to one (lstat)."""
    status = lstat_or_none(path)
    return status is not None and stat.S_ISREG(status.st_mode)


def is_own_dir(path: Path) -> bool:
    """A directory itself, not a symlink to one: a sweep never follows a link out of its folder."""
    status = lstat_or_none(path)
    return status is not None and stat.S_ISDIR(status.st_mode)


def refuse_unsafe_entries(layout: SweepLayout) -> None:
    """Raise UnsafeFileError, one line naming the path, for the first FIFO, device, socket or symlink in the
    sweep folder, its runs/ or its figures/: none is ever read, written or followed. Only names are looked at
    (lstat), so this never blocks."""
    for directory in (layout.root, layout.runs, layout.figures):
        status = lstat_or_none(directory)
        if status is None:
            continue
        if directory != layout.root and not stat.S_ISDIR(status.st_mode):
            if stat.S_ISLNK(status.st_mode) or is_special(status.st_mode):
                raise UnsafeFileError(_unsafe(directory, status.st_mode))
            continue  # a file where a directory belongs: a stray, named by verify
        for path in entries(directory):
            mode = lstat_or_none(path)
            if mode is not None and (stat.S_ISLNK(mode.st_mode) or is_special(mode.st_mode)):
                raise UnsafeFileError(_unsafe(path, mode.st_mode))


def _unsafe(path: Path, mode: int) -> str:
    if stat.S_ISLNK(mode):
        target = os.readlink(path)
        return (f"{path}: is a symlink (to {target}); a sweep reads and writes only inside its own folder and never "
                "follows a link out of it: replace the link with the real file or directory, or remove it")
    return (f"{path}: is {kind_of(mode)}; a sweep folder holds only regular files and directories, and this is "
            "never opened (it could block or never end): remove it")


def checksum_key(layout: SweepLayout, path: Path) -> str:
    """How the checksum record names a file: its path inside the sweep directory (runs/<id>.json)."""
    return path.relative_to(layout.root).as_posix()


def read_sweep_record(layout: SweepLayout) -> Record | None:
    """The sweep's record (checksums.jsonl, specs/chain.py), None when there is none; UnsafeFileError for a FIFO,
    a link or one too large to read."""
    return read_record(layout.checksums)


def read_checksums(layout: SweepLayout) -> dict[str, set[str]] | None:
    """Every checksum ever recorded, by file (None when there is no record)."""
    record = read_sweep_record(layout)
    return None if record is None else {key: record.recorded(key) for key in record.files}


def sha256_file(path: Path, *, follow: bool = False) -> str:
    """sha256 of a regular file, read in chunks; `follow` takes a symbolic link to one (a hub cache's snapshot)."""
    digest = hashlib.sha256()
    with open_binary(path, follow=follow) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(layout: SweepLayout) -> Manifest | None:
    """The manifest, None when there is none; UnsafeFileError (a ValueError) when it is no regular file or too
    large, ValidationError when it does not parse."""
    if lstat_or_none(layout.manifest) is None:
        return None
    return Manifest.model_validate_json(read_bytes(layout.manifest, MANIFEST_MAX_BYTES))


@dataclass(frozen=True)
class Problem:
    """One verification failure, named so a user can find the file."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def verify(layout: SweepLayout) -> list[Problem]:
    """Recompute every checksum; name a record that is missing or not whole, each mismatch, missing file, extra
    file and stray entry, every manifest checksum the sweep never recorded writing, and every run file that names
    another run or another sweep inside (copied in from elsewhere). Empty = verified. A file that cannot be read is
    named, never a traceback. UnsafeFileError (one line) for a FIFO, device, socket or symlink in the folder, or a
    file too large to read."""
    refuse_unsafe_entries(layout)
    try:
        record = read_sweep_record(layout)
        problems = record_problems(layout, record)
    except UnsafeFileError:
        raise
    except OSError as exc:
        record, problems = None, [Problem(str(layout.checksums), f"unreadable ({_why(exc)}): fix its permissions, "
                                          "then verify again")]
    try:
        manifest = read_manifest(layout)
    except UnsafeFileError:
        raise
    except (ValueError, OSError) as exc:
        return problems + [Problem(str(layout.manifest), f"unreadable manifest ({_why(exc)})")]
    if manifest is None:
        return problems + [Problem(str(layout.manifest), "missing")]
    recorded = record or Record(layout.checksums)
    spec_digest = checksum_or_problem(layout.spec) if is_regular(layout.spec) else Problem(str(layout.spec), "missing")
    if isinstance(spec_digest, Problem):
        problems.append(spec_digest)
    elif spec_digest != manifest.spec_sha256:
        problems.append(Problem(str(layout.spec), "checksum mismatch (edited after the sweep)"))
    elif record is not None and manifest.spec_sha256 not in recorded.recorded(SPEC_FILE):
        problems.append(Problem(str(layout.spec), f"checksum not in {CHECKSUMS_FILE} (manifest edited?)"))
    on_disk = layout.run_files()
    for run_id, expected in sorted(manifest.runs.items()):
        path = layout.run_file(run_id)
        digest = checksum_or_problem(path) if run_id in on_disk else None
        if digest is None:
            if not path.exists():  # one that is there but no file is named below, as a stray
                problems.append(Problem(str(path), "missing"))
        elif isinstance(digest, Problem):
            problems.append(digest)
        elif digest != expected:
            problems.append(Problem(str(path), "checksum mismatch (truncated or edited)"))
        elif record is not None and expected not in recorded.recorded(checksum_key(layout, path)):
            problems.append(Problem(str(path), f"checksum not in {CHECKSUMS_FILE}: not a result the sweep wrote"))
        else:
            problems += _foreign(path, run_id, manifest.sweep)
    for run_id in sorted(set(on_disk) - set(manifest.runs)):
        problems.append(Problem(str(on_disk[run_id]), "extra file not in the manifest"))
    return problems + strays(layout, recorded)


def record_problems(layout: SweepLayout, record: Record | None) -> list[Problem]:
    """The record itself: gone, or not whole (an edit, a line removed or inserted, a foreign file)."""
    if record is None:
        return [Problem(str(layout.checksums), "missing: the record of every file this sweep wrote is gone (deleted, "
                        "or the folder predates it), so no checksum here can be trusted; rerun the sweep into a "
                        "new --out")]
    if record.broken is not None:
        return [Problem(str(layout.checksums), f"not whole: {record.broken}; nothing it records after that line "
                        "can be trusted")]
    return []


def checksum_or_problem(path: Path) -> str | Problem:
    """The file's sha256, or the problem naming why it cannot be read (permissions, an I/O error)."""
    try:
        return sha256_file(path)
    except UnsafeFileError:
        raise
    except OSError as exc:
        return Problem(str(path), f"unreadable ({_why(exc)}): fix its permissions, then verify again")


def _why(exc: BaseException) -> str:
    return exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else exc.__class__.__name__


def _foreign(path: Path, run_id: str, sweep: str) -> list[Problem]:
    """A run file whose content names another run or another sweep: copied in, with checksums made to match."""
    try:
        result = RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES))
    except (ValidationError, UnicodeDecodeError):
        return [Problem(str(path), "not a run result (does not parse as one)")]
    if result.run_id != run_id:
        return [Problem(str(path), f"holds run {result.run_id}, not {run_id} (renamed or copied in)")]
    if result.sweep != sweep:
        return [Problem(str(path), f"a run of sweep {result.sweep!r}, not of {sweep!r} (copied in from another sweep)")]
    return []


def strays(layout: SweepLayout, record: Record) -> list[Problem]:
    """Entries a sweep never writes: unknown files and folders, a run path that is not a file, figures that are
    not images. The temporaries of a writer the record names are not strays (the next sweep removes them); a file
    that merely looks like one is."""
    problems = []
    for path in entries(layout.root):
        name = path.name
        if record.is_temporary(name):
            continue
        if name in SWEEP_DIRS:
            if not path.is_dir() or path.is_symlink():
                problems.append(Problem(str(path), "stray: a sweep keeps a directory here"))
        elif name in SWEEP_FILES:
            if not path.is_file() or path.is_symlink():
                problems.append(Problem(str(path), "stray: not a regular file"))
        else:
            problems.append(Problem(str(path), "stray: not part of a sweep"))
    for path in entries(layout.runs) if is_own_dir(layout.runs) else []:
        if record.is_temporary(path.name):
            continue
        if path.suffix != ".json":
            problems.append(Problem(str(path), "stray: not a run file"))
        elif not path.is_file() or path.is_symlink():
            problems.append(Problem(str(path), "stray: a run file must be a regular file"))
    for path in entries(layout.figures) if is_own_dir(layout.figures) else []:
        if record.is_temporary(path.name):
            continue
        if path.suffix not in FIGURE_SUFFIXES or not is_regular(path):
            problems.append(Problem(str(path), "stray: not a figure"))
    return problems


def planned_without_result(layout: SweepLayout, record: Record | None) -> tuple[list[str], int]:
    """The runs the sweep last planned (its record's plan line) that have no run file, and how many it planned: a
    sweep interrupted, stopped by its time limit, or refused a write before them. ([], 0) without a plan."""
    if record is None or record.plan is None:
        return [], 0
    on_disk = layout.run_files()
    return [run_id for run_id in record.plan if run_id not in on_disk], len(record.plan)


def not_run_note(missing: list[str], planned: int) -> str:
    """What a report and verify say of planned runs that never ran."""
    return (f"{len(missing)} of the {planned} planned runs never ran (the sweep stopped before them: interrupted, out "
            f"of time, or refused a write), so every number here rests on the {planned - len(missing)} that did; rerun "
            f"the same sweep command to run them (not run: {', '.join(missing[:8])}"
            f"{f' and {len(missing) - 8} more' if len(missing) > 8 else ''})")


def load_results(layout: SweepLayout) -> list[RunResult]:
    """Every run artifact of a sweep, parsed (the report's only input besides the spec)."""
    return [RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES)) for path in layout.run_files().values()]


def canonical_json(data: object) -> str:
    """Sorted keys, no whitespace: the form that is hashed into run ids."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
