"""The two fidelities as data: which of the study's modelling choices each one makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from roofline.errors import RooflineInputError

Fidelity = Literal["study", "faithful"]
FIDELITIES: tuple[Fidelity, ...] = ("study", "faithful")

# How a causal mask removes attention work: the study's (wrong) correction, or the exact count.
CausalRule = Literal["study", "exact"]


@dataclass(frozen=True, slots=True)
class Modelling:
    """Every place the two fidelities differ. `study` reproduces run_llama/llada_roofline_model.py to the
    printed digit, defects included; `faithful` models what the benchmark's runs execute."""

    causal_rule: CausalRule
    # LLaMA: decode passes for G generated tokens. The study runs G decode passes after the prefill;
    # the prefill already yields the first token, so a real loop runs G - 1.
    decode_passes_equal_gen_len: bool
    # LLaDA: the official sampler maps every position to logits each step (`model(x).logits`), then
    # takes an argmax and a float64 softmax over them; the study has no LM head at all. The same rule decides
    # whether a Dream step has its LM head and sampler (roofline/dream.py).
    llada_lm_head_and_sampler: bool
    # LLaDA: the official sampler feeds prompt + whole generation every step; the study grows SeqLen
    # block by block (what a sampler that truncates not-yet-reached blocks would do).
    llada_truncate_blocks: bool
    # The study is batch 1 without classifier-free guidance.
    batched: bool


def modelling(fidelity: str, *, truncate_blocks: bool = False) -> Modelling:
    """The modelling choices of a fidelity; `truncate_blocks` only changes `faithful` (the study always truncates)."""
    if fidelity == "study":
        return Modelling(causal_rule="study", decode_passes_equal_gen_len=True, llada_lm_head_and_sampler=False,
                         llada_truncate_blocks=True, batched=False)
    if fidelity == "faithful":
        return Modelling(causal_rule="exact", decode_passes_equal_gen_len=False, llada_lm_head_and_sampler=True,
                         llada_truncate_blocks=truncate_blocks, batched=True)
    raise RooflineInputError(f"unknown fidelity {fidelity!r}; allowed: {', '.join(FIDELITIES)}")


def require_study_scope(choices: Modelling, *, batch: int, cfg_scale: float = 0.0) -> None:
    """The study's model has no batch and no CFG: say so rather than return a number it never modelled."""
    if choices.batched:
        return
    if batch != 1 or cfg_scale != 0.0:
        raise RooflineInputError(
            f"fidelity 'study' models batch 1 without CFG (got batch={batch}, cfg_scale={cfg_scale}); "
            "use fidelity 'faithful' for batches and classifier-free guidance"
        )
