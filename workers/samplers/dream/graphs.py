"""Dream's step forward replayed as a CUDA graph (the `graph` variant), kept between generations of one shape.

Every Dream step feeds the whole sequence `[B, L]` with the same padding mask and position ids, and keeps the
logits of one window (the positions that can be masked, which only widens if a mask id sits left of it), so
one captured forward (`graphs.CapturedForward`) serves every step of every generation of a batch shape; a
widened window is a second signature. The token choice after it stays eager: its shapes follow the masked
count, which shrinks every step. On a CPU the forward is inductor-compiled instead (graphs.py). Capturing is
preparation (`workers/measure/preparation.py`), timed into the run's `preparation_s`.
"""

from __future__ import annotations

from torch import Tensor, nn

from workers.measure.preparation import Preparation
from workers.samplers.graphs import CapturedForward, Outputs, shared_pool


class DreamGraphs:
    """The captured step forward of one batch shape: `rows` sequences of `length` positions."""

    def __init__(
        self, model: nn.Module, *, rows: int, length: int, preparation: Preparation | None = None
    ) -> None:
        self.model = model
        self.rows = rows
        self.length = length
        device = next(model.parameters()).device
        self.preparation = preparation if preparation is not None else Preparation()
        self.outputs: Outputs = {}
        self.forward = CapturedForward(
            self._forward, device, name=f"Dream forward ({rows} rows x {length} positions)",
            pool=shared_pool(device), outputs=self.outputs, preparation=self.preparation,
        )  # fmt: skip

    def matches(self, rows: int, length: int) -> bool:
        return (self.rows, self.length) == (rows, length)

    @property
    def graphs(self) -> int:
        """Signatures captured (compiled) so far."""
        return self.forward.graphs

    @property
    def output_bytes(self) -> int:
        """Bytes of the static logits outputs (one per window width)."""
        return sum(t.nbytes for t in self.outputs.values())

    def logits(self, x: Tensor, keep: Tensor, attention: Tensor | None, positions: Tensor | None) -> Tensor:
        """x `[rows, L]`, keep `[W]` (the hidden states to project), the padding inputs → logits
        `[rows, W, V]`, a static buffer the next replay overwrites (the step consumes it first)."""
        return self.forward(x, keep, attention, positions)

    def _forward(self, x: Tensor, keep: Tensor, attention: Tensor | None, positions: Tensor | None) -> Tensor:
        return self.model(
            x, attention_mask=attention, position_ids=positions, use_cache=False, logits_to_keep=keep
        ).logits
