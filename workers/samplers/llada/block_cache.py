"""LLaDA's KV cache for the cached variants: the whole sequence's keys and values, rewritten in part per step.

A masked-diffusion step re-reads the whole sequence, so an exact sampler has nothing to cache. The cached
variants (Fast-dLLM, Wu et al. 2025, arXiv:2505.22618) accept an approximation: the keys and values of
positions a step does not feed are taken from the block's first step, when they were last computed.
One buffer per layer holds all L positions `[B, H_kv, L, D]`:

* a refresh forward (the block's first step) feeds the whole sequence and writes every position;
* a cached forward feeds only positions `[start, end)` (prefix cache: from the window to the end of the
  sequence; dual cache: the window alone), writes their fresh keys and values over the stale ones, and
  its queries attend to the whole buffer. Writing in place is the concatenation `cat(cached, fresh)` done
  without a copy of the cached part.

The buffer is allocated once, at the first refresh, and its size is what `nbytes` reports (the peak the
cache holds: it never grows). A forward replayed as a CUDA graph (`graphs.CapturedForward`) cannot write
at a host offset, which the graph would freeze at its capture's value: `feed_at(positions)` makes every
layer write the fed keys and values at the positions a device tensor holds (`index_copy_`), so one graph
serves every block.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers.cache_utils import Cache, CacheLayerMixin


class BlockCacheLayer(CacheLayerMixin):
    """One layer's keys and values for all `length` positions; `update` writes the fed ones at `start`."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length = length
        self.start = 0
        self.index: Tensor | None = None  # [q] positions the fed keys go to (graph mode); None: from `start`
        self.writes = 0  # update() calls: a cached variant whose attention never called it measured no cache

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        batch, heads, _, key_dim = key_states.shape
        self.dtype, self.device = key_states.dtype, key_states.device
        self.keys = torch.empty(
            (batch, heads, self.length, key_dim), dtype=key_states.dtype, device=key_states.device
        )  # [B, H_kv, L, D]
        self.values = torch.empty(
            (batch, heads, self.length, value_states.shape[-1]), dtype=value_states.dtype, device=value_states.device
        )
        self.is_initialized = True

    def update(self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
        """Write the fed positions' `[B, H_kv, q, D]` at `start`; return all L positions (a view, no copy)."""
        if not self.is_initialized:
            if self.start != 0 or key_states.shape[-2] != self.length:
                raise ValueError("the first forward through a BlockCache must feed the whole sequence")
            self.lazy_initialization(key_states, value_states)
        self.write(key_states, value_states)
        return self.keys, self.values

    def write(self, key_states: Tensor, value_states: Tensor) -> None:
        """Write the fed positions' keys and values at `index` (device positions) or from `start`."""
        assert self.keys is not None and self.values is not None
        if not torch.compiler.is_compiling():  # a host counter: compiled code would recompile on every change
            self.writes += 1
        if self.index is not None:  # positions on the device: what a replayed graph can vary
            self.keys.index_copy_(2, self.index, key_states)
            self.values.index_copy_(2, self.index, value_states)
            return
        end = self.start + key_states.shape[-2]
        if end > self.length:
            raise ValueError(f"the cache holds {self.length} positions; positions up to {end} were fed")
        self.keys[:, :, self.start : end].copy_(key_states)
        self.values[:, :, self.start : end].copy_(value_states)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length, 0  # queries always attend to every position

    def get_seq_length(self) -> int:
        return self.start  # positions before the fed ones (transformers reads it as the query offset)

    def get_max_length(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        if not self.is_initialized:
            return 0
        assert self.keys is not None and self.values is not None
        return self.keys.nbytes + self.values.nbytes


class BlockCache(Cache):
    """`num_layers` layers of `length` positions; `feed_from(start)` says where the next forward's positions go."""

    def __init__(self, num_layers: int, length: int) -> None:
        super().__init__(layers=[BlockCacheLayer(length) for _ in range(num_layers)])

    def feed_from(self, start: int) -> None:
        for layer in self.layers:
            layer.start, layer.index = start, None

    def feed_at(self, positions: Tensor) -> None:
        """The next forward's keys and values go to `positions` `[q]` (a device tensor, e.g. a graph's input)."""
        for layer in self.layers:
            layer.index = positions

    @property
    def nbytes(self) -> int:
        """Bytes held by the keys and values of every layer (0 before the first refresh)."""
        return sum(layer.nbytes for layer in self.layers)
