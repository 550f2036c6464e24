"""The report's outputs in the sweep's record, so `verify` covers the files people read as it covers the runs.

`llada-bench report` records in checksums.jsonl (specs/chain.py) that it removes report-manifest.json before it
writes anything, then each file's sha256 before the file is written (results.parquet, report.html, report.md,
findings.json, every figure), each stale figure it removes, and last report-manifest.json, the list of what it
wrote with the manifest it read the runs by. The record is the truth and report-manifest.json a view of it that is
checked like any other file: an edited file is named, and only that file, with or without its hash written into
report-manifest.json; a deleted report-manifest.json or report file is named; a file the report never wrote is
named. An interrupted report leaves recorded files, never ones called edited. A folder whose record predates the
chain (an older version's sweep) is checked against report-manifest.json alone, and `verify` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from specs.artifacts import (
    CHECKSUMS_FILE,
    FIGURE_SUFFIXES,
    FIGURES_DIR,
    REPORT_FILES,
    REPORT_MANIFEST_FILE,
    RESULTS_FILE,
    Problem,
    SweepLayout,
    checksum_key,
    checksum_or_problem,
    entries,
    is_own_dir,
    is_regular,
)
from specs.chain import Record
from specs.safefile import MANIFEST_MAX_BYTES, UnsafeFileError, lstat_or_none, read_bytes


class ReportManifest(BaseModel):
    """Each file the report wrote (its path inside the sweep folder) -> sha256, and the manifest it read."""

    model_config = ConfigDict(extra="forbid")

    manifest_sha256: str | None  # the sweep's manifest.json as the report read it: which runs it was built from
    files: dict[str, str]


@dataclass(frozen=True)
class ReportCheck:
    """What `verify` finds of the report: edited, unrecorded or misnamed outputs (problems), files gone that the
    report wrote (missing), outputs it cannot check and why (a record from before the chain), whether the runs
    changed after the report was rendered, and whether the last report was interrupted."""

    problems: list[Problem]
    uncovered: list[Path]
    why_uncovered: str
    missing: list[Path] = field(default_factory=list)
    stale: bool = False
    interrupted: bool = False

    def uncovered_note(self) -> str | None:
        """One line saying why the files named as not covered are not, and what would cover them."""
        if not self.uncovered:
            return None
        return (f"{len(self.uncovered)} file(s) named above are not covered, so verify cannot tell whether they "
                f"changed: {self.why_uncovered}")


def report_outputs(layout: SweepLayout) -> list[Path]:
    """Every regular file in the folder that a report writes: results.parquet, the report's files, the images in
    figures/ (anything else there is a stray, named by `verify`)."""
    found = [layout.root / name for name in (RESULTS_FILE, *REPORT_FILES)]
    if is_own_dir(layout.figures):
        found += [p for p in entries(layout.figures) if p.suffix in FIGURE_SUFFIXES]
    return [p for p in found if is_regular(p)]


def verify_report(layout: SweepLayout, record: Record | None) -> ReportCheck:
    """Check every report output and report-manifest.json against the record: each file the last report wrote is
    there with the checksum recorded for it, and every output there is one the report wrote."""
    if record is None or record.broken is not None:
        return ReportCheck([], report_outputs(layout), f"{CHECKSUMS_FILE} is missing or not whole, so no report "
                           "file can be checked against it")
    if not record.chained:
        return _against_report_manifest(layout)
    rm_key, problems, missing = REPORT_MANIFEST_FILE, [], []
    complete = record.latest(rm_key) is not None  # the last report finished: every file is its last recorded one
    problems += _recorded_file(layout, record, layout.report_manifest, complete, missing)
    for path in report_outputs(layout):
        problems += _recorded_file(layout, record, path, complete, missing)
    for key in sorted(record.files):
        path = layout.root / key
        if is_output_name(key) and record.latest(key) is not None and lstat_or_none(path) is None:
            missing.append(path)
    anchored = complete and not any(p.path == str(layout.report_manifest) for p in problems)
    written = _read_or_none(layout) if anchored else None
    stale = written is not None and written.manifest_sha256 != _manifest_digest(layout)
    return ReportCheck(problems, [], "", missing, stale, interrupted=record.names(rm_key) and not complete)


def _recorded_file(layout: SweepLayout, record: Record, path: Path, complete: bool, missing: list[Path]) -> list[Problem]:
    """One report file against the record: absent where it should be (added to `missing`), never written by the
    report, or not the content the report last wrote."""
    key = checksum_key(layout, path)
    latest = record.latest(key)
    if lstat_or_none(path) is None:
        if key == REPORT_MANIFEST_FILE and latest is not None:
            return [Problem(str(path), f"missing: {CHECKSUMS_FILE} records the report writing it, and it was "
                            f"removed since; {_rerender(layout)} renders the report again")]
        return []
    if latest is None:
        return [Problem(str(path), f"not written by the report ({CHECKSUMS_FILE} records no such file here): put "
                        "here by hand? Move it out of the sweep folder")]
    digest = checksum_or_problem(path)
    if isinstance(digest, Problem):
        return [digest]
    if digest == latest or (not complete and digest in record.recorded(key)):
        return []
    return [Problem(str(path), f"checksum mismatch: edited after the report wrote it ({_rerender(layout)} renders "
                    "it again once the edited file is moved away)")]


def _against_report_manifest(layout: SweepLayout) -> ReportCheck:
    """A record from before the chain: the report files against report-manifest.json alone."""
    try:
        written = _read(layout)
    except (ValidationError, ValueError, OSError) as exc:  # UnsafeFileError (a FIFO, too large) included
        reason = str(exc) if isinstance(exc, UnsafeFileError) else f"unreadable ({exc.__class__.__name__})"
        return ReportCheck([Problem(str(layout.report_manifest), reason)], report_outputs(layout),
                           f"the report's checksum record is unreadable; {_rerender(layout)} records them again")
    if written is None:
        return ReportCheck([], report_outputs(layout), "the report recorded no checksums (rendered by an earlier "
                           f"version, or interrupted); {_rerender(layout)} renders it again and records them")
    problems, missing = [], []
    for key, expected in sorted(written.files.items()):
        path = layout.root / key
        if not is_output_name(key):
            problems.append(Problem(str(path), f"named by {layout.report_manifest.name}, but no report writes it"))
        elif not is_regular(path):
            if not path.exists():  # one that is there but no file is named by verify, as a stray
                missing.append(path)
        elif isinstance(digest := checksum_or_problem(path), Problem):
            problems.append(digest)
        elif digest != expected:
            problems.append(Problem(str(path), f"checksum mismatch: edited after the report wrote it "
                                    f"({_rerender(layout)} renders it again)"))
    recorded = {layout.root / key for key in written.files}
    return ReportCheck(problems, [p for p in report_outputs(layout) if p not in recorded],
                       "the report did not write them (it records every file it writes): they were put here",
                       missing, stale=written.manifest_sha256 != _manifest_digest(layout))


def legacy_report_files(layout: SweepLayout, record: Record) -> dict[str, str]:
    """The files an older version's report-manifest.json lists, where the record names no report file (a folder
    whose report predates the chain): the package's own to replace."""
    if any(is_output_name(key) or key == REPORT_MANIFEST_FILE for key in record.files):
        return {}
    try:
        written = _read(layout)
    except (ValidationError, ValueError, OSError):
        return {}
    return {} if written is None else {key: d for key, d in written.files.items() if is_output_name(key)}


