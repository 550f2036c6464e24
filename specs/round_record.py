"""round.json: what a GPU round's record says of each headline sweep in `results/<gpu>/headline/`.

orchestrator/gpu_round/results.py writes it when it imports a round's export; report/answer/headline.py admits into the README's
headline only the sweeps it names as a GPU round's headline at the 8B shapes, and checks that their runs say the
same. A folder without it, a file that is not such a record, or a sweep it does not name is refused in one line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specs.model_spec import CheckpointSource
from specs.registry import family
from specs.results import RunResult

ROUND_RECORD_FILE = "round.json"
EIGHT_B = "8b"  # the headline's models: LLaMA-3-8B's and LLaDA-8B's shapes (the preset, or a hub checkpoint)
HEADLINE_ARCHS = ("llama", "llada")
CPU = "cpu"
REIMPORT = "it is written by `just headline-results EXPORT`: import the round's export again"


class RoundRecordError(ValueError):
    """A round.json that is missing, not a record, or that does not admit a sweep; one line."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GraphGate(_Record):
    piece: str
    reason: str | None
    tests: dict[str, str]


class HeadlineSweepRecord(_Record):
    """One headline sweep: the round's piece and its record, and the device and models its runs name."""

    piece: str
    status: str
    attempts: int = Field(ge=0)
    wall_s: float = Field(ge=0)
    graph_gate: GraphGate | None
    device: str = Field(min_length=1)
    models: str = Field(min_length=1)  # EIGHT_B, else what the models are (models_of)


class RoundRecord(_Record):
    sweeps: dict[str, HeadlineSweepRecord] = Field(min_length=1)


def read_round_record(path: Path) -> RoundRecord:
    """The record at `path`; RoundRecordError (one line) when it is missing or is not one."""
    if not path.is_file():
        raise RoundRecordError(f"{path}: missing, so nothing says the sweeps beside it are a GPU round's headline; "
                               f"{REIMPORT}")
    try:
        return RoundRecord.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise RoundRecordError(f"{path}: not a headline record ({where}: {first['msg']}); {REIMPORT}") from None


def dumps(record: RoundRecord) -> str:
    return json.dumps(record.model_dump(mode="json"), indent=1, sort_keys=True) + "\n"


def devices_of(results: Sequence[RunResult]) -> set[str]:
    return {r.environment.device for r in results if r.environment is not None}


def models_of(results: Sequence[RunResult]) -> str:
    """EIGHT_B when every run's model is LLaMA-3-8B's or LLaDA-8B's shape (the preset, or a checkpoint the family
    names); else each model as it is (`llama-tiny: the tiny preset, random weights`, `llama: checkpoint DIR`)."""
    models = {r.config.model.name: r.config.model for r in results}
    if models and all(_is_8b(m) for m in models.values()):
        return EIGHT_B
    return "; ".join(f"{name}: {_source(m.source)}" for name, m in sorted(models.items())) or "no runs"


def _is_8b(model) -> bool:
    if model.arch not in HEADLINE_ARCHS:
        return False
    if isinstance(model.source, CheckpointSource):
        return model.source.checkpoint in family(model.arch).hub_ids
    return model.source.synthetic == EIGHT_B


def _source(source) -> str:
    if isinstance(source, CheckpointSource):
        return f"checkpoint {source.checkpoint}"
    preset = source.synthetic
    return f"the {preset} preset, random weights" if isinstance(preset, str) else "an explicit shape, random weights"


def headline_refusal(name: str, entry: HeadlineSweepRecord | None, results: Sequence[RunResult], *,
                     readme: bool) -> str | None:
    """Why the sweep `name` is not a headline (None: it is): round.json does not name it or says other than its
    runs; for the README's, also: names it as a CPU sweep or one of other models than the 8B pair's."""
    if entry is None:
        return (f"{name}: not a sweep {ROUND_RECORD_FILE} records (copied in by hand?): the README's headline takes "
                "only a GPU round's headline sweeps; move it out of the folder, or import its round's export")
    devices, models = devices_of(results), models_of(results)
    if devices != {entry.device} or models != entry.models:
        return (f"{name}: {ROUND_RECORD_FILE} says it ran on {entry.device} with models {entry.models}, but its runs "
                f"say {', '.join(sorted(devices)) or 'no device'} with {models}: not the sweep the round imported; "
                "import its round's export again")
    if not readme:
        return None
    if entry.device == CPU:
        return (f"{name}: ran on the CPU (a toy round's, or a CPU sweep), and the README's headline is a GPU's: "
                "move it out of the folder")
    if entry.models != EIGHT_B:
        return (f"{name}: its models are not LLaMA-3-8B's and LLaDA-8B's shapes ({entry.models}), and the README's "
                "headline is theirs: move it out of the folder")
    return None
