"""How many runs a spec plans, counted from its axes before a single run is made, and the limits a plan may not
pass: a spec of a million runs (or 10**23 sessions) is one line naming the axes that multiply, at once, rather
than minutes and gigabytes of planning (or an OverflowError) before anything is said."""

from __future__ import annotations

from dataclasses import dataclass

from specs.loader import SpecError
from specs.schema import ExperimentSpec, ModelSpec

# The shipped specs plan at most 63 runs, and the paper's 54 take 28 h on one A100: ten thousand runs is more than
# any sweep this package can finish, and planning them takes a few seconds.
MAX_PLANNED_RUNS = 10_000
# Every run carries the ids of its prompts; more prompts than this is no sweep's, and each run would hold them all.
MAX_PROMPTS = 100_000


class PlanTooLargeError(SpecError):
    """A spec whose plan is over a stated limit; the message names the axes that multiply."""


@dataclass(frozen=True)
class ModelCount:
    """One model's runs in one session, as the product of the axes that make them."""

    model: str
    factors: tuple[tuple[str, int], ...]
    extra: int = 0  # controls.extrapolation's check points, run in full besides their timed runs

    @property
    def runs(self) -> int:
        total = 1
        for _, n in self.factors:
            total *= n
        return total + self.extra

    def describe(self) -> str:
        product = " × ".join(f"{axis} {n:,}" for axis, n in self.factors)
        return f"{self.model} {self.runs:,} ({product}{f' + {self.extra:,} extrapolation checks' if self.extra else ''})"


def model_counts(spec: ExperimentSpec) -> list[ModelCount]:
    """Each model's runs in one session (orchestrator/plan.py makes exactly these), never expanded."""
    pairs, batches = len(spec.grid.length_pairs()), len(spec.grid.batch_sizes)
    return [ModelCount(m.name, (("grid.batch_sizes", batches), ("lengths", pairs), *_sampler_factors(spec, m)),
                       pairs * _extrapolation_checks(spec, m)) for m in spec.models]


def _sampler_factors(spec: ExperimentSpec, model: ModelSpec) -> tuple[tuple[str, int], ...]:
    blocks = spec.block_diffusion_axes(model)
    if blocks is not None:
        return (("block_diffusion.block_lengths", len(blocks.block_lengths)),
                ("block_diffusion.sub_block_lengths", len(blocks.sub_block_lengths)),
                ("block_diffusion.thresholds", len(blocks.thresholds)), ("block_diffusion.impl", len(blocks.impl)))
    dream = spec.dream_axes(model)
    if dream is not None:
        return ("dream.steps", len(dream.steps)), ("dream.algs", len(dream.algs)), ("dream.impl", len(dream.impl))
    axes = spec.llada_axes(model)
    if axes is None:
        return (("grid.llama.impl", len(spec.grid.llama.impl) if spec.grid.llama is not None else 1),)
    settings = sum(len([s for s in axes.steps if impl.steps is None or s in impl.steps]) for impl in axes.impl)
    return (("llada.steps × impl", settings), ("llada.block_lengths", len(axes.block_lengths)),
            ("llada.remasking", len(axes.remasking)), ("llada.cfg_scales", len(axes.cfg_scales)))


def _extrapolation_checks(spec: ExperimentSpec, model: ModelSpec) -> int:
    """Per length pair: the diffusion runs controls.extrapolation also runs in full (plan._with_extrapolation):
    those longer than its timed steps at a check point, but an accelerated LLaDA variant's and block diffusion's,
    which run in full."""
    extrapolation = spec.controls.extrapolation
    if extrapolation is None:
        return 0
    batches = len(set(extrapolation.check_batch_sizes or spec.grid.batch_sizes) & set(spec.grid.batch_sizes))

    def checked(steps: list[int]) -> int:
        return len([s for s in steps if s > extrapolation.timed_steps and s in extrapolation.check_steps])

    dream, axes = spec.dream_axes(model), spec.llada_axes(model)
    if dream is not None:
        return batches * checked(dream.steps) * len(dream.algs) * len(dream.impl)
    if axes is None:
        return 0
    steps = sum(checked([s for s in axes.steps if impl.steps is None or s in impl.steps])
                for impl in axes.impl if not impl.is_accelerated)
    return batches * steps * len(axes.block_lengths) * len(axes.remasking) * len(axes.cfg_scales)


def planned_count(spec: ExperimentSpec) -> int:
    return spec.controls.sessions * sum(count.runs for count in model_counts(spec))


def refuse_oversized(spec: ExperimentSpec) -> None:
    """PlanTooLargeError, before anything is expanded, for a plan over MAX_PLANNED_RUNS runs (naming what
    multiplies) or prompts over MAX_PROMPTS."""
    if spec.prompts.count > MAX_PROMPTS:
        raise PlanTooLargeError(f"prompts.count: {spec.prompts.count:,} prompts, over the limit of {MAX_PROMPTS:,} a "
                                "run may carry; measure on fewer prompts")
    counts = model_counts(spec)
    total = spec.controls.sessions * sum(count.runs for count in counts)
    if total <= MAX_PLANNED_RUNS:
        return
    sessions = f"controls.sessions {spec.controls.sessions:,} × " if spec.controls.sessions > 1 else ""
    raise PlanTooLargeError(
        f"the spec plans {total:,} runs, over the limit of {MAX_PLANNED_RUNS:,} (nothing was planned): {sessions}"
        f"per session {', '.join(c.describe() for c in counts)}; trim the largest of these axes, or split the "
        "sweep into several specs"
    )
