"""LLaMA's decode step under `torch.compile`, over a static KV cache kept between generations of one shape.

The eager decode loop pays, per token, one host dispatch per operator (hundreds per layer), which is what
bounds it at small batch (gpt-fast, pytorch-labs: "static KV cache + torch.compile"). Compiling the step
fuses the operators (inductor) and, on CUDA, replays it as a CUDA graph (`mode="reduce-overhead"`). Both
need the step's shapes and tensor addresses fixed: keys and values live in transformers' `StaticCache`
(all `capacity` positions, unwritten ones hidden by the causal mask), allocated once per shape and reset,
never reallocated, between generations, so one compilation serves every generation of a run.

Compilation happens on the first decode call, which the scenario runs in its warm-ups (never timed); its
duration is `compile_s`.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor, nn
from transformers import StaticCache

from workers.cache_kwarg import cache_kwargs

LAST_POSITION_ONLY = 1


class CompiledDecode:
    """A compiled decode forward and the `StaticCache` it writes, for batches of `batch` rows and `capacity`
    positions (prompt + new tokens)."""

    def __init__(self, model: nn.Module, *, batch: int, capacity: int) -> None:
        self.model = model
        self.batch = batch
        self.capacity = capacity
        self.cache = StaticCache(config=model.config.get_text_config(decoder=True), max_cache_len=capacity)
        device = next(model.parameters()).device
        # CUDA graphs on GPU; on the CPU inductor's fused C++ kernels (no graphs to replay there).
        mode = "reduce-overhead" if device.type == "cuda" else None
        self._step = torch.compile(self._forward, mode=mode, fullgraph=True, dynamic=False)
        self.compile_s: float | None = None  # the first call's wall time: tracing and compiling

    def reset(self) -> None:
        """Forget the previous generation; the buffers (and their addresses) stay."""
        self.cache.reset()

    def matches(self, batch: int, capacity: int) -> bool:
        return self.batch == batch and self.capacity == capacity

    def prefill(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """The prompt's forward, eager (its shape is used once per generation), filling the cache."""
        return self._forward(input_ids, position_ids, attention_mask)

    def decode(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """One compiled decode forward `[B, 1]` → last logits `[B, 1, V]`."""
        if self.compile_s is not None:
            return self._step(input_ids, position_ids, attention_mask)
        start = time.perf_counter()
        logits = self._step(input_ids, position_ids, attention_mask)
        if logits.device.type == "cuda":
            torch.cuda.synchronize(logits.device)
        self.compile_s = time.perf_counter() - start
        return logits

    def _forward(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        # The 2-D padding mask spans all `capacity` positions: the static cache's keys are always that long.
        return self.model(
            input_ids, attention_mask=attention_mask, position_ids=position_ids, **cache_kwargs(self.cache),
            use_cache=True, logits_to_keep=LAST_POSITION_ONLY,
        ).logits  # fmt: skip

    @property
    def cache_bytes(self) -> int:
        return sum(
            layer.keys.nbytes + layer.values.nbytes for layer in self.cache.layers if getattr(layer, "is_initialized", False)
        )
