"""Dream (whole-sequence masked diffusion) inference cost: `steps` bidirectional forwards over prompt + generation.

Dream's `diffusion_generate` (HKUNLP/Dream generation_utils.py `_sample`) has no blocks and no KV cache: every step
feeds the whole prompt + generation, takes the logits (shifted one position right: a token is predicted at the
position before it), gathers those of the still-masked positions and samples them (`sample_tokens`), then commits
the schedule's share of them. The forward is LLaDA's single-block step without a cache (`llada.step_operators`),
so it is costed by the same code; only the sampler's work on the logits is Dream's own. Costed as the workers run
it (workers/samplers/dream/sampler.py): the LM head maps only the N rows that predict the generation (the shift is a choice
of hidden-state rows, no copy of the logits); the official code maps all P + N and copies them to shift.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import get_args

from pydantic import Field

from roofline.errors import RooflineInputError
from roofline.estimate import DiffusionEstimate
from roofline.fidelity import Fidelity, modelling, require_study_scope
from roofline.hardware import HardwareProfile
from roofline.llada import step_operators
from roofline.operators import Operator, elementwise
from roofline.phase import cost_of
from roofline.workload import Workload
from specs.model_spec import DreamAlg
from specs.shapes import ModelShape

# DreamGenerationConfig's `eps`: the schedule runs t from 1 down to eps over `steps` steps.
DREAM_EPS = 1e-3
DREAM_ALGS: tuple[str, ...] = get_args(DreamAlg)


class DreamEstimate(DiffusionEstimate):
    """Predicted cost of one Dream generation, per the chosen fidelity; `forwards`: one per step (Dream's sampler
    has no early exit)."""

    steps: int
    seq_len: int  # positions every forward feeds: prompt + generation
    logits_positions: int  # positions per sequence the LM head maps to logits each step (0: no head, `study`)
    temperature: float
    alg: DreamAlg
    top_p: float | None = None
    top_k: int | None = None
    forward_s: float  # one forward with its LM head, without the sampler
    masked_positions: int = Field(ge=0)  # masked positions per sequence summed over the steps (the sampler's rows)


def logits_positions_of(work: Workload) -> int:
    """Positions a step maps to logits: `work.logits_positions`, by default the N hidden states that predict the
    generation (P - 1 to P + N - 2), as the workers' sampler projects them (`logits_to_keep`,
    workers/models/dream_model.py `predicting_positions`); the official code maps all P + N (pass P + N)."""
    return work.gen_len if work.logits_positions is None else work.logits_positions


def forward_operators_of(shape: ModelShape, work: Workload, fidelity: Fidelity) -> tuple[Operator, ...]:
    """One forward over prompt + generation with its LM head over `logits_positions_of(work)` rows: LLaDA's
    single-block step without a cache and without LLaDA's sampler (no CFG: Dream has none)."""
    head_only = replace(work, cfg_scale=0.0, logits_positions=logits_positions_of(work))
    return step_operators(shape, head_only, fidelity, seq_len=work.seq_len, llada_sampler=False)


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
    shape: ModelShape, work: Workload, *, masked_rows: int, sampled_rows: int, launches: int = 1
) -> tuple[Operator, ...]:
    """The sampler's elementwise work on the logits, one op per element, rows x vocabulary each.

    `masked_rows`: rows gathered at the masked positions (`logits[mask_index]`); `sampled_rows`: rows
    `sample_tokens` runs on (the masked ones; `origin`: only those it commits, gathered a second time), with
    `work`'s temperature and alg. Logits stay in the model's dtype (`element_bytes`): Dream's head does not upcast them. In `sample_tokens`: the division by
    the temperature (> 0), the softmax, then the max (temperature 0) or the categorical draw reading the
    probabilities, and for `entropy` `probs + eps`, its log, the product and the sum. Not modelled (the roofline
    stays a lower bound): top-p's sort and cumulative sum, top-k's selection, `topk_margin`'s sort over the
    vocabulary, the [batch, positions] work (top-k of the confidences, the scatters), and the official code's copy
    of all its logits to shift them (`torch.cat([logits[:, :1], logits[:, :-1]], 1)`; the workers' sampler has none).
    Rows given over a whole generation, with `launches` its steps, cost the same on the roofs as step by step
    (elementwise time is linear in the rows)."""
    vocab, alg, element_bytes = shape.vocab_size, work.dream_alg, work.element_bytes
    unary, binary, read = 2 * element_bytes, 3 * element_bytes, element_bytes

    def op(name: str, rows: int, bytes_per_element: int) -> Operator:
        return elementwise(name, "sampler", rows, vocab, bytes_per_element=bytes_per_element, launches=launches)

    ops = [op("gather_masked", masked_rows, unary)]
    if alg == "origin":
        ops.append(op("gather_committed", sampled_rows, unary))
    hot = work.temperature > 0
    if hot:
        ops.append(op("temperature_div", sampled_rows, unary))
    ops += [op("softmax", sampled_rows, unary), op("categorical" if hot else "max", sampled_rows, read)]
    if alg == "entropy":
        ops += [op("entropy_add_eps", sampled_rows, unary), op("entropy_log", sampled_rows, unary),
                op("entropy_mul", sampled_rows, binary), op("entropy_sum", sampled_rows, read)]
    return tuple(op_ for op_ in ops if op_.flops)


