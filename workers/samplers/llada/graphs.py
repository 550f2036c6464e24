"""LLaDA's step forwards replayed as CUDA graphs (the `graph` variant), kept between generations of one shape.

A LLaDA step's shapes are static within a block and mostly across blocks: the vanilla forward always feeds
the whole sequence `[B, L]` and keeps the block's logits; a cached variant's refresh forward (a block's first
step) is the same forward writing the KV cache at every position, and its later steps feed the block alone
(dual cache: one shape for every block) or the block and what lies right of it (prefix cache: one shape
per block). Each kind is a `graphs.CapturedForward`; every tensor a forward varies by (tokens, kept logit
rows, padding mask rows, positions written in the cache) is one of its inputs, so a graph captured at one
block replays correctly at the next.

The graphs write the `BlockCache` held here, allocated once, at the first capture, and reused (never
reset: a block's refresh forward rewrites every position) by every generation of the run: a graph
records the addresses it writes, so the cache must outlive the generations that replay it. Both kinds share
one memory pool and one static output per logits shape (`graphs.CapturedForward`), so a prefix cache's
per-block graphs hold one `[rows, W, V]` output between them, not one each.

Capturing is preparation (`workers/measure/preparation.py`): the ledger given here times it, and refuses it
inside a timed repetition.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.llada.block_cache import BlockCache
from workers.measure.preparation import Preparation
from workers.samplers.graphs import CapturedForward, Outputs, shared_pool

ALL_POSITIONS = 0  # logits_to_keep=0: every position (full_logits), a graph of its own


class LladaGraphs:
    """The captured forwards (and the KV cache they write) of one batch shape: `rows` sequences (CFG's
    doubled batch included) of `length` positions, for the cache mode `cache` ("none", "prefix", "dual")."""

    def __init__(
        self, model: nn.Module, *, rows: int, length: int, cache: str, preparation: Preparation | None = None
    ) -> None:
        self.model = model
        self.rows = rows
        self.length = length
        self.cache_mode = cache
        device = next(model.parameters()).device
        layers = model.config.get_text_config(decoder=True).num_hidden_layers
        self.cache = BlockCache(layers, length) if cache != "none" else None
        self._every_position = torch.arange(length, device=device)  # [L]: where a refresh writes
        self.preparation = preparation if preparation is not None else Preparation()
        self.outputs: Outputs = {}
        pool, shape = shared_pool(device), f"{rows} rows x {length} positions"
        self.full = CapturedForward(
            self._full, device, name=f"LLaDA full forward ({shape})", pool=pool, outputs=self.outputs,
            preparation=self.preparation,
        )  # fmt: skip
        self.cached = None
        if self.cache is not None:
            self.cached = CapturedForward(
                self._cached, device, name=f"LLaDA {cache}-cache forward ({shape})", pool=pool, outputs=self.outputs,
                preparation=self.preparation,
            )  # fmt: skip

    def matches(self, rows: int, length: int, cache: str) -> bool:
        return (self.rows, self.length, self.cache_mode) == (rows, length, cache)

    @property
    def output_bytes(self) -> int:
        """Bytes of the static outputs every graph here shares (one per logits shape)."""
        return sum(t.nbytes for t in self.outputs.values())

    @property
    def graphs(self) -> int:
        return self.full.graphs + (self.cached.graphs if self.cached is not None else 0)

    def full_logits(self, x: Tensor, keep: Tensor | None, attn: Tensor | None) -> Tensor:
        """Vanilla's forward (a cached variant's refresh: it also writes every position of the cache):
        x `[rows, L]`, keep `[W]` (None: every position) → logits `[rows, W, V]`."""
        return self.full(x, keep, attn, self._every_position if self.cache is not None else None)

    def cached_logits(self, x_fed: Tensor, positions: Tensor, keep: Tensor, attn_rows: Tensor | None) -> Tensor:
        """A cached step: x_fed `[rows, n]` at positions `[1, n]`, keep `[W]` (indices within the fed
        positions), attn_rows `[rows, 1, n, L]` or None → logits `[rows, W, V]`."""
        assert self.cached is not None, "a vanilla run has no cached forward"
        return self.cached(x_fed, positions, keep, attn_rows)

    def _full(self, x: Tensor, keep: Tensor | None, attn: Tensor | None, write: Tensor | None) -> Tensor:
        cache = {}
        if self.cache is not None:
            assert write is not None
            self.cache.feed_at(write)
            cache = cache_kwargs(self.cache)
        return self.model(
            x, attention_mask=attn, **cache, use_cache=False,
            logits_to_keep=ALL_POSITIONS if keep is None else keep,
        ).logits  # fmt: skip

    def _cached(self, x_fed: Tensor, positions: Tensor, keep: Tensor, attn_rows: Tensor | None) -> Tensor:
        assert self.cache is not None
        self.cache.feed_at(positions[0])
        return self.model(
            x_fed, attention_mask=attn_rows, position_ids=positions, **cache_kwargs(self.cache), use_cache=False,
            logits_to_keep=keep,
        ).logits  # fmt: skip
