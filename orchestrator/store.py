"""The artifact store: atomic writes, the manifest, and knowing which runs are already done."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from specs.artifacts import (
    CHECKSUMS_FILE,
    SPEC_FILE,
    Manifest,
    SweepLayout,
    canonical_json,
    checksum_key,
    holds_sweep,
    read_checksums,
    read_manifest,
    sha256_file,
)
from specs.loader import SpecError, parse_spec
from specs.results import RunResult, RunStatus
from specs.safefile import RUN_MAX_BYTES, SPEC_MAX_BYTES, append_line, atomic_write, read_bytes, read_text
from specs.schema import ExperimentSpec

FAILED_STATUSES = frozenset({RunStatus.ERROR, RunStatus.CRASHED})
RESCUE_DIR_ENV = "LLADA_BENCH_RESCUE_DIR"  # where a result goes when its sweep directory cannot take it


class DifferentSpecError(SpecError):
    """The output directory holds artifacts of another spec."""


class ArtifactStore:
    """Owns artifacts/<sweep>/: the frozen spec, one file per run, the manifest over them, and the record of
    every checksum written (checksums.jsonl), which decides what a rebuilt manifest may adopt."""

    def __init__(self, root: Path) -> None:
        self.layout = SweepLayout(root)
        self._manifest: Manifest | None = None
        self._recorded: dict[str, set[str]] = {}
        self.notes: list[str] = []  # what open() found and did, for the user to read

    @property
    def root(self) -> Path:
        return self.layout.root

    def open(self, spec: ExperimentSpec, spec_text: str, *, force: bool = False) -> None:
        """Freeze the spec (refusing another spec's directory unless forced) and load or rebuild the manifest.
        The caller has made the directory its own (orchestrator/sweepdir.py) and holds its lock."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temporaries()
        self._open_checksum_record()
        if self.layout.spec.is_file():
            frozen = read_text(self.layout.spec, SPEC_MAX_BYTES)
            if not _same_spec(frozen, spec) and not force:
                raise DifferentSpecError(
                    f"{self.root}: holds artifacts of a different spec (see {self.layout.spec}); "
                    "use another --out directory, or --force to rerun every run under the new spec"
                )
            if frozen != spec_text:
                self._write_recorded(self.layout.spec, spec_text.encode("utf-8"))
        else:
            self._write_recorded(self.layout.spec, spec_text.encode("utf-8"))
        self.layout.runs.mkdir(parents=True, exist_ok=True)
        self._manifest = self._reconciled_manifest(spec.name)
        self._write_manifest()

    def completed(self, run_ids: list[str], *, retry_failed: bool = False) -> set[str]:
        """Runs whose artifact is present and verifies, so a resumed sweep skips them."""
        return _verified_runs(self.layout, self._require_manifest(), self._recorded, run_ids,
                              retry_failed=retry_failed, notes=self.notes)

    def write_result(self, result: RunResult) -> Path:
        """Write one run's artifact the moment it arrives, then record its checksum."""
        manifest = self._require_manifest()
        path = self.layout.run_file(result.run_id)
        manifest.runs[result.run_id] = self._write_recorded(path, result.model_dump_json(indent=1).encode("utf-8"))
        self._write_manifest()
        return path

    def _write_recorded(self, path: Path, data: bytes) -> str:
        """Record the checksum first, then write: a file on disk is never one whose checksum went unrecorded."""
        digest = hashlib.sha256(data).hexdigest()
        key = checksum_key(self.layout, path)
        line = json.dumps({"file": key, "sha256": digest, "at": datetime.now(UTC).isoformat(timespec="seconds")})
        append_line(self.layout.checksums, line)
        self._recorded.setdefault(key, set()).add(digest)
        atomic_write(path, data)
        return digest

    def _open_checksum_record(self) -> None:
        """Read the record of checksums written; start it (from the manifest, for a directory that predates
        it) when there is none."""
        recorded = read_checksums(self.layout)
        if recorded is not None:
            self._recorded = recorded
            return
        try:
            manifest = read_manifest(self.layout)
        except (ValueError, OSError):
            manifest = None
        self.layout.checksums.touch()
        self._recorded = {}
        if manifest is None:
            return
        entries = {checksum_key(self.layout, self.layout.run_file(r)): sha for r, sha in manifest.runs.items()}
        entries[SPEC_FILE] = manifest.spec_sha256
        for key, digest in entries.items():
            append_line(self.layout.checksums, json.dumps({"file": key, "sha256": digest, "from": "manifest.json"}))
            self._recorded.setdefault(key, set()).add(digest)
        self.notes.append(
            f"{self.layout.checksums}: started from manifest.json ({len(manifest.runs)} runs); this directory "
            "predates the record, so those checksums are the manifest's word alone"
        )

    def _write_manifest(self) -> None:
        manifest = self._require_manifest()
        manifest.spec_sha256 = sha256_file(self.layout.spec)
        manifest.runs = dict(sorted(manifest.runs.items()))
        atomic_write(self.layout.manifest, manifest.model_dump_json(indent=1).encode("utf-8"))

    def _require_manifest(self) -> Manifest:
        if self._manifest is None:
            raise RuntimeError("ArtifactStore.open() must be called first")
        return self._manifest

    def _reconciled_manifest(self, sweep: str) -> Manifest:
        """Trust the manifest for files it lists; adopt a whole run file it is missing (a crash between the
        run file's rename and the manifest's, or a deleted manifest) only when its checksum is one this sweep
        recorded writing, so an edited file is never laundered into a result; drop entries whose file is gone."""
        try:
            manifest = read_manifest(self.layout)
        except (ValueError, OSError):
            manifest = None
            self.notes.append(f"{self.layout.manifest}: unreadable; rebuilt from the run files")
        runs = dict(manifest.runs) if manifest else {}
        on_disk = self.layout.run_files()
        for run_id in list(runs):
            if run_id not in on_disk:
                del runs[run_id]
        for run_id, path in on_disk.items():
            if run_id in runs:
                continue
            digest = sha256_file(path)
            if digest in self._recorded.get(checksum_key(self.layout, path), set()) and _is_whole_result(path, run_id):
                runs[run_id] = digest
            else:
                self.notes.append(
                    f"{path}: not adopted: its checksum is not one this sweep recorded writing ({CHECKSUMS_FILE}), "
                    "so it was edited or written by something else; the run will be recomputed"
                )
        return Manifest(sweep=sweep, spec_sha256="", runs=runs)

    def _remove_stale_temporaries(self) -> None:
        """A driver killed mid-write leaves its temporary file behind; it was never a result. Only files
        named the way this package names its temporaries are removed, nothing else."""
        for temp in self.layout.temporaries():
            temp.unlink(missing_ok=True)


def already_done(root: Path, run_ids: list[str], *, retry_failed: bool = False) -> set[str]:
    """What `completed` will find, read before anything is written (a new directory: nothing), so a refusal
    such as --max-predicted-hours leaves no file behind."""
    layout = SweepLayout(root)
    if not root.is_dir() or not holds_sweep(root):
        return set()
    try:
        manifest = read_manifest(layout)
    except (ValidationError, OSError):  # unreadable: nothing counts as done (open() says why)
        return set()
    if manifest is None:
        return set()
    return _verified_runs(layout, manifest, read_checksums(layout) or {}, run_ids, retry_failed=retry_failed)


def _verified_runs(layout: SweepLayout, manifest: Manifest, recorded: dict[str, set[str]], run_ids: list[str], *,
                   retry_failed: bool, notes: list[str] | None = None) -> set[str]:
    """The runs whose file is present, matches the manifest and is a checksum the sweep recorded writing."""
    done = set()
    for run_id in run_ids:
        path = layout.run_file(run_id)
        if run_id not in manifest.runs or not path.is_file():
            continue
        if sha256_file(path) != manifest.runs[run_id]:
            continue
        if manifest.runs[run_id] not in recorded.get(checksum_key(layout, path), set()):
            if notes is not None:
                notes.append(
                    f"{path}: the manifest's checksum is not one this sweep recorded writing "
                    f"({CHECKSUMS_FILE}); not trusted, it will be recomputed"
                )
            continue
        if _to_rerun(path, retry_failed):
            continue
        done.add(run_id)
    return done


def _to_rerun(path: Path, retry_failed: bool) -> bool:
    """A failed run that a resume computes again: one that failed on its model's files (`input_error`: nothing was
    measured, and a fixed file must be picked up) always; any error or crash with --retry-failed."""
    try:
        result = RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES))
    except (ValidationError, ValueError, OSError):
        return False
    if result.status is RunStatus.ERROR and result.input_error:
        return True
    return retry_failed and result.status in FAILED_STATUSES


def rescue_result(result: RunResult, sweep: str) -> Path | None:
    """Keep a computed result whose sweep directory refused it (read-only, full): the first place that takes
    it, of $LLADA_BENCH_RESCUE_DIR, the temporary directory and ~/.cache. None when none does."""
    data = result.model_dump_json(indent=1).encode("utf-8")
    bases = [Path(os.environ[RESCUE_DIR_ENV])] if os.environ.get(RESCUE_DIR_ENV) else []
    bases += [Path(tempfile.gettempdir()) / "llada-bench-rescued", Path.home() / ".cache" / "llada-bench-rescued"]
    for base in bases:
        path = base / sweep / f"{result.run_id}.json"
        try:
            atomic_write(path, data)
        except OSError:
            continue
        return path
    return None


def _same_spec(frozen_text: str, spec: ExperimentSpec) -> bool:
    try:
        frozen = parse_spec(frozen_text, source="frozen spec", check_files=False)
    except SpecError:
        return False
    return canonical_json(frozen.model_dump(mode="json")) == canonical_json(spec.model_dump(mode="json"))


def _is_whole_result(path: Path, run_id: str) -> bool:
    try:
        return RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES)).run_id == run_id
    except (ValidationError, ValueError, OSError):
        return False

