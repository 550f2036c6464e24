"""What the estimates of both architectures share: the generation they cost and its totals."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from roofline.fidelity import Fidelity
from roofline.hardware import HardwareProfile
from roofline.operators import OpClass
from roofline.phase import PhaseCost


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
        cls, total: PhaseCost, hardware: HardwareProfile, *, fidelity: Fidelity, batch: int, prompt_len: int,
        gen_len: int, **fields: Any,
    ) -> Self:
        """The estimate of a generation whose cost sums to `total` on `hardware`; `fields`: the subclass's own."""
        return cls(
            fidelity=fidelity, hardware=hardware.name, batch=batch, prompt_len=prompt_len, gen_len=gen_len,
            total_s=total.total_time_s, breakdown_s=total.time_s, flops=total.total_flops, bytes_=total.total_bytes,
            **fields,
        )

