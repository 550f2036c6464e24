"""The artifact store: atomic writes, the manifest, and knowing which runs are already done."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from orchestrator.plan import plan_runs
from specs.artifacts import (
    CHECKSUMS_FILE,
    Manifest,
    SweepLayout,
    canonical_json,
    checksum_key,
    read_manifest,
    read_sweep_record,
    sha256_file,
)
from specs.chain import Record, RecordWriter
from specs.loader import SpecError, parse_spec
from specs.ownership import holds_sweep, refuse_unowned, sweep_refusal
from specs.results import RunResult, RunStatus
from specs.safefile import RUN_MAX_BYTES, SPEC_MAX_BYTES, atomic_write, read_bytes, read_text
from specs.schema import ExperimentSpec

FAILED_STATUSES = frozenset({RunStatus.ERROR, RunStatus.CRASHED})
RESCUE_DIR_ENV = "LLADA_BENCH_RESCUE_DIR"  # where a result goes when its sweep directory cannot take it


class DifferentSpecError(SpecError):
    """The output directory holds artifacts of another spec."""


class ArtifactStore:
    """Owns artifacts/<sweep>/: the frozen spec, one file per run, the manifest over them, and the sweep's record
    (checksums.jsonl, specs/chain.py), which decides what a rebuilt manifest may adopt and what may be replaced."""

    def __init__(self, root: Path) -> None:
        self.layout = SweepLayout(root)
        self._manifest: Manifest | None = None
        self._writer: RecordWriter | None = None
        self.notes: list[str] = []  # what open() found and did, for the user to read
        self.unscored: list[str] = []  # runs completed() counts as done though their quality was not scored

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def record(self) -> Record:
        return self._require_writer().record

    def open(self, spec: ExperimentSpec, spec_text: str, *, force: bool = False,
             planned: list[str] | None = None) -> None:
        """Freeze the spec (refusing another spec's directory, and with --force one whose runs the new spec does
        not plan) and load or rebuild the manifest; record what the sweep plans. The caller has made the directory
        its own (orchestrator/sweepdir.py) and holds its lock."""
        self.root.mkdir(parents=True, exist_ok=True)
        if planned is None:  # the caller's plan, else the spec's own
            planned = [run.run_id for run in plan_runs(spec)]
        frozen = read_text(self.layout.spec, SPEC_MAX_BYTES) if self.layout.spec.is_file() else None
        if frozen is not None and not _same_spec(frozen, spec):  # refused before the record names this process
            self._refuse_other_spec(frozen, spec, force, planned)
        writer = self._open_record(spec.name)
        for temp in self.layout.temporaries(writer.record):  # an interrupted write's, by a writer it names
            temp.unlink(missing_ok=True)
        if frozen is not None:
            if frozen != spec_text:
                refuse_unowned(self.layout, writer.record, [self.layout.spec], "freezing the spec")
                writer.write(self.layout.spec, spec_text.encode("utf-8"))
        else:
            writer.write(self.layout.spec, spec_text.encode("utf-8"))
        self.layout.runs.mkdir(parents=True, exist_ok=True)
        writer.plan(planned, sha256_file(self.layout.spec))
        self._manifest = self._reconciled_manifest(spec.name)
        self._write_manifest()

    def completed(self, run_ids: list[str], *, retry_failed: bool = False) -> set[str]:
        """Runs whose artifact is present and verifies, so a resumed sweep skips them."""
        return _verified_runs(self.layout, self._require_manifest(), self.record, run_ids,
                              retry_failed=retry_failed, notes=self.notes, unscored=self.unscored)

    def refuse_unowned_runs(self, run_ids: list[str]) -> None:
        """Before any run is computed: NotOursError naming each run file it would replace that the record does not
        say the sweep wrote (put there by someone)."""
        refuse_unowned(self.layout, self.record, [self.layout.run_file(r) for r in run_ids], "running them again")

    def write_result(self, result: RunResult) -> Path:
        """Write one run's artifact the moment it arrives, its checksum recorded first."""
        manifest = self._require_manifest()
        path = self.layout.run_file(result.run_id)
        manifest.runs[result.run_id] = self._require_writer().write(path, result.model_dump_json(indent=1).encode("utf-8"))
        self._write_manifest()
        return path

    def _open_record(self, sweep: str) -> RecordWriter:
        """The sweep's record, started in a new directory; one that is not whole is never written to."""
        record = read_sweep_record(self.layout)
        if record is None and (self.layout.manifest.exists() or self.layout.spec.exists() or self.layout.run_files()):
            raise SpecError(f"{self.root}: {sweep_refusal(self.root)}")
        if record is not None and record.broken is not None:
            raise SpecError(f"{self.layout.checksums}: not whole ({record.broken}); nothing is added to it: "
                            "sweep into a new --out")
        if record is not None and record.refuses_sweep(sweep):
            raise DifferentSpecError(str(record.refuses_sweep(sweep)))
        self._writer = RecordWriter.open(self.layout.checksums, self.root, sweep, "sweep")
        self.notes += self._writer.notes
        return self._writer

    def _refuse_other_spec(self, frozen: str, spec: ExperimentSpec, force: bool, planned: list[str]) -> None:
        """Another spec: refused without --force; with it, refused too when a run of the old spec would stay
        beside the new spec's runs, since the report would pool the two."""
        changed = spec_changes(frozen, spec)
        if not force:
            raise DifferentSpecError(
                f"{self.root}: holds artifacts of a different spec ({changed}; see {self.layout.spec}); "
                "use another --out directory, or --force to rerun every run under the new spec"
            )
        stale = sorted(set(self.layout.run_files()) - set(planned))
        if stale:
            raise DifferentSpecError(
                f"{self.root}: holds {len(stale)} run(s) of a different spec ({changed}), which the new spec does "
                "not plan; --force would leave them beside its own, and the report would pool runs of two specs: "
                "sweep into another --out"
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

    def _require_writer(self) -> RecordWriter:
        if self._writer is None:
            raise RuntimeError("ArtifactStore.open() must be called first")
        return self._writer

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
            if digest in self.record.recorded(checksum_key(self.layout, path)) and _is_whole_result(path, run_id):
                runs[run_id] = digest
            else:
                self.notes.append(
                    f"{path}: not adopted: its checksum is not one this sweep recorded writing ({CHECKSUMS_FILE}), "
                    "so it was edited or written by something else; the run will be recomputed"
                )
        return Manifest(sweep=sweep, spec_sha256="", runs=runs)


def already_done(root: Path, run_ids: list[str], *, retry_failed: bool = False) -> set[str]:
    """What `completed` will find, read before anything is written (a new directory: nothing), so a refusal
    such as --max-predicted-hours leaves no file behind."""
    layout = SweepLayout(root)
    if not root.is_dir() or not holds_sweep(root):
        return set()
    try:
        manifest, record = read_manifest(layout), read_sweep_record(layout)
    except (ValidationError, ValueError, OSError):  # unreadable: nothing counts as done (open() says why)
        return set()
    if manifest is None or record is None:
        return set()
    return _verified_runs(layout, manifest, record, run_ids, retry_failed=retry_failed)


def _verified_runs(layout: SweepLayout, manifest: Manifest, record: Record, run_ids: list[str], *,
                   retry_failed: bool, notes: list[str] | None = None, unscored: list[str] | None = None) -> set[str]:
    """The runs whose file is present, matches the manifest and is a checksum the sweep recorded writing; those
    kept though their quality was not scored are added to `unscored`."""
    done = set()
    for run_id in run_ids:
        path = layout.run_file(run_id)
        if run_id not in manifest.runs or not path.is_file():
            continue
        if sha256_file(path) != manifest.runs[run_id]:
            continue
        if manifest.runs[run_id] not in record.recorded(checksum_key(layout, path)):
            if notes is not None:
                notes.append(
                    f"{path}: the manifest's checksum is not one this sweep recorded writing "
                    f"({CHECKSUMS_FILE}); not trusted, it will be recomputed"
                )
            continue
        result = _read_result(path)
        if result is not None and _to_rerun(result, retry_failed):
            continue
        if result is not None and result.unscored and unscored is not None:
            unscored.append(run_id)
        done.add(run_id)
    return done


def _read_result(path: Path) -> RunResult | None:
    try:
        return RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES))
    except (ValidationError, ValueError, OSError):
        return None


