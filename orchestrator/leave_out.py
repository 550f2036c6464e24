"""`llada-bench leave-out DIR`: remove the report's large derived files (results.parquet, report.html) from a
sweep, recording each removal in its record, so a folder committed without them verifies as it is.

The record says what is in the folder: a file the report wrote and git leaves out would be `missing` to `verify`.
Removed through the record instead, it is a file the package removed, which `llada-bench report DIR` renders again
from the runs. Only those two files, only as the report wrote them: an edited one, or one the record does not say
the report wrote, is refused and kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specs.artifacts import RESULTS_FILE, SweepLayout, checksum_key, read_manifest, read_sweep_record
from specs.chain import RecordWriter
from specs.lock import SweepLock
from specs.ownership import NotOursError, removable, sweep_refusal
from specs.safefile import lstat_or_none

DERIVED = (RESULTS_FILE, "report.html")  # large, and rendered again from the runs by `llada-bench report`
EXIT_OK = 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser("leave-out", help="remove results.parquet and report.html from a sweep through its "
                                  "record, so the folder verifies without them (as committed)")
    command.add_argument("dir", type=Path, help="sweep directory, e.g. results/h200/accel-8b")
    command.set_defaults(handler=leave_out_command)


def leave_out(root: Path) -> list[str]:
    """Record the removal of each derived file the record says is there, and remove it; the names removed.
    NotOursError (one line, nothing changed) for a folder that is no sweep or a file the report did not write."""
    refusal = sweep_refusal(root)
    if refusal is not None:
        raise NotOursError(f"{root}: {refusal}")
    layout = SweepLayout(root)
    with SweepLock(layout.lock, role="leave-out"):
        record = read_sweep_record(layout)
        assert record is not None  # sweep_refusal: a whole record
        paths = [root / name for name in DERIVED]
        for path in paths:
            if lstat_or_none(path) is not None and not removable(layout, record, path):
                raise NotOursError(f"{path}: not as the report wrote it ({record.path.name} records no such "
                                   "content here): move it out of the folder, or render the report again first")
        gone = [path for path in paths if record.latest(checksum_key(layout, path)) is not None]
        if gone:
            manifest = read_manifest(layout)
            writer = RecordWriter.open(layout.checksums, root, manifest.sweep if manifest else root.name, "leave-out")
            for path in gone:
                writer.remove(path)
    return [path.name for path in gone]


def leave_out_command(args: argparse.Namespace) -> int:
    removed = leave_out(args.dir)
    print(f"{args.dir}: " + (f"left out {', '.join(removed)} (recorded as removed; `llada-bench report "
                             f"{args.dir}` renders them again)" if removed else "nothing to leave out"))
    return EXIT_OK
