"""The swept axes of a spec: batch sizes, lengths (a cross product or totals with a prompt fraction), and each
sampler's axes shared by every model that generates with it (LLaDA's, Dream's, block diffusion's, the autoregressive
loop's)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from specs.block_diffusion import BlockDiffusionAxes
from specs.frozen import Frozen, distinct
from specs.model_spec import DreamAxes, LladaAxes, LlamaAxes


class LengthPair(Frozen):
    prompt: int = Field(gt=0)
    generation: int = Field(gt=0)


class Grid(Frozen):
    """The swept axes. Lengths: either a cross product or total lengths with a prompt fraction."""

    batch_sizes: list[Annotated[int, Field(gt=0)]] = Field(min_length=1)
    prompt_lengths: list[Annotated[int, Field(gt=0)]] | None = None
    generation_lengths: list[Annotated[int, Field(gt=0)]] | None = None
    sequence_lengths: list[Annotated[int, Field(gt=1)]] | None = None
    prompt_fraction: float | None = Field(default=None, gt=0, lt=1)
    llada: LladaAxes | None = None
    dream: DreamAxes | None = None
    block_diffusion: BlockDiffusionAxes | None = None
    # The autoregressive loop's variants, for every autoregressive family (LLaMA, Qwen2.5).
    llama: LlamaAxes | None = None

    _distinct = field_validator("batch_sizes", "prompt_lengths", "generation_lengths", "sequence_lengths")(distinct)

    @model_validator(mode="after")
    def _one_length_form(self) -> Grid:
        cross = self.prompt_lengths is not None or self.generation_lengths is not None
        total = self.sequence_lengths is not None or self.prompt_fraction is not None
        if cross and total:
            raise ValueError(
                "prompt_lengths: give either prompt_lengths + generation_lengths, or sequence_lengths + prompt_fraction, not both"
            )
        if cross and (not self.prompt_lengths or not self.generation_lengths):
            raise ValueError("generation_lengths: prompt_lengths and generation_lengths must both be given")
        if total and (not self.sequence_lengths or self.prompt_fraction is None):
            raise ValueError("prompt_fraction: sequence_lengths needs prompt_fraction (e.g. 0.5)")
        if not cross and not total:
            raise ValueError("prompt_lengths: give prompt_lengths + generation_lengths, or sequence_lengths + prompt_fraction")
        if total:
            for n in self.sequence_lengths or []:
                prompt = round(n * (self.prompt_fraction or 0))
                if prompt < 1 or prompt >= n:
                    raise ValueError(f"sequence_lengths: {n} tokens with prompt_fraction {self.prompt_fraction} leave no prompt or no generation")
        return self

    def length_pairs(self) -> list[LengthPair]:
        """Every (prompt, generation) pair the grid asks for, in the order given."""
        if self.sequence_lengths is not None and self.prompt_fraction is not None:
            pairs = []
            for n in self.sequence_lengths:
                prompt = round(n * self.prompt_fraction)
                pairs.append(LengthPair(prompt=prompt, generation=n - prompt))
            return pairs
        return [
            LengthPair(prompt=p, generation=g)
            for p in self.prompt_lengths or []
            for g in self.generation_lengths or []
        ]