def _to_rerun(result: RunResult, retry_failed: bool) -> bool:
    """A failed run that a resume computes again: one that failed on its model's files (`input_error`: nothing was
    measured, and a fixed file must be picked up) always; any error or crash, and a run measured but not scored for
    quality (a judge that could not be had), with --retry-failed."""
    if result.status is RunStatus.ERROR and result.input_error:
        return True
    return retry_failed and (result.status in FAILED_STATUSES or result.unscored)


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


# What no run reads (no run id depends on it): words for the report. A spec that differs from the frozen one only
# here is the same sweep, frozen again and recorded (docs/specs.md: amendments after the runs).
_READ_BY_NO_RUN = ("description", "departures", "amendments")


def _same_spec(frozen_text: str, spec: ExperimentSpec) -> bool:
    try:
        frozen = parse_spec(frozen_text, source="frozen spec", check_files=False)
    except SpecError:
        return False
    return _runs_read(frozen) == _runs_read(spec)


def _runs_read(spec: ExperimentSpec) -> str:
    data = spec.model_dump(mode="json")
    for key in _READ_BY_NO_RUN:
        data.pop(key, None)
    return canonical_json(data)


def spec_changes(frozen_text: str, spec: ExperimentSpec, most: int = 4) -> str:
    """What differs between the frozen spec and the new one, as `controls.sessions 2 → 1, ...`."""
    try:
        frozen = parse_spec(frozen_text, source="frozen spec", check_files=False).model_dump(mode="json")
    except SpecError:
        return "the frozen spec no longer parses"
    changes = list(_differences(frozen, spec.model_dump(mode="json"), ""))
    shown = ", ".join(f"{path} {old} → {new}" for path, old, new in changes[:most])
    return shown + (f" and {len(changes) - most} more" if len(changes) > most else "") or "formatting only"


def _differences(old: object, new: object, path: str) -> Iterator[tuple[str, str, str]]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            yield from _differences(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
    elif old != new:
        yield path or "spec", _short(old), _short(new)


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_whole_result(path: Path, run_id: str) -> bool:
    try:
        return RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES)).run_id == run_id
    except (ValidationError, ValueError, OSError):
        return False

