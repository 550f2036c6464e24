"""The model forwards of a LLaDA generation: vanilla, or through a Fast-dLLM prefix/dual KV cache, eager or
replayed from captured graphs, with classifier-free guidance applied to the logits they return.

A step asks for the logits of one window `[lo, hi)` (the positions its block can commit). Vanilla runs one
full forward and keeps the window's rows. A cached variant runs that full forward at a block's first step,
which also fills the cache (`block_cache.BlockCache`), and at its later steps feeds only the window and what
lies right of it (prefix) or the window alone (dual), attending to the cached keys and values of the rest.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from transformers.masking_utils import create_bidirectional_mask

from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.llada.block_cache import BlockCache
from workers.samplers.llada.graphs import LladaGraphs
from workers.samplers.llada.settings import Cache


class LladaForward:
    """The forwards of one generation over `x` `[B, L]`: the prepared attention mask, the cache (or the
    captured graphs, which bring their own) and which positions a cached forward feeds for the current
    window."""

    def __init__(
        self,
        model: nn.Module,
        attention_mask: Tensor | None,
        prompt_index: Tensor,
        *,
        gen_length: int,
        mask_id: int,
        cfg_scale: float,
        cache: Cache,
        refresh_every_step: bool,
        graphs: LladaGraphs | None,
    ) -> None:
        batch, length = prompt_index.shape
        self.model = model
        self.mask_id = mask_id
        self.cfg_scale = cfg_scale
        self.cache_mode: Cache = cache
        self.refresh_every_step = refresh_every_step
        # Positions the unconditional (CFG) half re-masks: the prompt as it was given, pads included.
        self._prompt_index = prompt_index  # [B, L]
        self.attn = prepare_attention_mask(model, attention_mask, gen_length, double=cfg_scale > 0)
        self.keep: Tensor | int = 0  # logits_to_keep for the window
        layers = model.config.get_text_config(decoder=True).num_hidden_layers
        self.graphs = graphs
        if graphs is not None:
            rows = batch * (2 if cfg_scale > 0 else 1)
            if not graphs.matches(rows, length, cache):
                raise ValueError(
                    f"the captured forwards were built for {graphs.rows} rows of {graphs.length} positions with "
                    f"cache {graphs.cache_mode!r}, not {rows} of {length} with {cache!r}"
                )
            self.cache = graphs.cache  # the graphs write their own cache, which outlives this generation
        else:
            self.cache = BlockCache(layers, length) if cache != "none" else None
        self._feed: tuple[int, int] = (0, 0)  # [start, end): positions a cached forward feeds
        self._feed_positions: Tensor | None = None  # [1, end - start]
        self._feed_keep: Tensor | None = None  # the window's indices within the fed positions

    def set_window(self, lo: int, hi: int, keep: Tensor | int, length: int, device: torch.device) -> None:
        """Take the window `[lo, hi)` of a block and its `logits_to_keep`; a cached forward feeds the window
        and, for a prefix cache, everything right of it."""
        self.keep = keep
        if self.cache is None:
            return
        start, end = lo, (length if self.cache_mode == "prefix" else hi)
        self._feed = (start, end)
        self._feed_positions = torch.arange(start, end, device=device).unsqueeze(0)  # [1, end - start]
        self._feed_keep = torch.arange(lo - start, hi - start, device=device)

    def logits(self, x: Tensor, *, refresh: bool) -> tuple[Tensor, int]:
        """The step's forward over `x` `[B, L]`: logits `[B, W, V]` over the window, CFG applied, and the
        forwards it ran.

        Vanilla: one full forward. Cached, at the block's first step (`refresh`): the same full forward,
        which also fills the cache; at later steps, one forward over the fed positions only. With
        `refresh_every_step` every step refills the cache (a forward whose logits are dropped) and then
        takes its logits from the cached forward, which must then give vanilla's numbers: the tests' proof
        that a cached forward computes what the full one does.
        """
        if self.cfg_scale > 0:
            x = torch.cat([x, x.masked_fill(self._prompt_index, self.mask_id)])  # [2B, L]
        cache, forwards = self.cache, 1
        if self.graphs is not None:
            logits, forwards = self._replayed_logits(x, refresh=refresh)
        elif cache is None:
            # Vanilla LLaDA has no KV cache: use_cache=False keeps transformers from filling one at every step.
            logits = self.model(x, attention_mask=self.attn, use_cache=False, logits_to_keep=self.keep).logits
        elif refresh and not self.refresh_every_step:
            cache.feed_from(0)
            logits = self.model(
                x, attention_mask=self.attn, **cache_kwargs(cache), use_cache=False, logits_to_keep=self.keep
            ).logits
        else:
            if self.refresh_every_step:
                cache.feed_from(0)
                self.model(x, attention_mask=self.attn, **cache_kwargs(cache), use_cache=False, logits_to_keep=1)
                forwards = 2
            start, end = self._feed
            cache.feed_from(start)
            logits = self.model(
                x[:, start:end], attention_mask=self._fed_attention(), position_ids=self._feed_positions, **cache_kwargs(cache),
                use_cache=False, logits_to_keep=self._feed_keep,
            ).logits  # fmt: skip
        if self.cfg_scale > 0:
            cond, uncond = logits.chunk(2, dim=0)
            # Unsupervised classifier-free guidance, as in the official code: uncond + (w + 1)(cond - uncond).
            logits = uncond + (self.cfg_scale + 1) * (cond - uncond)
        return logits, forwards

    def _replayed_logits(self, x: Tensor, *, refresh: bool) -> tuple[Tensor, int]:
        """`logits`' forwards, replayed from the captured graphs: the same inputs, as tensors."""
        graphs = self.graphs
        assert graphs is not None
        keep = self.keep if isinstance(self.keep, Tensor) else None  # None: every position (full_logits)
        if self.cache is None or (refresh and not self.refresh_every_step):
            return graphs.full_logits(x, keep, self.attn), 1
        forwards = 1
        if self.refresh_every_step:
            graphs.full_logits(x, keep, self.attn)
            forwards = 2
        start, end = self._feed
        assert self._feed_positions is not None and self._feed_keep is not None
        return graphs.cached_logits(
            x[:, start:end], self._feed_positions, self._feed_keep, self._fed_attention()
        ), forwards

    def _fed_attention(self) -> Tensor | None:
        """The padding mask's rows of the positions a cached forward feeds: `[B, 1, end - start, L]` (a 4-D
        mask), or the mask as it is."""
        start, end = self._feed
        attn = self.attn
        return attn[:, :, start:end] if attn is not None and attn.ndim == 4 else attn


def prepare_attention_mask(
    model: nn.Module, attention_mask: Tensor | None, gen_length: int, *, double: bool
) -> Tensor | None:
    """The padding mask in the form the model's attention wants, built once for every step.

    The generation region is always attended to (ones), as in the official code; CFG doubles the batch.
    A mask without padding becomes None, which is what transformers would turn it into anyway (after a
    device sync, at every forward). Otherwise transformers' own `create_bidirectional_mask` builds the
    mask for the configured attention kernel (a 4-D mask for sdpa/eager, which later forwards take as is).
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    batch = attention_mask.shape[0]
    ones = torch.ones((batch, gen_length), dtype=attention_mask.dtype, device=attention_mask.device)
    mask = torch.cat([attention_mask, ones], dim=-1)  # [B, L]
    if double:
        mask = torch.cat([mask, mask])  # [2B, L]
    config = model.config
    dtype = next(model.parameters()).dtype
    shape_only = torch.empty((mask.shape[0], mask.shape[1], 0), dtype=dtype, device=mask.device)
    return create_bidirectional_mask(config=config, inputs_embeds=shape_only, attention_mask=mask)
