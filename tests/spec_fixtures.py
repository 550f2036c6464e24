"""Helpers to build specs in tests: the tiny pipeline spec as a dict, mutated per case."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from specs.loader import PACKAGE_ROOT, parse_spec
from specs.schema import ExperimentSpec

TINY = PACKAGE_ROOT / "specs" / "tiny.yaml"


def tiny_dict() -> dict[str, Any]:
    return yaml.safe_load(TINY.read_text(encoding="utf-8"))


def mutated(mutate: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data = copy.deepcopy(tiny_dict())
    mutate(data)
    return data


def spec_from(data: dict[str, Any]) -> ExperimentSpec:
    return parse_spec(yaml.safe_dump(data, sort_keys=False), source="test.yaml")


def write_spec(directory: Path, data: dict[str, Any], name: str = "spec.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def tiny_spec(**grid: Any) -> dict[str, Any]:
    """A small variant of the tiny spec for fast orchestration tests (quality off)."""
    data = tiny_dict()
    data["grid"].update(grid)
    data.pop("quality", None)
    return data
