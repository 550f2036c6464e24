"""Dream (whole-sequence masked diffusion) inference cost: `steps` bidirectional forwards over prompt + generation.

Dream's `diffusion_generate` (HKUNLP/Dream generation_utils.py `_sample`) has no blocks and no KV cache: every step
feeds the whole prompt + generation, takes the logits (shifted one position right: a token is predicted at the
position before it), gathers those of the still-masked positions and samples them (`sample_tokens`), then commits
the schedule's share of them. The forward is LLaDA's single-block step without a cache (`llada.step_operators`),
so it is costed by the same code; only the sampler's work on the logits is Dream's own. Costed as the workers run
it (workers/samplers/dream.py): the LM head maps only the N rows that predict the generation (the shift is a choice
of hidden-state rows, no copy of the logits); the official code maps all P + N and copies them to shift.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import get_args

from pydantic import Field

from roofline.errors import RooflineInputError
from roofline.estimate import Estimate
from roofline.fidelity import Fidelity, modelling, require_study_scope
from roofline.hardware import HardwareProfile
from roofline.llada import step_operators
from roofline.operators import BYTES_PER_ELEMENT, Operator, elementwise
from roofline.phase import cost_of
from specs.model_spec import DreamAlg
from specs.shapes import ModelShape

# DreamGenerationConfig's `eps`: the schedule runs t from 1 down to eps over `steps` steps.
DREAM_EPS = 1e-3
DREAM_ALGS: tuple[str, ...] = get_args(DreamAlg)


class DreamEstimate(Estimate):
    """Predicted cost of one Dream generation, per the chosen fidelity."""

    steps: int
    forwards: int  # model forwards costed: one per step (Dream's sampler has no early exit)
    seq_len: int  # positions every forward feeds: prompt + generation
    logits_positions: int  # positions per sequence the LM head maps to logits each step (0: no head, `study`)
    temperature: float
    alg: DreamAlg
    top_p: float | None = None
    top_k: int | None = None
    forward_s: float  # one forward with its LM head, without the sampler
    masked_positions: int = Field(ge=0)  # masked positions per sequence summed over the steps (the sampler's rows)
    aggregate_ai: float

    @property
    def mean_step_s(self) -> float:
        """Mean time of one step: the forward and the sampler's share of that step."""
        return self.total_s / self.forwards


def default_logits_positions(gen_len: int) -> int:
    """Positions a step maps to logits by default: the N hidden states that predict the generation (P - 1 to
    P + N - 2), as the workers' sampler projects them (`logits_to_keep`, workers/models/dream_model.py
    `predicting_positions`); the official code maps all P + N (pass `logits_positions=P + N`)."""
    return gen_len


@lru_cache(maxsize=256)
def masked_schedule(gen_len: int, steps: int, alg: str = "entropy") -> tuple[float, ...]:
    """Masked positions per sequence at each step (before it commits), as `_sample` schedules them.

    The confidence algs commit `int(masked * (1 - s / t))` positions at step i (t, s: `linspace(1, eps, steps + 1)`
    at i and i + 1), and every masked one at the last step: data-independent, computed here in float64 (torch
    computes it in float32; a product that lands on an integer can round the other way, one position in one step).
    `origin` commits each masked position with probability 1 - s / t: the expected count, N * t_i, is used."""
    times = [1.0 + i * (DREAM_EPS - 1.0) / steps for i in range(steps + 1)]
    if alg == "origin":
        return tuple(gen_len * t for t in times[:-1])
    masked, schedule = gen_len, []
    for i in range(steps):
        schedule.append(float(masked))
        masked -= int(masked * (1 - times[i + 1] / times[i])) if i < steps - 1 else masked
    return tuple(schedule)


def dream_sampler_operators(
    shape: ModelShape,
    *,
    masked_rows: int,
    sampled_rows: int,
    temperature: float = 0.0,
    alg: str = "entropy",
    element_bytes: int = BYTES_PER_ELEMENT,
    launches: int = 1,
) -> tuple[Operator, ...]:
    """The sampler's elementwise work on the logits, one op per element, rows x vocabulary each.

    `masked_rows`: rows gathered at the masked positions (`logits[mask_index]`); `sampled_rows`: rows
    `sample_tokens` runs on (the masked ones; `origin`: only those it commits, gathered a second time). Logits stay
    in the model's dtype (`element_bytes`): Dream's head does not upcast them. In `sample_tokens`: the division by
    the temperature (> 0), the softmax, then the max (temperature 0) or the categorical draw reading the
    probabilities, and for `entropy` `probs + eps`, its log, the product and the sum. Not modelled (the roofline
    stays a lower bound): top-p's sort and cumulative sum, top-k's selection, `topk_margin`'s sort over the
    vocabulary, the [batch, positions] work (top-k of the confidences, the scatters), and the official code's copy
    of all its logits to shift them (`torch.cat([logits[:, :1], logits[:, :-1]], 1)`; the workers' sampler has none).
    Rows given over a whole generation, with `launches` its steps, cost the same on the roofs as step by step
    (elementwise time is linear in the rows)."""
    vocab = shape.vocab_size
    unary, binary, read = 2 * element_bytes, 3 * element_bytes, element_bytes

    def op(name: str, rows: int, bytes_per_element: int) -> Operator:
        return elementwise(name, "sampler", rows, vocab, bytes_per_element=bytes_per_element, launches=launches)

    ops = [op("gather_masked", masked_rows, unary)]
    if alg == "origin":
        ops.append(op("gather_committed", sampled_rows, unary))
    if temperature > 0:
        ops.append(op("temperature_div", sampled_rows, unary))
    ops += [op("softmax", sampled_rows, unary), op("categorical" if temperature > 0 else "max", sampled_rows, read)]
    if alg == "entropy":
        ops += [op("entropy_add_eps", sampled_rows, unary), op("entropy_log", sampled_rows, unary),
                op("entropy_mul", sampled_rows, binary), op("entropy_sum", sampled_rows, read)]
    return tuple(op_ for op_ in ops if op_.flops)


