"""The workload every roofline estimate costs: one generation's shape and its sampler's settings, as one value."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from roofline.operators import BYTES_PER_ELEMENT, element_bytes_of
from specs.frozen import Remasking
from specs.model_spec import DreamAlg, LladaCache

__all__ = ["LladaCache", "Remasking", "Workload", "run_workload"]


@dataclass(frozen=True, kw_only=True)
class Workload:
    """One generation of `gen_len` tokens after a `prompt_len` prompt, for `batch` sequences, tensors of
    `element_bytes` each, and the settings of the sampler that produces it.

    Each family's estimate reads the fields it models and leaves the others; `predict` refuses a field another
    family owns when it differs from its default (`set_fields`). Checks of the values are the estimates' own:
    they raise `RooflineInputError` naming what is allowed."""

    prompt_len: int
    gen_len: int
    batch: int = 1
    element_bytes: int = BYTES_PER_ELEMENT
    # Diffusion schedule: steps (LLaDA, Dream), blocks (LLaDA, block diffusion), the forwards a confidence rule ran.
    steps: int | None = None
    block_length: int | None = None
    sub_block_length: int | None = None
    forwards: int | None = None
    # Token choice: what the sampler does with the logits.
    temperature: float = 0.0
    cfg_scale: float = 0.0
    remasking: Remasking = "low_confidence"
    logits_positions: int | None = None  # positions per sequence given logits each step; None: the family's default
    truncate_blocks: bool = False
    alg: DreamAlg | None = None  # Dream's confidence rule; None: entropy
    top_p: float | None = None
    top_k: int | None = None
    # Implementation variants: LLaDA's KV cache, the compiled decode, block diffusion's sub-block cache and prefill.
    cache: LladaCache = "none"
    compiled_decode: bool = False
    sub_block_cache: bool = False
    prefill_one_block_prompt: bool = False

    @property
    def seq_len(self) -> int:
        """Prompt + generation: the positions a whole-sequence forward feeds."""
        return self.prompt_len + self.gen_len

    @property
    def dream_alg(self) -> DreamAlg:
        """Dream's confidence rule, entropy when unset."""
        return self.alg or "entropy"

    def set_fields(self) -> set[str]:
        """The fields whose value differs from the default: what the caller asked for."""
        return {f.name for f in fields(self) if getattr(self, f.name) != f.default}


def run_workload(config: Any, **settings: Any) -> Workload:
    """The workload of a `specs.schema.RunConfig` (read by attribute, so the roofline does not import the schema):
    its batch, lengths and the bytes of `config.controls.dtype`, with the sampler's `settings`."""
    return Workload(
        prompt_len=config.prompt_length, gen_len=config.generation_length, batch=config.batch_size,
        element_bytes=element_bytes_of(getattr(getattr(config, "controls", None), "dtype", None)), **settings,
    )
