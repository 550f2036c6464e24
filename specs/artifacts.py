"""The artifact layout and its checksums: the contract between the driver that writes and the report that reads."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from specs.results import RunResult

SPEC_FILE = "spec.yaml"
RUNS_DIR = "runs"
MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.parquet"
FIGURES_DIR = "figures"
TEMP_SUFFIX = ".tmp"


class Manifest(BaseModel):
    """run_id → sha256 of its file, plus the frozen spec's sha256."""

    model_config = ConfigDict(extra="forbid")

    sweep: str
    spec_sha256: str
    runs: dict[str, str]


@dataclass(frozen=True)
class SweepLayout:
    """Where each file of one sweep lives: artifacts/<sweep>/..."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / SPEC_FILE

    @property
    def runs(self) -> Path:
        return self.root / RUNS_DIR

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def results(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def figures(self) -> Path:
        return self.root / FIGURES_DIR

    def run_file(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    def run_files(self) -> dict[str, Path]:
        """Every finished run file on disk, by run id (temporary files are not runs)."""
        if not self.runs.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.runs.glob("*.json"))}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(layout: SweepLayout) -> Manifest | None:
    if not layout.manifest.is_file():
        return None
    return Manifest.model_validate_json(layout.manifest.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Problem:
    """One verification failure, named so a user can find the file."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def verify(layout: SweepLayout) -> list[Problem]:
    """Recompute every checksum; name each mismatch, missing file and extra file. Empty = verified."""
    try:
        manifest = read_manifest(layout)
    except (ValueError, OSError) as exc:
        return [Problem(str(layout.manifest), f"unreadable manifest ({exc.__class__.__name__})")]
    if manifest is None:
        return [Problem(str(layout.manifest), "missing")]
    problems: list[Problem] = []
    if not layout.spec.is_file():
        problems.append(Problem(str(layout.spec), "missing"))
    elif sha256_file(layout.spec) != manifest.spec_sha256:
        problems.append(Problem(str(layout.spec), "checksum mismatch (edited after the sweep)"))
    on_disk = layout.run_files()
    for run_id, expected in sorted(manifest.runs.items()):
        path = layout.run_file(run_id)
        if run_id not in on_disk:
            problems.append(Problem(str(path), "missing"))
        elif sha256_file(path) != expected:
            problems.append(Problem(str(path), "checksum mismatch (truncated or edited)"))
    for run_id in sorted(set(on_disk) - set(manifest.runs)):
        problems.append(Problem(str(on_disk[run_id]), "extra file not in the manifest"))
    return problems


def load_results(layout: SweepLayout) -> list[RunResult]:
    """Every run artifact of a sweep, parsed (the report's only input besides the spec)."""
    return [
        RunResult.model_validate_json(path.read_text(encoding="utf-8"))
        for path in layout.run_files().values()
    ]


def canonical_json(data: object) -> str:
    """Sorted keys, no whitespace: the form that is hashed into run ids."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