def dream_sampler_buffer_bytes_per_element(work: Workload) -> int:
    """Peak bytes per sampled logit element of `sample_tokens`' own tensors, besides the gathered logits.

    The tempered copy (temperature > 0), the filtered copy (top-p or top-k: `masked_fill` returns a new tensor; top-p's
    sort adds its sorted values, int64 indices and float cumulative sums), the probabilities, and for `entropy`
    log(probs + eps) and the product alive together; `topk_margin` sorts the probabilities (values + int64 indices)."""
    eb, alg = work.element_bytes, work.dream_alg
    buffers = eb  # probabilities
    if work.temperature > 0:
        buffers += eb
    if work.top_k is not None:
        buffers += eb + 1  # the filtered copy and the boolean mask
    if work.top_p is not None and work.top_p < 1:
        buffers += eb + eb + 8 + eb + 1  # the filtered copy, sorted values, int64 indices, cumulative sums, mask
    if alg == "entropy":
        buffers += 2 * eb
    elif alg == "topk_margin":
        buffers += eb + 8
    return buffers


def dream_steps(work: Workload) -> int:
    """The steps of `work`, checked against what `diffusion_generate` needs, as errors that say what is allowed."""
    prompt_len, gen_len, steps, batch = work.prompt_len, work.gen_len, work.steps, work.batch
    if steps is None:
        raise RooflineInputError("need steps (got None)")
    if prompt_len < 1 or gen_len < 1 or steps < 1 or batch < 1:
        raise RooflineInputError(
            f"need prompt_len, gen_len, steps and batch >= 1 (got {prompt_len}, {gen_len}, {steps}, {batch})"
        )
    return steps


def estimate_dream(
    shape: ModelShape, hardware: HardwareProfile, work: Workload, fidelity: Fidelity = "faithful"
) -> DreamEstimate:
    """Cost of a Dream generation: `steps` forwards over prompt + generation, each with the LM head over
    `logits_positions_of(work)` per sequence, plus the sampler's work over the schedule's masked positions
    (`masked_schedule`). `study` applies the study's LLaDA rules (no LM head, no sampler, batch 1)."""
    batch, gen_len, alg = work.batch, work.gen_len, work.dream_alg
    choices = modelling(fidelity)
    require_study_scope(choices, batch=batch)
    steps = dream_steps(work)
    if work.temperature < 0:
        raise RooflineInputError(f"temperature must be >= 0 (got {work.temperature})")
    if alg not in DREAM_ALGS:
        raise RooflineInputError(f"unknown alg {alg!r}; allowed: {', '.join(DREAM_ALGS)}")
    head = logits_positions_of(work)
    if not 1 <= head <= work.seq_len:
        raise RooflineInputError(
            f"logits_positions {head} must lie between 1 and prompt + generation {work.seq_len}"
        )
    forward = cost_of(forward_operators_of(shape, work, fidelity), hardware)
    total = forward.repeated(steps)
    masked = round(sum(masked_schedule(gen_len, steps, alg)))
    with_head = choices.llada_lm_head_and_sampler
    if with_head:
        sampled = gen_len if alg == "origin" else masked  # origin samples each position once, when it commits it
        total = total + cost_of(dream_sampler_operators(
            shape, work, masked_rows=batch * masked, sampled_rows=batch * sampled, launches=steps
        ), hardware)
    return DreamEstimate.of(
        total, hardware, work, fidelity=fidelity, steps=steps, forwards=steps, seq_len=work.seq_len,
        logits_positions=head if with_head else 0, temperature=work.temperature, alg=alg, top_p=work.top_p,
        top_k=work.top_k, forward_s=forward.total_time_s, masked_positions=masked, aggregate_ai=total.aggregate_ai,
    )


def dream_step_operators(
    shape: ModelShape, work: Workload, fidelity: Fidelity = "faithful"
) -> tuple[Operator, ...]:
    """The operators of Dream's first step (every generated position masked): what the roofline figure places.
    `work.steps` (None: 1) sets what `origin` samples at that step."""
    forward = forward_operators_of(shape, work, fidelity)
    if not modelling(fidelity).llada_lm_head_and_sampler:
        return forward
    # origin samples the positions it commits: at the first step, the expected share (1 - eps) / steps of them.
    gen_len, steps = work.gen_len, work.steps or 1
    sampled = gen_len if work.dream_alg != "origin" else math.ceil(gen_len * (1 - DREAM_EPS) / steps)
    return forward + dream_sampler_operators(shape, work, masked_rows=work.batch * gen_len,
                                             sampled_rows=work.batch * sampled)
