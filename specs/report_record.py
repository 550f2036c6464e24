"""The report's outputs and their checksums, so `verify` covers the files people read as it covers the runs.

`llada-bench report` removes its record before it writes anything and, once results.parquet, report.html,
report.md, findings.json and every figure are written, records each one's sha256 in report-manifest.json
(atomically, beside manifest.json), with the manifest it read the runs by. Rendering again rewrites the files
and the record. An edited or deleted output is therefore named, while an interrupted report leaves files that
are named as not covered, never as edited. A folder rendered before the record existed still verifies, and
`verify` names each report file it cannot check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from specs.artifacts import (
    FIGURE_SUFFIXES,
    FIGURES_DIR,
    REPORT_FILES,
    RESULTS_FILE,
    Problem,
    SweepLayout,
    checksum_key,
    entries,
    is_own_dir,
    is_regular,
    sha256_file,
)
from specs.safefile import MANIFEST_MAX_BYTES, UnsafeFileError, atomic_write, lstat_or_none, read_bytes


class ReportManifest(BaseModel):
    """Each file the report wrote (its path inside the sweep folder) -> sha256, and the manifest it read."""

    model_config = ConfigDict(extra="forbid")

    manifest_sha256: str | None  # the sweep's manifest.json as the report read it: which runs it was built from
    files: dict[str, str]


@dataclass(frozen=True)
class ReportCheck:
    """What `verify` finds of the report: edited, missing or misnamed outputs (problems), outputs it cannot check
    for want of a recorded checksum and why, and whether the runs changed after the report was rendered."""

    problems: list[Problem]
    uncovered: list[Path]
    why_uncovered: str
    missing: list[Path] = field(default_factory=list)  # written, then removed: derived, so nothing is misread
    stale: bool = False

    def uncovered_note(self) -> str | None:
        """One line saying why the files named as not covered are not, and what would cover them."""
        if not self.uncovered:
            return None
        return (f"{len(self.uncovered)} file(s) named above are not covered, so verify cannot tell whether they "
                f"changed: {self.why_uncovered}")


def forget_report(layout: SweepLayout) -> None:
    """Before the report writes: an older record would call a half-rewritten report's new files edited."""
    if is_regular(layout.report_manifest):
        layout.report_manifest.unlink()


def record_report(layout: SweepLayout, written: Iterable[Path]) -> None:
    """After the report has written every file: their checksums, and the manifest's."""
    record = ReportManifest(
        manifest_sha256=sha256_file(layout.manifest) if is_regular(layout.manifest) else None,
        files={checksum_key(layout, path): sha256_file(path) for path in sorted(written)},
    )
    atomic_write(layout.report_manifest, record.model_dump_json(indent=1).encode("utf-8"))


def report_outputs(layout: SweepLayout) -> list[Path]:
    """Every regular file in the folder that a report writes: results.parquet, the report's files, the images in
    figures/ (anything else there is a stray, named by `verify`)."""
    found = [layout.root / name for name in (RESULTS_FILE, *REPORT_FILES)]
    if is_own_dir(layout.figures):
        found += [p for p in entries(layout.figures) if p.suffix in FIGURE_SUFFIXES]
    return [p for p in found if is_regular(p)]


def verify_report(layout: SweepLayout) -> ReportCheck:
    """Recompute the checksum of every file the report recorded writing; name each one edited or missing, each
    output with no recorded checksum, and a record naming a file the report never writes (which is not read)."""
    try:
        record = _read(layout)
    except (ValidationError, ValueError, OSError) as exc:  # UnsafeFileError (a FIFO, too large) included
        reason = str(exc) if isinstance(exc, UnsafeFileError) else f"unreadable ({exc.__class__.__name__})"
        return ReportCheck([Problem(str(layout.report_manifest), reason)], report_outputs(layout),
                           f"the report's checksum record is unreadable; {_rerender(layout)} records them again")
    if record is None:
        return ReportCheck([], report_outputs(layout), "the report recorded no checksums (rendered by an earlier "
                           f"version, or interrupted); {_rerender(layout)} renders it again and records them")
    problems, missing = [], []
    for key, expected in sorted(record.files.items()):
        path = layout.root / key
        if not _is_output_name(key):
            problems.append(Problem(str(path), f"named by {layout.report_manifest.name}, but no report writes it"))
        elif not is_regular(path):
            if not path.exists():  # one that is there but no file is named by verify, as a stray
                missing.append(path)
        elif sha256_file(path) != expected:
            problems.append(Problem(str(path), f"checksum mismatch: edited after the report wrote it "
                                    f"({_rerender(layout)} renders it again)"))
    recorded = {layout.root / key for key in record.files}
    current = sha256_file(layout.manifest) if is_regular(layout.manifest) else None
    return ReportCheck(problems, [p for p in report_outputs(layout) if p not in recorded],
                       "the report did not write them (it records every file it writes): they were put here",
                       missing, stale=record.manifest_sha256 != current)


def missing_warning(layout: SweepLayout, missing: list[Path]) -> str:
    """The line to print when files the report wrote are gone (results.parquet and report.html are left out of the
    committed H200 folders, for one): nothing can be misread from an absent file, so verification passes."""
    return (f"{len(missing)} file(s) the report wrote are gone: {', '.join(str(p) for p in missing)}; "
            f"{_rerender(layout)} renders them again")


def stale_warning(layout: SweepLayout) -> str:
    """The line to print when the runs changed after the report was rendered from them."""
    return (f"{layout.report_manifest}: the report was rendered before the runs last changed, so it does not show "
            f"them all; {_rerender(layout)} renders it from the runs as they are")


def _read(layout: SweepLayout) -> ReportManifest | None:
    if lstat_or_none(layout.report_manifest) is None:
        return None
    return ReportManifest.model_validate_json(read_bytes(layout.report_manifest, MANIFEST_MAX_BYTES))


def _is_output_name(key: str) -> bool:
    """A name the report writes: never a path out of the folder or into runs/, so a forged record reads nothing
    else."""
    if key in (RESULTS_FILE, *REPORT_FILES):
        return True
    folder, _, name = key.partition("/")
    return (folder == FIGURES_DIR and "/" not in name and not name.startswith(".")
            and Path(name).suffix in FIGURE_SUFFIXES)


def _rerender(layout: SweepLayout) -> str:
    return f"`llada-bench report {layout.root}`"