def missing_warning(layout: SweepLayout, missing: list[Path]) -> str:
    """The line to print when files the report wrote are gone and --allow-missing-report was given (the committed
    H200 folders leave out results.parquet and report.html)."""
    return (f"{len(missing)} file(s) the report wrote are gone: {', '.join(str(p) for p in missing)}; "
            f"{_rerender(layout)} renders them again")


def missing_problems(layout: SweepLayout, missing: list[Path]) -> list[Problem]:
    """Files the report wrote that are gone, as problems (without --allow-missing-report)."""
    return [Problem(str(path), f"missing: the report wrote it ({_rerender(layout)} renders it again; "
                    "--allow-missing-report accepts its absence)") for path in missing]


def stale_warning(layout: SweepLayout) -> str:
    """The line to print when the runs changed after the report was rendered from them."""
    return (f"{layout.report_manifest}: the report was rendered before the runs last changed, so it does not show "
            f"them all; {_rerender(layout)} renders it from the runs as they are")


def interrupted_warning(layout: SweepLayout) -> str:
    return (f"the last report was interrupted before it recorded {layout.report_manifest.name}, so its files may be "
            f"of two renders; {_rerender(layout)} renders it whole")


def _manifest_digest(layout: SweepLayout) -> str | None:
    digest = checksum_or_problem(layout.manifest) if is_regular(layout.manifest) else None
    return digest if isinstance(digest, str) else None


def _read_or_none(layout: SweepLayout) -> ReportManifest | None:
    try:
        return _read(layout)
    except (ValidationError, ValueError, OSError):
        return None


def _read(layout: SweepLayout) -> ReportManifest | None:
    if lstat_or_none(layout.report_manifest) is None:
        return None
    return ReportManifest.model_validate_json(read_bytes(layout.report_manifest, MANIFEST_MAX_BYTES))


def is_output_name(key: str) -> bool:
    """A name the report writes: never a path out of the folder or into runs/, so a forged record reads nothing
    else."""
    if key in (RESULTS_FILE, *REPORT_FILES):
        return True
    folder, _, name = key.partition("/")
    return (folder == FIGURES_DIR and "/" not in name and not name.startswith(".")
            and Path(name).suffix in FIGURE_SUFFIXES)



def _rerender(layout: SweepLayout) -> str:
    return f"`llada-bench report {layout.root}`"
