"""The artifact store: atomic writes, the manifest, and knowing which runs are already done."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from specs.artifacts import (
    TEMP_SUFFIX,
    Manifest,
    SweepLayout,
    canonical_json,
    read_manifest,
    sha256_file,
)
from specs.loader import SpecError, parse_spec
from specs.results import RunResult, RunStatus
from specs.schema import ExperimentSpec

FAILED_STATUSES = frozenset({RunStatus.ERROR, RunStatus.CRASHED})


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_SHARED_MODE = 0o666 & ~_umask()


class DifferentSpecError(SpecError):
    """The output directory holds artifacts of another spec."""


def atomic_write(path: Path, data: bytes) -> None:
    """Temporary file in the same directory, fsync, rename, fsync the directory: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, _SHARED_MODE)  # mkstemp's 0600 would hide results from colleagues on a shared disk
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


class ArtifactStore:
    """Owns artifacts/<sweep>/: the frozen spec, one file per run, and the manifest over them."""

    def __init__(self, root: Path) -> None:
        self.layout = SweepLayout(root)
        self._manifest: Manifest | None = None

    @property
    def root(self) -> Path:
        return self.layout.root

    def open(self, spec: ExperimentSpec, spec_text: str, *, force: bool = False) -> None:
        """Freeze the spec (refusing another spec's directory unless forced) and load or rebuild the manifest."""
        self._remove_stale_temporaries()
        if self.layout.spec.is_file():
            frozen = self.layout.spec.read_text(encoding="utf-8")
            if not _same_spec(frozen, spec) and not force:
                raise DifferentSpecError(
                    f"{self.root}: holds artifacts of a different spec (see {self.layout.spec}); "
                    "use another --out directory, or --force to rerun every run under the new spec"
                )
            if frozen != spec_text:
                atomic_write(self.layout.spec, spec_text.encode("utf-8"))
        else:
            atomic_write(self.layout.spec, spec_text.encode("utf-8"))
        self.layout.runs.mkdir(parents=True, exist_ok=True)
        self._manifest = self._reconciled_manifest(spec.name)
        self._write_manifest()

    def completed(self, run_ids: list[str], *, retry_failed: bool = False) -> set[str]:
        """Runs whose artifact is present and verifies, so a resumed sweep skips them."""
        manifest = self._require_manifest()
        done = set()
        for run_id in run_ids:
            path = self.layout.run_file(run_id)
            if run_id not in manifest.runs or not path.is_file():
                continue
            if sha256_file(path) != manifest.runs[run_id]:
                continue
            if retry_failed and _status_of(path) in FAILED_STATUSES:
                continue
            done.add(run_id)
        return done

    def write_result(self, result: RunResult) -> Path:
        """Write one run's artifact the moment it arrives, then record its checksum."""
        manifest = self._require_manifest()
        path = self.layout.run_file(result.run_id)
        atomic_write(path, result.model_dump_json(indent=1).encode("utf-8"))
        manifest.runs[result.run_id] = sha256_file(path)
        self._write_manifest()
        return path

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
        """Trust the manifest for files it lists; adopt whole run files it is missing (a crash between
        the run file's rename and the manifest's); drop entries whose file is gone."""
        try:
            manifest = read_manifest(self.layout)
        except (ValueError, OSError):
            manifest = None
        runs = dict(manifest.runs) if manifest else {}
        on_disk = self.layout.run_files()
        for run_id in list(runs):
            if run_id not in on_disk:
                del runs[run_id]
        for run_id, path in on_disk.items():
            if run_id not in runs and _is_whole_result(path, run_id):
                runs[run_id] = sha256_file(path)
        return Manifest(sweep=sweep, spec_sha256="", runs=runs)

    def _remove_stale_temporaries(self) -> None:
        """A driver killed mid-write leaves a temporary file behind; it was never a result."""
        if not self.root.is_dir():
            return
        for temp in self.root.rglob(f"*{TEMP_SUFFIX}"):
            temp.unlink(missing_ok=True)


def _same_spec(frozen_text: str, spec: ExperimentSpec) -> bool:
    try:
        frozen = parse_spec(frozen_text, source="frozen spec")
    except SpecError:
        return False
    return canonical_json(frozen.model_dump(mode="json")) == canonical_json(spec.model_dump(mode="json"))


def _is_whole_result(path: Path, run_id: str) -> bool:
    try:
        return RunResult.model_validate_json(path.read_bytes()).run_id == run_id
    except (ValidationError, ValueError, OSError):
        return False


def _status_of(path: Path) -> RunStatus | None:
    try:
        return RunResult.model_validate_json(path.read_bytes()).status
    except (ValidationError, ValueError, OSError):
        return None
