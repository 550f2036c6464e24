"""The GPU round's folder and what crosses from call to call: state.json (each piece's record), a folder per
piece, and the export, one tarball per piece that ended, which the next call takes back in.

A lease's machine may be fresh at each call or still warm, with the round folder it had; only the files a call
exported come back to the session. So every piece is packed into the export folder the moment it ends, each
tarball with its own record (`<piece>/piece.json`), and a call given an earlier export (`--resume`) takes a
piece from it only where it is further along than the piece this folder has: done beats not done, then more
attempts. A warm machine's newer state is never overwritten with the older export.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.gpu_round.args import GOALS_FILE
from specs.safefile import MIB, UnsafeFileError, atomic_write, lstat_or_none, read_text

PieceStatus = Literal["running", "done", "stopped", "timed-out", "failed"]
STATE_MAX_BYTES = MIB  # a few pieces' records
EXPORT_MAX_BYTES = 16 * MIB  # what the device tool brings back of one file
UNPACKED_MAX_BYTES = 256 * MIB  # a piece's folder, unpacked: sweeps of a few runs and logs
LEFT_BEHIND = ("sweep.lock",)  # names a sweep's holder (host, pid): carried elsewhere it would look held
FRESH_START = "move it away to start the round afresh, or give --round another folder"
ONLY_EXPORTS = "give --resume only a folder an earlier call's --export filled"


class RoundError(Exception):
    """A problem the user can fix, in one line naming the file or folder (exit 2)."""


class TestTime(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float
    outcome: Literal["passed", "failed", "skipped", "error"]


class PieceRecord(BaseModel):
    """What a piece did: `running` while it runs (a call killed then leaves it so), then done (it ran to its end;
    failures are findings), stopped (a sweep at its budget), timed-out (killed at its timeout) or failed (its
    command could not run). Only done is final."""

    model_config = ConfigDict(extra="forbid")

    status: PieceStatus
    attempts: int = Field(ge=1)
    exit: int | None = None
    wall_s: float = 0.0
    detail: str = ""
    tests: dict[str, TestTime] = Field(default_factory=dict)  # each device test's own time (its junit.xml)

    @property
    def done(self) -> bool:
        return self.status == "done"

    @property
    def progress(self) -> tuple[bool, int]:
        """How far the piece is: done first, then attempts (a later attempt knows more)."""
        return self.done, self.attempts


class RoundState(BaseModel):
    """state.json: the calls made, the device they ran on (a toy round: this CPU), and each piece's record."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(default=0, ge=0)
    device: str | None = None
    toy: bool = False
    pieces: dict[str, PieceRecord] = Field(default_factory=dict)

    def done(self, name: str) -> bool:
        record = self.pieces.get(name)
        return record is not None and record.done


def _parse(model: type[BaseModel], text: str, path: object, what: str, fix: str) -> BaseModel:
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise RoundError(f"{path}: not {what} ({where}: {first['msg']}); {fix}") from None


@dataclass(frozen=True)
class RoundLayout:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def goals(self) -> Path:
        return self.root / GOALS_FILE

    def piece(self, name: str) -> Path:
        return self.root / name

    def load(self) -> RoundState:
        """The round so far (a fresh one before its first call, in a folder that is new or empty); a file that is
        no round's state, or a folder that holds files but no state.json, is one line, and nothing is touched."""
        if lstat_or_none(self.state) is None:
            held = sorted(p.name for p in self.root.iterdir()) if self.root.is_dir() else []
            if held:
                shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
                raise RoundError(f"{self.root}: not a GPU round's folder (it holds {shown} but no state.json); "
                                 "give --round a new or empty folder, or one a round made")  # fmt: skip
            return RoundState()
        try:
            text = read_text(self.state, STATE_MAX_BYTES)
        except UnsafeFileError as exc:
            raise RoundError(str(exc)) from None
        except UnicodeDecodeError:
            raise RoundError(f"{self.state}: not UTF-8 text, so not a GPU round's state; {FRESH_START}") from None
        state = _parse(RoundState, text, self.state, "a GPU round's state", FRESH_START)
        assert isinstance(state, RoundState)
        return state

    def save(self, state: RoundState) -> None:
        atomic_write(self.state, state.model_dump_json(indent=1).encode("utf-8"))


def pack(layout: RoundLayout, name: str, record: PieceRecord, export: Path) -> str | None:
    """`<export>/<name>.tar.gz`: the piece's folder with its record, written whole or not at all; None, or why it
    was not (over what a file may bring back)."""
    folder = layout.piece(name)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "piece.json", record.model_dump_json(indent=1).encode("utf-8"))
    export.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=export, prefix=f".{name}.", suffix=".partial")
    os.close(fd)
    try:
        with tarfile.open(partial, "w:gz") as archive:
            archive.add(folder, arcname=name, filter=lambda m: None if Path(m.name).name in LEFT_BEHIND else m)
        size = Path(partial).stat().st_size
        if size > EXPORT_MAX_BYTES:
            return f"{name}.tar.gz would be {size / MIB:.1f} MiB, over the {EXPORT_MAX_BYTES // MIB} MiB a call brings back"
        os.replace(partial, export / f"{name}.tar.gz")
        return None
    finally:
        Path(partial).unlink(missing_ok=True)


def packed_record(tarball: Path, name: str) -> PieceRecord:
    """The record inside an exported piece, its members checked (all under `<name>/`, files and folders only,
    bounded); any problem is one line naming the tarball."""
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            members = archive.getmembers()
            total = 0
            for member in members:
                inside = member.name == name or member.name.startswith(f"{name}/")
                if not inside or ".." in Path(member.name).parts or not (member.isfile() or member.isdir()):
                    raise RoundError(f"{tarball}: holds {member.name!r}, no file of piece {name!r}; {ONLY_EXPORTS}")
                total += member.size
            if total > UNPACKED_MAX_BYTES:
                raise RoundError(f"{tarball}: unpacks to {total / MIB:.0f} MiB, more than a piece holds")
            handle = archive.extractfile(f"{name}/piece.json")
            assert handle is not None
            text = handle.read(STATE_MAX_BYTES + 1).decode("utf-8")
    except (tarfile.TarError, OSError, KeyError, EOFError, UnicodeDecodeError) as exc:
        raise RoundError(f"{tarball}: not a piece an earlier call exported ({exc or type(exc).__name__}); "
                         f"{ONLY_EXPORTS}") from None
    record = _parse(PieceRecord, text, tarball, "a piece an earlier call exported (its piece.json)", ONLY_EXPORTS)
    assert isinstance(record, PieceRecord)
    return record


def take_in(layout: RoundLayout, state: RoundState, seed: Path, names: Iterable[str]) -> list[str]:
    """Each piece of `names` exported in `seed` that is further along than this folder's: its folder replaces
    this one's, its record this state's. The pieces taken in, in order."""
    taken = []
    for name in names:
        tarball = seed / f"{name}.tar.gz"
        if lstat_or_none(tarball) is None:
            continue
        record = packed_record(tarball, name)
        mine = state.pieces.get(name)
        if mine is not None and record.progress <= mine.progress:
            continue  # this folder is as far or further: a warm machine's newer state stays
        layout.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=layout.root, prefix=f".{name}.") as scratch:
            with tarfile.open(tarball, "r:gz") as archive:
                archive.extractall(scratch, filter="data")
            shutil.rmtree(layout.piece(name), ignore_errors=True)
            os.replace(Path(scratch) / name, layout.piece(name))
        state.pieces[name] = record
        taken.append(name)
    return taken
