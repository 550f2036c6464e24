"""Block diffusion's KV cache: one buffer per layer, its committed prefix growing a block at a time.

Fast-dLLM v2 (arXiv:2509.26328) keeps an autoregressive KV cache of every finished block: a forward inside the
current block attends to the cached prefix and to the block's own fresh keys and values, and only the block's
completing forward appends the block to the cache. The official code concatenates the prefix with the block's keys
at every forward (`torch.cat`, a copy of the whole prefix) and grows the cache the same way. Here one buffer of
every position the generation will reach holds both: a forward writes its keys and values at their positions and
its queries attend to the positions `[0, visible)`, a view of the buffer, so:

* an in-block forward writes the block at `[C, C + block)` (C: the cached prefix) and attends `[0, C + block)`,
  which is `cat(prefix, block)` without the copy; it leaves C as it is;
* the completing forward writes the same positions and moves C past them: the prefix has grown by the block;
* the sub-block cache (the official `use_block_cache`) is the block's part of the same buffer: a forward of one
  sub-block writes only its own positions and attends to the rest of the block as the last full forward left it,
  which is what the official in-place write into `block_past_key_values` does.

Writing at a host offset (`feed_from`) serves eager forwards; a captured graph writes at positions held in a
device tensor (`feed_at`), so one graph serves every sub-block of a block. What a forward attends to is fixed per
forward (`visible`): a captured graph is one per block.
"""

from __future__ import annotations

from torch import Tensor

from workers.samplers.llada.block_cache import BlockCache, BlockCacheLayer


class BlockDiffusionCacheLayer(BlockCacheLayer):
    """One layer's keys and values for `length` positions; a forward writes the fed ones and sees `[0, visible)`."""

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.visible = 0

    def update(self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
        """Write the fed positions' `[B, H_kv, q, D]` (at `start`, or at `index`); return `[B, H_kv, visible, D]`."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.write(key_states, value_states)
        return self.keys[:, :, : self.visible], self.values[:, :, : self.visible]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.visible, 0


class BlockDiffusionCache(BlockCache):
    """`num_layers` layers of `length` positions; `feed_from` / `feed_at` say where the next forward writes, and
    `attend` how many positions its queries see."""

    def __init__(self, num_layers: int, length: int) -> None:
        super(BlockCache, self).__init__(layers=[BlockDiffusionCacheLayer(length) for _ in range(num_layers)])

    def attend(self, visible: int) -> None:
        for layer in self.layers:
            layer.visible = visible
