"""`python -m orchestrator.gpu_round.results EXPORT [--results DIR]`: a GPU round's headline, from the files a call
brought back, into `results/<gpu>/headline/` for committing (`just headline-results EXPORT`).

Each headline piece's sweep, verified, becomes `results/<gpu>/headline/<sweep>/` (<gpu>: the roofline profile of
the device its runs recorded, e.g. h200, else the device's name; a toy round's is cpu), and `round.json` beside
them keeps, per sweep, what the round's record says: the piece, its status and attempts, the calls, and the graph
tests' outcome that decided whether its graph rows ran (orchestrator/gpu_round/gate.py). A later round adds its sweeps
beside the earlier ones; a sweep already there is replaced only with --replace. Nothing is written outside a
folder this made, and nothing is written at all unless every sweep verifies.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from orchestrator.gpu_round.gate import gate_reason
from orchestrator.gpu_round.plan import GRAPH_TESTS, PIECES
from orchestrator.gpu_round.state import RoundError, RoundLayout, RoundState, take_in
from roofline.hardware import hardware_for_gpu_name
from specs.artifacts import MANIFEST_FILE, SweepLayout, load_results, verify
from specs.options import OneLineParser
from specs.round_record import (
    ROUND_RECORD_FILE,
    GraphGate,
    HeadlineSweepRecord,
    RoundRecord,
    RoundRecordError,
    dumps,
    models_of,
    read_round_record,
)
from specs.safefile import atomic_write

HEADLINE_DIR = "headline"
RECORD_FILE = ROUND_RECORD_FILE
EXIT_OK, EXIT_USAGE = 0, 2


def gpu_folder(device: str) -> str:
    """The results folder of a device: its roofline profile's name (results/h200), else its name in lower case."""
    profile = hardware_for_gpu_name(device)
    return profile.name if profile is not None else re.sub(r"[^a-z0-9.]+", "-", device.lower()).strip("-")


def _sweeps(folder: Path) -> list[Path]:
    """The sweep folders a piece holds (a refused one, set aside as `<name>.refused`, is none)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / MANIFEST_FILE).is_file()
                  and not p.name.endswith(".refused"))  # fmt: skip


def _device(sweep: Path) -> str:
    devices = {r.environment.device for r in load_results(SweepLayout(sweep)) if r.environment is not None}
    if len(devices) != 1:
        raise RoundError(f"{sweep}: its runs name {len(devices)} devices ({', '.join(sorted(devices)) or 'none'}); "
                         "a headline sweep ran on one")  # fmt: skip
    return devices.pop()


def import_headline(export: Path, results: Path, *, replace: bool = False) -> list[Path]:
    """Every headline sweep of the export into `results/<gpu>/headline/`, with its record; the folders written."""
    names = [p.name for p in PIECES if p.headline]
    with tempfile.TemporaryDirectory(prefix="headline-import.") as scratch:
        layout, state = RoundLayout(Path(scratch) / "round"), RoundState()
        take_in(layout, state, export, [GRAPH_TESTS, *names])  # every tarball checked: members, size, record
        found = [(name, sweep) for name in names for sweep in _sweeps(layout.piece(name))]
        if not found:
            raise RoundError(f"{export}: holds no headline sweep ({', '.join(n + '.tar.gz' for n in names)}); give "
                             "the folder a round's call exported into")  # fmt: skip
        for _, sweep in found:
            problems = verify(SweepLayout(sweep))
            if problems:
                raise RoundError(f"{sweep.name}: does not verify ({problems[0].path}: {problems[0].reason}); nothing "
                                 "was written")  # fmt: skip
        written = []
        for name, sweep in found:
            device = _device(sweep)
            record = _record(state, name, device, models_of(load_results(SweepLayout(sweep))))
            written.append(_place(sweep, results / gpu_folder(device) / HEADLINE_DIR, record, replace=replace))
    return written


def _record(state: RoundState, piece: str, device: str, models: str) -> HeadlineSweepRecord:
    """What round.json keeps of a sweep: its piece's record, the graph gate, and the device and models its runs
    name, which report/answer/headline.py admits into the README only as a GPU's at the 8B shapes."""
    record = state.pieces[piece]
    gate = next(p.gate for p in PIECES if p.name == piece)
    tests = state.pieces[GRAPH_TESTS].tests if GRAPH_TESTS in state.pieces else {}
    return HeadlineSweepRecord(
        piece=piece, status=record.status, attempts=record.attempts, wall_s=round(record.wall_s, 1),
        graph_gate=None if gate is None else GraphGate(
            piece=gate, reason=gate_reason(state, gate), tests={k: v.outcome for k, v in tests.items()}),
        device=device, models=models)  # fmt: skip


def _place(sweep: Path, target: Path, record: HeadlineSweepRecord, *, replace: bool) -> Path:
    """The sweep copied into `target` (a new folder, or one this made: it holds round.json) and its record merged
    into round.json."""
    record_file = target / RECORD_FILE
    if target.exists() and not record_file.is_file():
        raise RoundError(f"{target}: exists and holds no {RECORD_FILE}, so it is not a headline folder this made; "
                         "move it away")  # fmt: skip
    try:
        records = dict(read_round_record(record_file).sweeps) if record_file.is_file() else {}
    except RoundRecordError as exc:
        raise RoundError(str(exc)) from None
    destination = target / sweep.name
    if destination.exists() and not replace:
        raise RoundError(f"{destination}: already holds that sweep; give --replace to replace it")
    target.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=target, prefix=f".{sweep.name}."))
    shutil.copytree(sweep, staged / sweep.name)
    if destination.exists():
        shutil.rmtree(destination)
    (staged / sweep.name).rename(destination)
    staged.rmdir()
    records[sweep.name] = record
    atomic_write(record_file, dumps(RoundRecord(sweeps=records)).encode("utf-8"))
    return destination


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="round_results", description="A GPU round's headline sweeps into results/<gpu>/headline/.")
    parser.add_argument("export", type=Path, help="the folder a round's call exported into (its --export)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder (results)")
    parser.add_argument("--replace", action="store_true", help="replace a sweep already in results/<gpu>/headline/")
    args = parser.parse_args(argv)
    if not args.export.is_dir():
        parser.error(f"argument export: {args.export} is not a folder; give the one a round's call exported into")
    try:
        for path in import_headline(args.export, args.results, replace=args.replace):
            print(f"headline sweep in {path}")
    except RoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
