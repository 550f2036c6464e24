"""The spec a sweep of the GPU round runs: a shipped file, or a variant of it written into the round's piece folder.

A variant is the shipped spec but for what it names: the graph-captured diffusion variants left out (the round's
graph tests did not pass: a captured timing counts only where its tokens match eager), fewer sessions (the plan
found that the call cannot hold the spec's), or toy shapes on this CPU (`just gpu-round --toy`: the same
models, variants, sessions, warm-ups and repetitions at the tiny presets). Its name says what changed, so it
sweeps into a folder of its own and never mixes with the shipped spec's runs, and its description says why.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

from specs.loader import PACKAGE_ROOT, parse_spec, read_spec_text
from specs.registry import family
from specs.schema import ExperimentSpec

TOY_PROMPT = 32  # a toy run's prompt, and its generation: the spec's generation lengths scaled to this longest
TOY_GENERATION = 32
TOY_DTYPE = "float32"  # CPU: bfloat16 matmuls are emulated and slow


@dataclass(frozen=True)
class Variant:
    """What a derived spec changes: `sessions` (None: the spec's), `graphs` False (the graph variants left out, for
    `reason`), `toy` (tiny shapes on a CPU)."""

    sessions: int | None = None
    graphs: bool = True
    reason: str = ""
    toy: bool = False

    @property
    def shipped(self) -> bool:
        return self == SHIPPED

    def suffix(self) -> str:
        parts = (["toy"] if self.toy else []) + ([f"{self.sessions}-sessions"] if self.sessions else []) + (
            [] if self.graphs else ["no-graphs"])
        return "".join(f"-{p}" for p in parts)


SHIPPED = Variant()  # the spec file as it ships


def shipped_data(path: str) -> dict[str, Any]:
    data = yaml.safe_load(read_spec_text(PACKAGE_ROOT / path))
    assert isinstance(data, dict), f"{path} is a mapping (the shipped specs are tested)"
    return data


def variant_name(path: str, variant: Variant) -> str:
    """The sweep's name (and folder): the shipped spec's, and what the variant changed."""
    return f"{shipped_data(path)['name']}{variant.suffix()}"


def variant_text(path: str, variant: Variant) -> str:
    """The YAML of the spec at `path` (relative to the package) as `variant` changes it."""
    if variant.shipped:
        return read_spec_text(PACKAGE_ROOT / path)
    data = copy.deepcopy(shipped_data(path))
    notes = []
    if variant.toy:
        _toy(data)
        notes.append("toy shapes on a CPU (just gpu-round --toy)")
    if variant.sessions is not None:
        data.setdefault("controls", {})["sessions"] = variant.sessions
        notes.append(f"{variant.sessions} sessions: the spec's did not fit the call")
    if not variant.graphs:
        _drop_graphs(data)
        notes.append(f"graph-captured variants left out: {variant.reason}")
    data["name"] = variant_name(path, variant)
    data["description"] = f"{data.get('description', '')} Derived from {path}: {'; '.join(notes)}.".strip()
    return yaml.safe_dump(data, sort_keys=False, width=10_000)  # one line per description: greppable


def variant_spec(path: str, variant: Variant) -> ExperimentSpec:
    """The variant, validated (a variant the schema refuses is a bug in the shipped spec or here)."""
    return parse_spec(variant_text(path, variant), source=f"{path} ({variant.suffix() or 'shipped'})",
                      check_files=False)  # fmt: skip


def graph_impls(data: dict[str, Any]) -> list[str]:
    """The graph-captured diffusion variants a spec's data names, in order."""
    axes = [data.get("grid", {}).get(k) for k in ("llada", "dream")]
    axes += [m.get(k) for m in data.get("models", []) for k in ("llada", "dream")]
    return [impl["name"] for a in axes if a for impl in a.get("impl", []) if impl.get("graph")]


def _drop_graphs(data: dict[str, Any]) -> None:
    for owner in [data.get("grid", {}), *data.get("models", [])]:
        for key in ("llada", "dream"):
            axes = owner.get(key)
            if axes and "impl" in axes:
                kept = [impl for impl in axes["impl"] if not impl.get("graph")]
                if kept:
                    axes["impl"] = kept
                else:  # the sampler's runs were all graph-captured: none of that sampler's models is left
                    owner.pop(key)
                    _drop_models_of(data, key)


def _drop_models_of(data: dict[str, Any], sampler: str) -> None:
    data["models"] = [m for m in data.get("models", []) if family(m["arch"]).sampler != sampler]


def _toy(data: dict[str, Any]) -> None:
    """The tiny presets on a CPU at short lengths: the generation lengths, blocks and steps all scaled by one
    factor (so every divisibility the spec met still holds), prompts at TOY_PROMPT."""
    grid = data["grid"]
    scale = max(grid["generation_lengths"]) // TOY_GENERATION
    grid["prompt_lengths"] = [TOY_PROMPT]
    grid["generation_lengths"] = [g // scale for g in grid["generation_lengths"]]
    for owner in [grid, *data.get("models", [])]:
        for key in ("llada", "dream"):
            axes = owner.get(key)
            if not axes:
                continue
            axes["steps"] = [s // scale for s in axes["steps"]]
            if "block_lengths" in axes:
                axes["block_lengths"] = [b // scale for b in axes["block_lengths"]]
            for impl in axes.get("impl", []):
                if impl.get("steps"):
                    impl["steps"] = [s // scale for s in impl["steps"]]
    for model in data["models"]:
        model["source"] = {"synthetic": "tiny"}
    controls = data.setdefault("controls", {})
    controls.update(device="cpu", dtype=TOY_DTYPE, hardware={"gpu": "any"})
    data.pop("departures", None)
