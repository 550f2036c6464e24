"""Where the report writes: only over files the sweep's record says the report wrote as they are now, each file's
checksum recorded before it is written, a stale figure removed only when the record says the report drew it, and
report-manifest.json recorded last (specs/report_record.py says what `verify` makes of it)."""

from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import Path

from specs.artifacts import (
    FIGURE_SUFFIXES,
    FIGURES_DIR,
    REPORT_FILES,
    RESULTS_FILE,
    SweepLayout,
    checksum_key,
    entries,
    is_own_dir,
    is_regular,
    read_sweep_record,
    sha256_file,
)
from specs.chain import Record, RecordWriter
from specs.ownership import owned, refuse_unowned, removable
from specs.report_record import ReportManifest, legacy_report_files
from specs.safefile import UnsafeFileError, kind_of, lstat_or_none


class ReportError(Exception):
    """A report that cannot be rendered for a reason the user can fix; the message says which and how."""


def refuse_occupied_outputs(layout: SweepLayout) -> None:
    """Before anything is written: each file the report writes is absent or a regular file, and figures/ is
    absent or a directory (a symlink or a FIFO there was refused by verify), so a folder where report.md goes,
    or a file where figures/ goes, is one line rather than a traceback after the figures are drawn."""
    for name in (RESULTS_FILE, *REPORT_FILES):
        status = lstat_or_none(layout.root / name)
        if status is not None and not stat.S_ISREG(status.st_mode):
            raise ReportError(f"{layout.root / name}: is {kind_of(status.st_mode)}; the report writes a file there "
                              "and replaces nothing else: move it away")
    status = lstat_or_none(layout.figures)
    if status is not None and not stat.S_ISDIR(status.st_mode):
        raise ReportError(f"{layout.figures}: is {kind_of(status.st_mode)}; the report draws its figures into a "
                          f"{FIGURES_DIR}/ directory of its own: move it away")


class ReportWriter:
    """The report's writes into one sweep folder, through its record (specs/chain.py). The caller holds the lock."""

    def __init__(self, layout: SweepLayout, sweep: str) -> None:
        try:
            record = read_sweep_record(layout)
        except UnsafeFileError as exc:
            raise ReportError(str(exc)) from None
        if record is None or record.broken is not None:
            why = "is missing" if record is None else f"is not whole ({record.broken})"
            raise ReportError(f"{layout.checksums}: {why}, so the report cannot record what it writes and writes "
                              "nothing: sweep into a new --out")
        if record.refuses_sweep(sweep):
            raise ReportError(str(record.refuses_sweep(sweep)))
        self.layout = layout
        self._writer = RecordWriter.open(layout.checksums, layout.root, sweep, "report")
        self._legacy = legacy_report_files(layout, record)  # an older version's report-manifest.json
        self._written: dict[str, str] = {}

    def owns(self, path: Path) -> bool:
        """Absent, or the report's: the record says the package wrote it there (or an older version's
        report-manifest.json lists it)."""
        return owned(self.layout, self._writer.record, path) or (
            checksum_key(self.layout, path) in self._legacy and is_regular(path))

    def _removable(self, path: Path) -> bool:
        """A file the report wrote that still holds what it wrote (for an older version's report, as its
        report-manifest.json lists it)."""
        key = checksum_key(self.layout, path)
        if removable(self.layout, self._writer.record, path):
            return True
        return key in self._legacy and is_regular(path) and sha256_file(path) == self._legacy[key]

    def refuse_unowned(self, paths: Iterable[Path]) -> None:
        """ReportError naming each file the report would replace that it did not write (yours), before any write."""
        theirs = [p for p in [*paths, self.layout.report_manifest] if not self.owns(p)]
        try:
            refuse_unowned(self.layout, self._writer.record, theirs, "rendering the report")
        except ValueError as exc:
            raise ReportError(str(exc)) from None

    def write_all(self, files: list[tuple[Path, bytes]], drawn: set[str]) -> None:
        """Forget the last report's record, write every file (each recorded first), remove the figures an earlier
        report drew that this one did not, then record report-manifest.json."""
        self.refuse_unowned(path for path, _ in files)
        if lstat_or_none(self.layout.report_manifest) is not None or self._writer.record.latest(
                checksum_key(self.layout, self.layout.report_manifest)) is not None:
            self._writer.remove(self.layout.report_manifest)
        for path, data in files:
            self._written[checksum_key(self.layout, path)] = self._writer.write(path, data)
        self._remove_stale_figures(drawn)
        manifest = self.layout.manifest
        record = ReportManifest(manifest_sha256=sha256_file(manifest) if is_regular(manifest) else None,
                                files=dict(sorted(self._written.items())))
        self._writer.write(self.layout.report_manifest, record.model_dump_json(indent=1).encode("utf-8"))

    @property
    def record(self) -> Record:
        return self._writer.record

    def _remove_stale_figures(self, drawn: set[str]) -> None:
        """A figure an earlier report drew that this one did not (now skipped) must not linger; only files the
        record says the report drew, as they are now, never through a link, never a file of yours."""
        if not is_own_dir(self.layout.figures):
            return
        for path in entries(self.layout.figures):
            if path.name not in drawn and path.suffix in FIGURE_SUFFIXES and self._removable(path):
                self._writer.remove(path)
