"""The `small` preset on the GPU for the graph and compiled-decode tests: its matrices redrawn with a wider
spread so predictions are peaked (rounding decides no near-tie), and random prompts of ordinary token ids."""

from __future__ import annotations

from typing import Any

import torch

from specs.schema import Controls, ModelSpec
from tests.gpu.findings import CUDA


def peaked_small(arch: str, dtype: str = "float32") -> Any:
    """The loaded `small` model of `arch` on the GPU, its matrices drawn from N(0, 0.1) (seed 0)."""
    from workers.models.loading import load_model

    spec = ModelSpec(name=f"{arch}-small", arch=arch, source={"synthetic": "small"})
    loaded = load_model(spec, Controls(dtype=dtype, attention="sdpa", device="cuda"), CUDA)
    generator = torch.Generator(device=CUDA).manual_seed(0)
    with torch.no_grad():
        for _, param in sorted(loaded.model.named_parameters()):
            if param.ndim > 1:
                param.normal_(0.0, 0.1, generator=generator)
    return loaded


def random_prompt(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1000, 20000, (batch, length), generator=generator).to(CUDA)
