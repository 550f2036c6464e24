"""The base every spec model shares (unknown keys are errors, frozen after validation), the settings' literal
types, and the validators of names and of grid axes."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SAFE_NAME_HELP = "1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"

Dtype = Literal["bfloat16", "float16", "float32"]
Attention = Literal["sdpa", "flash_attention_2", "eager"]
Remasking = Literal["low_confidence", "random"]
Device = Literal["auto", "cpu", "cuda"]
VANILLA = "vanilla"  # the name of every sampler's plain implementation


class Frozen(BaseModel):
    """Base of every spec model: unknown keys are errors and nothing changes after validation."""

    # Infinity and NaN are never a setting (a temperature of .inf would pass `ge=0`).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def safe_name(value: str) -> str:
    # fullmatch: `$` in SAFE_NAME would also accept a name that ends in a newline.
    if not SAFE_NAME.fullmatch(value) or value in {".", ".."}:
        raise ValueError(f"{value!r} is not a safe name; use {SAFE_NAME_HELP}")
    return value


def distinct(values: list | None) -> list | None:
    """A grid axis lists each value once: a repeat would plan the same run twice."""
    seen: list = []
    for value in values or []:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice; list each value once")
        seen.append(value)
    return values


class NamedImpl(Frozen):
    """A sampler's named implementation: `vanilla` is the plain one and names nothing else (`is_accelerated`: whether
    this one departs from it)."""

    name: str = VANILLA

    _name = field_validator("name")(safe_name)

    @model_validator(mode="after")
    def _vanilla_is_plain(self) -> NamedImpl:
        if self.name == VANILLA and self.is_accelerated:
            raise ValueError(f"name: {VANILLA!r} names the plain sampler; give this variant another name")
        return self

    @property
    def is_accelerated(self) -> bool:
        return False
