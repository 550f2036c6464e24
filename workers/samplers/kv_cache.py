"""A KV cache that writes each step in place into buffers sized for the whole generation.

transformers' `DynamicCache` grows by `torch.cat([keys, new], dim=-2)` in every layer at every token, so
decode step t copies the whole cache (2 x layers x B x H_kv x t x D elements): at LLaMA-3-8B, B=32,
t=2048 that is 17 GB of traffic per step, as much again as the weights, exactly where the throughput
crossover with LLaDA is decided. This cache allocates `[B, H_kv, capacity, D]` per layer at the prefill
and copies only the new tokens' keys and values at each step.

It hands attention the same thing a `DynamicCache` would: the first `length` positions, as a view of the
buffer, with the same length and mask sizes, so masks, kernels and outputs are the ones `generate()` gets
(tests/test_ar_sampler.py checks token equality). Unlike transformers' `StaticCache` it never exposes
unwritten positions, so no mask has to hide them and no kernel sees a different key length.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers.cache_utils import Cache, DynamicLayer


class PreallocatedLayer(DynamicLayer):
    """One layer's keys and values in buffers of `capacity` positions; `length` positions written so far."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0
        self._key_buffer: Tensor | None = None
        self._value_buffer: Tensor | None = None

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        batch, heads, _, key_dim = key_states.shape
        value_dim = value_states.shape[-1]
        self.dtype, self.device = key_states.dtype, key_states.device
        self._key_buffer = torch.empty(
            (batch, heads, self.capacity, key_dim), dtype=key_states.dtype, device=key_states.device
        )  # [B, H_kv, capacity, D]
        self._value_buffer = torch.empty(
            (batch, heads, self.capacity, value_dim), dtype=value_states.dtype, device=value_states.device
        )
        self.keys = self._key_buffer[:, :, :0]
        self.values = self._value_buffer[:, :, :0]
        self.is_initialized = True

    def update(self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
        """Write the new positions `[B, H_kv, q, D]` after the cached ones; return all `length` positions."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self._key_buffer is not None and self._value_buffer is not None
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions; {end} were written")
        self._key_buffer[:, :, self.length : end].copy_(key_states)
        self._value_buffer[:, :, self.length : end].copy_(value_states)
        self.length = end
        self.keys = self._key_buffer[:, :, :end]  # [B, H_kv, end, D], a view: nothing is copied
        self.values = self._value_buffer[:, :, :end]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.capacity

    def reset(self) -> None:
        self.length = 0
        if self._key_buffer is not None and self._value_buffer is not None:
            self.keys = self._key_buffer[:, :, :0]
            self.values = self._value_buffer[:, :, :0]

    @property
    def nbytes(self) -> int:
        buffers = (self._key_buffer, self._value_buffer)
        return sum(b.nbytes for b in buffers if b is not None)

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("the decode loop never crops its cache")


class PreallocatedCache(Cache):
    """`num_layers` preallocated layers of `capacity` positions each (prompt + new tokens)."""

    def __init__(self, num_layers: int, capacity: int) -> None:
        super().__init__(layers=[PreallocatedLayer(capacity) for _ in range(num_layers)])

    @property
    def nbytes(self) -> int:
        """Bytes of every layer's buffers: allocated whole at the prefill, so also the cache's peak."""
        return sum(layer.nbytes for layer in self.layers)
