"""How good an extrapolated diffusion (LLaDA, Dream) latency is: each extrapolated run beside the full run of the same point.

`controls.extrapolation` times the first K steps of a LLaDA generation and extrapolates the rest; its
`check_steps` x `check_batch_sizes` points also run in full in the same sweep. The ratio
extrapolated / full median latency says how far the extrapolation is off at those points (1.0 = exact); where
both runs read an energy counter, the same ratio of their joules per token (the extrapolated run's are scaled
from its timed steps like its latency).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from specs.results import EXTRAPOLATION_TOLERANCE, RunResult, RunStatus


@dataclass(frozen=True)
class ExtrapolationCheck:
    model: str
    batch_size: int
    prompt_length: int
    generation_length: int
    steps: int
    timed_steps: int
    extrapolated_s: float  # median over repetitions
    full_s: float
    extrapolated_joules_per_token: float | None = None  # None: no energy counter on one side
    full_joules_per_token: float | None = None

    @property
    def ratio(self) -> float:
        return self.extrapolated_s / self.full_s

    @property
    def suspect(self) -> bool:
        """Off by more than the tolerance either way: the report leaves such runs out of speedups and B*."""
        return abs(math.log(self.ratio)) > math.log1p(EXTRAPOLATION_TOLERANCE)

    @property
    def energy_ratio(self) -> float | None:
        if self.extrapolated_joules_per_token is None or not self.full_joules_per_token:
            return None
        return self.extrapolated_joules_per_token / self.full_joules_per_token


def _point(result: RunResult) -> str:
    """The run's config without its timed_steps: what an extrapolated run and its full check share."""
    return result.config.model_copy(update={"timed_steps": None}).model_dump_json()


def extrapolation_checks(results: list[RunResult]) -> list[ExtrapolationCheck]:
    """Every (extrapolated, full) pair of ok runs at the same grid point, in a stable order."""
    ok = [r for r in results if r.status == RunStatus.OK and r.samples and r.samples.latency_e2e_s]
    full = {_point(r): r for r in ok if r.samples and r.samples.extrapolated is None and r.config.steps}
    checks = []
    for result in ok:
        extrapolated = result.samples.extrapolated if result.samples else None
        partner = full.get(_point(result)) if extrapolated else None
        if extrapolated is None or partner is None or partner.samples is None:
            continue
        c = result.config
        checks.append(
            ExtrapolationCheck(
                model=c.model.name, batch_size=c.batch_size, prompt_length=c.prompt_length,
                generation_length=c.generation_length, steps=extrapolated.steps, timed_steps=extrapolated.timed_steps,
                extrapolated_s=statistics.median(result.samples.latency_e2e_s),
                full_s=statistics.median(partner.samples.latency_e2e_s),
                extrapolated_joules_per_token=result.energy.joules_per_token if result.energy else None,
                full_joules_per_token=partner.energy.joules_per_token if partner.energy else None,
            )  # fmt: skip
        )
    return sorted(checks, key=lambda k: (k.model, k.batch_size, k.prompt_length, k.generation_length, k.steps))


def format_checks(checks: list[ExtrapolationCheck]) -> str:
    """One line per checked point, e.g. `llada-8b B=16 P=512 G=512 steps=64 (timed 4): 1.93 s vs 1.95 s full, ratio 0.990`,
    ` SUSPECT (...)` where that ratio is off by more than the tolerance, then `; energy 2.71 vs 2.77 J/token, ratio
    0.976` where both runs read an energy counter."""
    lines = ["extrapolated diffusion latency against full generations (ratio = extrapolated / full median; the "
             "report checks every extrapolated run's steps against the full runs at its shape):"]
    for k in checks:
        lines.append(
            f"  {k.model} B={k.batch_size} P={k.prompt_length} G={k.generation_length} steps={k.steps} "
            f"(timed {k.timed_steps}): {k.extrapolated_s:.4g} s vs {k.full_s:.4g} s full, ratio {k.ratio:.3f}"
            + (f" SUSPECT (off by more than {EXTRAPOLATION_TOLERANCE:.0%})" if k.suspect else "")
            + (f"; energy {k.extrapolated_joules_per_token:.3g} vs {k.full_joules_per_token:.3g} J/token, ratio "
               f"{k.energy_ratio:.3f}" if k.energy_ratio is not None else "")
        )
    return "\n".join(lines)