def dream_sampler_buffer_bytes_per_element(
    *, temperature: float = 0.0, alg: str = "entropy", top_p: float | None = None, top_k: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> int:
    """Peak bytes per sampled logit element of `sample_tokens`' own tensors, besides the gathered logits.

    The tempered copy (temperature > 0), the filtered copy (top-p or top-k: `masked_fill` returns a new tensor; top-p's
    sort adds its sorted values, int64 indices and float cumulative sums), the probabilities, and for `entropy`
    log(probs + eps) and the product alive together; `topk_margin` sorts the probabilities (values + int64 indices)."""
    eb = element_bytes
    buffers = eb  # probabilities
    if temperature > 0:
        buffers += eb
    if top_k is not None:
        buffers += eb + 1  # the filtered copy and the boolean mask
    if top_p is not None and top_p < 1:
        buffers += eb + eb + 8 + eb + 1  # the filtered copy, sorted values, int64 indices, cumulative sums, mask
    if alg == "entropy":
        buffers += 2 * eb
    elif alg == "topk_margin":
        buffers += eb + 8
    return buffers


def check_dream_schedule(*, prompt_len: int, gen_len: int, steps: int, batch: int) -> None:
    """What `diffusion_generate` needs, as errors that say what is allowed."""
    if prompt_len < 1 or gen_len < 1 or steps < 1 or batch < 1:
        raise RooflineInputError(
            f"need prompt_len, gen_len, steps and batch >= 1 (got {prompt_len}, {gen_len}, {steps}, {batch})"
        )


def estimate_dream(
    shape: ModelShape,
    hardware: HardwareProfile,
    *,
    prompt_len: int,
    gen_len: int,
    steps: int,
    batch: int = 1,
    fidelity: Fidelity = "faithful",
    temperature: float = 0.0,
    alg: DreamAlg = "entropy",
    top_p: float | None = None,
    top_k: int | None = None,
    logits_positions: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> DreamEstimate:
    """Cost of a Dream generation: `steps` forwards over prompt + generation, each with the LM head over
    `logits_positions` per sequence (None: `default_logits_positions`), plus the sampler's work over the schedule's
    masked positions (`masked_schedule`). `study` applies the study's LLaDA rules (no LM head, no sampler, batch 1)."""
    choices = modelling(fidelity)
    require_study_scope(choices, batch=batch)
    check_dream_schedule(prompt_len=prompt_len, gen_len=gen_len, steps=steps, batch=batch)
    if temperature < 0:
        raise RooflineInputError(f"temperature must be >= 0 (got {temperature})")
    if alg not in DREAM_ALGS:
        raise RooflineInputError(f"unknown alg {alg!r}; allowed: {', '.join(DREAM_ALGS)}")
    seq_len = prompt_len + gen_len
    head = default_logits_positions(gen_len) if logits_positions is None else logits_positions
    if not 1 <= head <= seq_len:
        raise RooflineInputError(f"logits_positions {head} must lie between 1 and prompt + generation {seq_len}")
    forward = cost_of(step_operators(
        shape, seq_len=seq_len, batch=batch, cfg_scale=0.0, fidelity=fidelity, logits_positions=head,
        element_bytes=element_bytes, llada_sampler=False,
    ), hardware)
    total = forward.repeated(steps)
    masked = round(sum(masked_schedule(gen_len, steps, alg)))
    with_head = choices.llada_lm_head_and_sampler
    if with_head:
        sampled = gen_len if alg == "origin" else masked  # origin samples each position once, when it commits it
        total = total + cost_of(dream_sampler_operators(
            shape, masked_rows=batch * masked, sampled_rows=batch * sampled,
            temperature=temperature, alg=alg, element_bytes=element_bytes, launches=steps,
        ), hardware)
    return DreamEstimate.of(
        total, hardware, fidelity=fidelity, batch=batch, prompt_len=prompt_len, gen_len=gen_len, steps=steps,
        forwards=steps, seq_len=seq_len, logits_positions=head if with_head else 0, temperature=temperature,
        alg=alg, top_p=top_p, top_k=top_k, forward_s=forward.total_time_s, masked_positions=masked,
        aggregate_ai=total.aggregate_ai,
    )


def dream_step_operators(
    shape: ModelShape,
    *,
    seq_len: int,
    gen_len: int,
    batch: int,
    steps: int = 1,
    fidelity: Fidelity = "faithful",
    temperature: float = 0.0,
    alg: str = "entropy",
    logits_positions: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> tuple[Operator, ...]:
    """The operators of Dream's first step (every generated position masked): what the roofline figure places."""
    head = default_logits_positions(gen_len) if logits_positions is None else logits_positions
    forward = step_operators(
        shape, seq_len=seq_len, batch=batch, cfg_scale=0.0, fidelity=fidelity, logits_positions=head,
        element_bytes=element_bytes, llada_sampler=False,
    )
    if not modelling(fidelity).llada_lm_head_and_sampler:
        return forward
    # origin samples the positions it commits: at the first step, the expected share (1 - eps) / steps of them.
    sampled = batch * (math.ceil(gen_len * (1 - DREAM_EPS) / steps) if alg == "origin" else gen_len)
    return forward + dream_sampler_operators(
        shape, masked_rows=batch * gen_len, sampled_rows=sampled,
        temperature=temperature, alg=alg, element_bytes=element_bytes,
    )
