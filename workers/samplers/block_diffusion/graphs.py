"""Block diffusion's in-block forwards replayed as CUDA graphs (the `graph` variant), kept between generations.

Every forward inside a block has a shape fixed by the block: the whole block or one sub-block fed, the logits of a
sub-block's positions or of the last one kept, and the cached prefix plus the block attended. What varies between
the forwards of a block (which sub-block's logits, where a sub-block writes its keys) is an input tensor, so one
captured forward (`graphs.CapturedForward`) per kind of forward serves the whole block; what a forward attends to
grows by a block per block, so each block has its own (its length is the shape of an input, `visible`). A generation
of n blocks captures at most 3n signatures, in its first (warm-up) generation; later generations of the batch shape
replay them. The prefill, once per generation, stays eager.

The graphs write the `BlockDiffusionCache` held here, allocated at the first generation and never reallocated: a
graph records the addresses it writes. Its positions are written at device indices (`feed_at`), each forward's own.
On a CPU the forwards are inductor-compiled instead (graphs.py). Capturing is preparation
(`workers/measure/preparation.py`), timed into the run's `preparation_s`.
"""

from __future__ import annotations

from torch import Tensor, nn

from workers.measure.preparation import Preparation
from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.block_diffusion.cache import BlockDiffusionCache
from workers.samplers.graphs import CapturedForward, Outputs, shared_pool


class BlockDiffusionGraphs:
    """The captured in-block forwards of one batch shape (`rows` sequences) and the cache they write."""

    def __init__(self, model: nn.Module, *, rows: int, preparation: Preparation | None = None) -> None:
        self.model = model
        self.rows = rows
        self.cache: BlockDiffusionCache | None = None
        device = next(model.parameters()).device
        self.preparation = preparation if preparation is not None else Preparation()
        self.outputs: Outputs = {}
        self.forward = CapturedForward(
            self._forward, device, name=f"block-diffusion forward ({rows} rows)", pool=shared_pool(device),
            outputs=self.outputs, preparation=self.preparation,
        )  # fmt: skip

    def prepare(self, rows: int, length: int) -> BlockDiffusionCache:
        """The cache a generation of `rows` sequences over `length` cache positions writes: made at the first one,
        the same buffers for every later one (whose shape must match)."""
        if self.cache is None:
            layers = self.model.config.get_text_config(decoder=True).num_hidden_layers
            self.cache = BlockDiffusionCache(layers, length)
        if (rows, length) != (self.rows, self.cache.layers[0].length):
            raise ValueError(
                f"the captured forwards were built for {self.rows} rows of {self.cache.layers[0].length} cached "
                f"positions, not {rows} of {length}"
            )
        return self.cache

    @property
    def graphs(self) -> int:
        """Signatures captured (compiled) so far."""
        return self.forward.graphs

    @property
    def output_bytes(self) -> int:
        return sum(t.nbytes for t in self.outputs.values())

    def logits(self, fed: Tensor, positions: Tensor, keep: Tensor, visible: Tensor, mask: Tensor | None) -> Tensor:
        """fed `[rows, n]` at cache positions `[1, n]`, keep `[W]`, visible `[V]` (its length: the positions attended),
        mask or None → logits `[rows, W, vocab]`, a static buffer the next replay overwrites."""
        return self.forward(fed, positions, keep, visible, mask)

    def _forward(self, fed: Tensor, positions: Tensor, keep: Tensor, visible: Tensor, mask: Tensor | None) -> Tensor:
        assert self.cache is not None
        self.cache.feed_at(positions[0])
        self.cache.attend(visible.shape[0])
        return self.model(
            fed, attention_mask=mask, position_ids=positions, **cache_kwargs(self.cache), use_cache=False,
            logits_to_keep=keep,
        ).logits  # fmt: skip
