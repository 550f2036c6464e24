"""The forwards of one block-diffusion generation: what each kind feeds, where it writes the cache, what it attends.

Four kinds, as the official `generate` calls its model (Fast_dLLM_QwenForCausalLM, arXiv:2509.26328):

* `prefill`: the prompt's whole blocks, block-causal at the block length (a query sees its own block and every
  earlier one), written to the cache;
* `block`: the current block, attending to the cached prefix and to itself, its keys written over the block's
  part of the buffer but not committed to the prefix;
* `sub` (the sub-block cache): one sub-block, attending to the prefix and to the block as the last `block` forward
  left it (no mask, as the official call passes none);
* `complete`: the full block once more, its keys committed to the prefix.

The official in-block forwards (`block`, and the sub-block cache's full forwards) do not pass generate's block size,
so they mask at the forward's default block of 32 (`OFFICIAL_FORWARD_BLOCK`): a block that is a divisor of 32 is
seen whole, a longer one (64) is split into block-causal halves. Positions are cache positions, as the official
`cache_position` counts them from the cache's length.

The token choice reads the logits of the sub-block's positions shifted by one (position i from the hidden state at
i - 1, the block's first position from its own, as `cat([logits[:, :1], logits[:, :-1]])` does), which
`logits_to_keep` selects without projecting the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from transformers.masking_utils import create_bidirectional_mask

from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.block_diffusion.cache import BlockDiffusionCache
from workers.samplers.block_diffusion.graphs import BlockDiffusionGraphs

Kind = Literal["prefill", "block", "sub", "complete"]
# Fast_dLLM_QwenModel.forward's default `block_size`, which generate leaves in place for its in-block forwards.
OFFICIAL_FORWARD_BLOCK = 32


@dataclass(frozen=True)
class ForwardPlan:
    """One forward, decided on the host before it runs."""

    kind: Kind
    fed: tuple[int, int]  # [lo, hi) of the sequence the forward feeds
    cache_start: int  # the cache position of the first fed one (its RoPE position)
    visible: int  # cache positions its queries attend to: [0, visible)
    keep: tuple[int, int]  # [lo, hi) of the fed positions whose (shifted) logits are read
    mask_block: int | None  # block-causal granularity of its mask (None: it attends to every visible position)
    commit: tuple[int, int] = (0, 0)  # [lo, hi) of the sequence it commits into (block, sub)
    append_at: int | None = None  # where its next-token prediction goes (prefill on a block boundary, complete)
    grows_cache: bool = False  # whether the fed positions join the cached prefix (prefill, complete)
    sub_block_offset: int | None = None  # sub: where the sub-block starts in its block

    @property
    def record(self) -> list[object]:
        """What the official forward log records: fed positions, whether the cache grows, the sub-block's offset."""
        return [self.fed[1] - self.fed[0], self.grows_cache, self.sub_block_offset]


class BlockDiffusionForward:
    """Runs the plans of one generation over `x` `[B, L]`, eagerly or from captured graphs, into one cache."""

    def __init__(
        self, model: nn.Module, cache: BlockDiffusionCache, graphs: BlockDiffusionGraphs | None = None
    ) -> None:
        self.model = model
        self.cache = cache
        self.graphs = graphs
        self.device = next(model.parameters()).device
        self._aranges: dict[tuple[int, int], Tensor] = {}
        self._keeps: dict[tuple[int, int], Tensor] = {}
        self._masks: dict[tuple[int, int, int, int], Tensor | None] = {}

    def logits(self, plan: ForwardPlan, x: Tensor) -> Tensor:
        """The plan's forward over `x`; logits `[B, keep, V]` (keep: the plan's kept positions)."""
        lo, hi = plan.fed
        fed = x[:, lo:hi]  # [B, n]
        positions = self._arange(plan.cache_start, hi - lo).unsqueeze(0)  # [1, n]
        keep = self._keep(plan)  # [W]
        mask = self._mask(plan)
        if self.graphs is not None and plan.kind != "prefill":
            return self.graphs.logits(fed, positions, keep, self._arange(0, plan.visible), mask)
        self.cache.feed_from(plan.cache_start)
        self.cache.attend(plan.visible)
        return self.model(
            fed, attention_mask=mask, position_ids=positions, **cache_kwargs(self.cache), use_cache=False,
            logits_to_keep=keep,
        ).logits  # fmt: skip

    def _keep(self, plan: ForwardPlan) -> Tensor:
        """The hidden states whose logits the plan reads: the last fed one (the next-token head), or those predicting
        the kept positions, i - 1 for position i and 0 for position 0 (the official shift)."""
        lo, hi = plan.keep
        if plan.append_at is not None or plan.kind == "prefill":
            return self._arange(hi - 1, 1)
        if (lo, hi) not in self._keeps:
            self._keeps[lo, hi] = torch.arange(lo - 1, hi - 1, device=self.device).clamp_(min=0)
        return self._keeps[lo, hi]

    def _arange(self, start: int, length: int) -> Tensor:
        key = (start, length)
        if key not in self._aranges:
            self._aranges[key] = torch.arange(start, start + length, device=self.device)
        return self._aranges[key]

    def _mask(self, plan: ForwardPlan) -> Tensor | None:
        """A block-causal mask over the fed queries (at their cache positions) and the visible keys, in the form the
        model's kernel takes; None where every query sees every visible key."""
        if plan.mask_block is None:
            return None
        n = plan.fed[1] - plan.fed[0]
        key = (plan.cache_start, n, plan.visible, plan.mask_block)
        if key not in self._masks:
            q0, block = plan.cache_start, plan.mask_block
            if (plan.visible - 1) // block <= q0 // block:  # the last key's block is no later than the first query's
                self._masks[key] = None
            else:
                config = self.model.config
                dtype = next(self.model.parameters()).dtype

                def block_causal(batch_idx: Tensor, head_idx: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
                    return (q_idx + q0) // block >= kv_idx // block

                self._masks[key] = create_bidirectional_mask(
                    config=config, inputs_embeds=torch.empty((1, n, 0), dtype=dtype, device=self.device),
                    attention_mask=None, encoder_hidden_states=torch.empty((1, plan.visible, 0), dtype=dtype, device=self.device),
                    and_mask_function=block_causal,
                )  # fmt: skip
        return self._masks[key]

