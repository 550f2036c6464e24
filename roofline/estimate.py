"""What the estimates of every family share: the generation they cost and its totals."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from roofline.fidelity import Fidelity
from roofline.hardware import HardwareProfile
from roofline.operators import OpClass
from roofline.phase import PhaseCost
from roofline.workload import Workload


class Estimate(BaseModel):
    """Predicted cost of one generation of `gen_len` tokens after a `prompt_len` prompt, per the chosen fidelity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fidelity: Fidelity
    hardware: str
    batch: int
    prompt_len: int
    gen_len: int
    total_s: float
    breakdown_s: dict[OpClass, float]
    flops: int
    bytes_: int

    @classmethod
    def of(
        cls, total: PhaseCost, hardware: HardwareProfile, work: Workload, *, fidelity: Fidelity, **fields: Any
    ) -> Self:
        """The estimate of `work` whose cost sums to `total` on `hardware`; `fields`: the subclass's own."""
        return cls(
            fidelity=fidelity, hardware=hardware.name, batch=work.batch, prompt_len=work.prompt_len,
            gen_len=work.gen_len,
            total_s=total.total_time_s, breakdown_s=total.time_s, flops=total.total_flops, bytes_=total.total_bytes,
            **fields,
        )



class DiffusionEstimate(Estimate):
    """An estimate of a diffusion family: its generation runs as forwards, each one step of the sampler."""

    forwards: int  # model forwards costed
    aggregate_ai: float

    @property
    def mean_step_s(self) -> float:
        """Mean time of one forward (a step that ran), the sampler's work on its logits included."""
        return self.total_s / self.forwards
