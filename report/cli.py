"""`llada-bench report DIR`: render a sweep's table, figures and report from its artifacts alone."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from report.analysis.predictions import UnknownHardwareError
from report.document.render import ReportError, render_report
from specs.artifacts import SweepLayout
from specs.lock import LockHeldError, SweepLock
from specs.options import OneLineParser
from specs.ownership import sweep_refusal
from specs.safefile import UnsafeFileError

EXIT_OK, EXIT_USAGE = 0, 2


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="llada-bench report",
        description="Verify artifacts/<sweep>/ and write results.parquet, figures/*.png|svg, report.html and "
        "report.md from the artifacts alone (no model, no GPU, no network).",
    )
    parser.add_argument("dir", type=Path, help="sweep directory, e.g. artifacts/smoke")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="render even if checksums fail (the report then carries a warning)")
    parser.add_argument("--hardware", metavar="NAME",
                        help="datasheet roofline profile for GPU runs whose device name matches none (e.g. "
                        "a100-sxm4-80gb); never another device's: runs are predicted against the roofs their "
                        "worker measured, else their own GPU's datasheet")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.dir.is_dir():
        print(f"llada-bench report: error: {args.dir}: no such sweep directory", file=sys.stderr)
        return EXIT_USAGE
    refusal = sweep_refusal(args.dir)
    if refusal is not None:  # never overwrite someone's report.html or figures
        print(f"llada-bench report: error: {args.dir}: {refusal}; the report is written only into a sweep's own "
              "directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        # One writer at a time: a second report (or a sweep) on this folder waits for nothing and says who holds it.
        with SweepLock(SweepLayout(args.dir).lock, role="report"):
            render_report(args.dir, allow_unverified=args.allow_unverified, hardware=args.hardware)
    except (ReportError, UnknownHardwareError, LockHeldError, UnsafeFileError) as exc:
        print(f"llada-bench report: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # the folder refused the lock file or a write: read-only, full
        print(f"llada-bench report: error: {exc.filename or args.dir}: cannot write ({exc.strerror or exc})",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
