"""LLaMA's compiled decode over only the KV positions written so far, with each KV head shared, not copied.

The compiled decode step over transformers' `StaticCache` (`decode_attention: static`) costs far more than
the bytes a decode step must read. Two reasons, both in the attention:

* it attends over all `capacity` positions every step (unwritten ones masked), though only the prompt and
  the tokens so far are live;
* with a mask (always, over a static cache) and under `torch.compile`, transformers' sdpa path expands
  LLaMA-3's grouped KV heads with `repeat_kv` (`sdpa_attention.py`: the grouped-query shortcut is taken
  only without a mask, or for one query outside a compiled region), so each step reads the cache, writes
  a copy 4x its size (32 query heads over 8 KV heads) and reads that: about 9x the cache's bytes.

This cache fixes both for the decode step (`decode_attention: live`), at the same numbers up to rounding:

* the attended length `live` is the written length rounded up to a multiple of `bucket` (256 by default),
  a host integer set before each step, so the compiled step specialises on it: one graph per bucket,
  reused by every step inside it (at P=512, N=256 the one bucket is 768; at P=1024, N=1024, four);
* the single query's heads are grouped under their KV head, `[B, H, 1, D]` → `[B, H_kv, G, D]`, so attention
  runs as `H_kv` heads of `G` queries over the unexpanded keys and values: each live byte is read once
  (flash-decoding's GQA packing; transformers' own `pack_gqa` outside compile);
* the mask `[B, 1, 1, live]` is built inside the step from the write position (a device tensor, filled
  before each step) and the padding mask: no host integer that changes per step enters the graph.

The prefill runs eagerly through the model's configured kernel over the prompt's positions only, as the
eager loop's preallocated cache gives them. `SyncFreeLlamaAttention` (workers/models/attention.py) hands a layer's
attention to `cache.attend` whenever the cache it receives has one: that is how the kernel is chosen per
call, without touching the model, which the eager variants of the same run share.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import eager_attention_forward

LIVE_BUCKET = 256  # positions: the attended length is rounded up to a multiple of this
KERNEL = "sdpa over the live prefix in {bucket}-position buckets, query heads grouped per KV head"


def bucketed(length: int, *, bucket: int, capacity: int) -> int:
    """The attended length for `length` written positions: the next multiple of `bucket`, at most `capacity`."""
    return min(capacity, -(-length // bucket) * bucket)


class LiveLayer(CacheLayerMixin):
    """One layer's keys and values `[B, H_kv, capacity, D]`, allocated at the prefill (eagerly), never moved."""

    is_compileable = True

    def __init__(self, owner: LiveCache) -> None:
        super().__init__()
        self.owner = owner
        self.prefilled = 0  # positions the prefill wrote (transformers reads it as the prefill's query offset)
        self.writes = 0  # host-side writes (the eager prefill's): the check that attention reached the cache

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        batch, heads, _, key_dim = key_states.shape
        capacity = self.owner.capacity
        self.dtype, self.device = key_states.dtype, key_states.device
        self.keys = torch.zeros((batch, heads, capacity, key_dim), dtype=key_states.dtype, device=self.device)
        self.values = torch.zeros(
            (batch, heads, capacity, value_states.shape[-1]), dtype=value_states.dtype, device=self.device
        )
        # The compiled step writes these in place: fixed addresses, which CUDA graphs require.
        torch._dynamo.mark_static_address(self.keys)
        torch._dynamo.mark_static_address(self.values)
        self.is_initialized = True

    def update(self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
        """Prefill `[B, H_kv, P, D]`: written at 0, the P positions returned. Decode `[B, H_kv, 1, D]`: written at
        the owner's device position, the first `live` positions returned (views, nothing copied)."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self.keys is not None and self.values is not None
        written = key_states.shape[-2]
        if written > 1:
            self.keys[:, :, :written].copy_(key_states)
            self.values[:, :, :written].copy_(value_states)
            if not torch.compiler.is_compiling():
                self.writes += 1
                self.prefilled = written
            return self.keys[:, :, :written], self.values[:, :, :written]
        self.keys.index_copy_(2, self.owner.position, key_states)
        self.values.index_copy_(2, self.owner.position, value_states)
        live = self.owner.live
        return self.keys[:, :, :live], self.values[:, :, :live]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return query_length, 0  # only the prefill builds a mask from sizes: over its own positions

    def get_seq_length(self) -> int:
        return self.prefilled  # read only by the eager prefill's mask (decode steps bring their own mask)

    def get_max_length(self) -> int:
        return self.owner.capacity

    @property
    def nbytes(self) -> int:
        if not self.is_initialized:
            return 0
        return self.keys.nbytes + self.values.nbytes


class LiveCache(Cache):
    """`num_layers` live layers of `capacity` positions, and the attention that reads only the live ones."""

    def __init__(self, num_layers: int, capacity: int, *, device: torch.device, bucket: int = LIVE_BUCKET) -> None:
        super().__init__(layers=[LiveLayer(self) for _ in range(num_layers)])
        self.capacity = capacity
        self.bucket = bucket
        self.prefill_length = 0
        self.live = capacity  # the attended length of the next decode step (a host int: one graph per value)
        self.position = torch.zeros(1, dtype=torch.long, device=device)  # [1]: where the next token is written
        torch._dynamo.mark_static_address(self.position)
        self._columns = torch.arange(capacity, device=device)  # [capacity]
        torch._dynamo.mark_static_address(self._columns)
        self.padding: Tensor | None = None  # [B, capacity] bool, True on the positions a row may attend

    def begin(self, prefill_length: int, padding: Tensor | None) -> None:
        """A new generation of `prefill_length` prompt positions; `padding` `[B, capacity]` (1 = token) or None."""
        self.prefill_length = prefill_length
        self.padding = None if padding is None else padding.to(torch.bool)
        for layer in self.layers:
            layer.prefilled = 0

    def step(self, length: int) -> None:
        """Before the decode step that makes the sequence `length` long: its token goes to position length - 1,
        and attention covers the bucket holding it. One device fill, no sync."""
        self.position.fill_(length - 1)
        self.live = bucketed(length, bucket=self.bucket, capacity=self.capacity)

    def decode_mask(self) -> Tensor:
        """`[B or 1, 1, 1, live]` bool: the written positions (up to the new one) that are not padding."""
        live = self.live
        mask = (self._columns[:live] <= self.position).view(1, 1, 1, live)
        if self.padding is not None:
            mask = mask & self.padding[:, None, None, :live]
        return mask

    def attend(
        self, module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None
    ) -> Tensor:
        """Attention for one layer: `[B, H, q, D]` queries → `[B, q, H, D]`. A decode step's single query is
        grouped per KV head over the live keys; the prefill runs the model's configured kernel."""
        batch, heads, queries, dim = query.shape
        if queries > 1:
            kernel = ALL_ATTENTION_FUNCTIONS.get_interface(module.config._attn_implementation, eager_attention_forward)
            output, _ = kernel(module, query, key, value, attention_mask, dropout=0.0, scaling=module.scaling)
            return output
        kv_heads = key.shape[1]
        grouped = query.reshape(batch, kv_heads, heads // kv_heads, dim)  # [B, H_kv, G, D]: G queries per KV head
        output = torch.nn.functional.scaled_dot_product_attention(
            grouped, key, value, attn_mask=attention_mask, scale=module.scaling
        )  # [B, H_kv, G, D]
        return output.reshape(batch, heads, 1, dim).transpose(1, 2)  # [B, 1, H, D]

    def reset(self) -> None:
        """Nothing to clear: a generation's prefill overwrites the prompt's positions and each step its own."""

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)
