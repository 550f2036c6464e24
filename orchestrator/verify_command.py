"""`llada-bench verify DIR`: every checksum of a sweep folder against its record, its report's files included, and
the record itself (whole, and, given `--head`, holding the state a user kept elsewhere)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from orchestrator.membership import foreign_runs
from specs.artifacts import (
    CHECKSUMS_FILE,
    Problem,
    SweepLayout,
    not_run_note,
    planned_without_result,
    read_sweep_record,
    verify,
)
from specs.chain import Record
from specs.ownership import sweep_entries, sweep_refusal
from specs.report_record import (
    interrupted_warning,
    missing_problems,
    missing_warning,
    report_outputs,
    stale_warning,
    verify_report,
)
from specs.safefile import lstat_or_none

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MIN_HEAD_PREFIX = 12  # hex digits of an abbreviated head, as the headline abbreviates a commit
HEX = frozenset("0123456789abcdef")


def head_refusal(kept: str) -> str | None:
    """What is wrong with a `--head` argument itself (None: it is a head, or a prefix of one long enough)."""
    head = kept.strip().lower()
    if not head or not set(head) <= HEX or len(head) > 64:
        return (f"--head {kept}: not a sha256 (64 hex digits, as `verify` prints after '{CHECKSUMS_FILE} head:'), "
                "nor a prefix of one")
    if len(head) < MIN_HEAD_PREFIX:
        return f"--head {kept}: {len(head)} hex digits; give the whole head (64) or at least its first {MIN_HEAD_PREFIX}"
    return None


def head_problems(layout: SweepLayout, record: Record | None, kept: str) -> list[Problem]:
    """`--head`: the record must hold the state `kept` names, given whole or as a unique prefix (head_refusal),
    in either case."""
    head = kept.strip().lower()
    held = sorted(h for h in (record.heads if record is not None else ()) if h.startswith(head))
    if len(held) == 1:
        return []
    why = (f"{len(held)} states of the record start with {head}: give more of the head" if held else
           "the record was rewritten since (or that head is another sweep's)")
    return [Problem(str(layout.checksums), f"does not hold the state {kept} you kept: {why}")]



def add_parser(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser("verify", help="recompute every checksum of a sweep directory, its report's included")
    check.add_argument("dir", type=Path, help="sweep directory, e.g. artifacts/smoke")
    check.add_argument("--allow-missing-report", action="store_true",
                       help="accept report files the report wrote that are gone (they are derived from the runs)")
    check.add_argument("--head", metavar="SHA256",
                       help="the record's head as printed by an earlier sweep, report or verify: fails unless the "
                       "record still holds that state (a rewritten record does not)")
    check.set_defaults(handler=verify_command)


def verify_command(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if not root.is_dir():
        print(f"error: {root}: no such sweep directory", file=sys.stderr)
        return EXIT_USAGE
    refusal = head_refusal(args.head) if args.head is not None else None
    if refusal is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    layout = SweepLayout(root)
    if lstat_or_none(layout.checksums) is None and not sweep_entries(root):  # nothing of a sweep: nothing looked at
        print(f"error: {root}: {sweep_refusal(root)}: nothing to verify; give a sweep's folder, e.g. artifacts/smoke",
              file=sys.stderr)
        return EXIT_USAGE
    problems = verify(layout)
    named = {p.path for p in problems}
    problems += [p for p in foreign_runs(layout) if p.path not in named]
    try:
        record = read_sweep_record(layout)
    except OSError:  # unreadable: verify named it
        record = None
    report = verify_report(layout, record)
    problems += report.problems
    if not args.allow_missing_report:
        problems += missing_problems(layout, report.missing)
    if args.head is not None:
        problems += head_problems(layout, record, args.head)
    for problem in problems:
        print(problem)
    for path in report.uncovered:
        print(f"{path}: not covered (no checksum recorded)")
    never_ran, planned = planned_without_result(layout, record)
    legacy = record is not None and record.broken is None and not record.chained and not record.is_empty
    warnings = [
        f"{layout.checksums}: written by an older version, without links from line to line, so it proves nothing "
        "against an edit of itself; the next sweep or report seals it" if legacy else None,
        stale_warning(layout) if report.stale else None, report.uncovered_note(),
        interrupted_warning(layout) if report.interrupted else None,
        not_run_note(never_ran, planned) if never_ran else None,
        missing_warning(layout, report.missing) if report.missing and args.allow_missing_report else None,
    ]
    for warning in filter(None, warnings):
        print(f"warning: {warning}", file=sys.stderr)
    if problems:
        print(f"{root}: {len(problems)} problem(s); move damaged or foreign files out of the folder, then rerun the "
              f"sweep to recompute the runs and `llada-bench report {root}` to render the report again",
              file=sys.stderr)
        return EXIT_FAILED
    covered, uncovered = len(report_outputs(layout)) - len(report.uncovered), len(report.uncovered)
    said = [f"the report's {covered} files match"] if covered else [] if uncovered else ["no report rendered"]
    said += [f"{uncovered} report file(s) not covered (named above)"] if uncovered else []
    print(f"{root}: verified ({len(layout.run_files())} runs, spec and manifest checksums match; {', '.join(said)})")
    if record is not None:
        print(f"{CHECKSUMS_FILE} head: {record.head} (kept elsewhere, `llada-bench verify {root} --head "
              f"{record.head}` proves later that this record was not rewritten)")
    return EXIT_OK
