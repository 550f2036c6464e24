"""LLaMA's decode step under `torch.compile`, over a static KV cache kept between generations of one shape.

The eager decode loop pays, per token, one host dispatch per operator (hundreds per layer), which is what
bounds it at small batch (gpt-fast, pytorch-labs: "static KV cache + torch.compile"). Compiling the step
fuses the operators (inductor) and, on CUDA, replays it as a CUDA graph (`mode="reduce-overhead"`). Both
need the step's shapes and tensor addresses fixed: keys and values live in transformers' `StaticCache`
(all `capacity` positions, unwritten ones hidden by the causal mask), allocated once per shape and reset,
never reallocated, between generations, so one compilation serves every generation of a run.

`decode_attention="live"` swaps the static cache for `live_cache.LiveCache`: the step attends only over the
written positions (rounded up to 256, one compiled graph per bucket) and reads each KV head once. `kernel`
names what ran, for the artifact.

Each signature (the static cache's one, a live bucket) is prepared on its first decode call, which the
scenario's warm-ups make: on CUDA, reduce-overhead's cudagraph trees run a new graph's first call in warm-up
mode and record it on the second, so that call runs the step three times (compile and warm up, record,
replay), rewinding the cache's write position between them; a bucket met once per generation is then never
recorded inside a timed repetition. All of it is preparation (`workers/measure/preparation.py`), the run's
`preparation_s`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from transformers import StaticCache

from workers.measure.preparation import Preparation
from workers.models.attention import SyncFreeAttention
from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.graphs import RECOMPILE_LIMIT, raise_recompile_limit
from workers.samplers.live_cache import KERNEL, LIVE_BUCKET, LiveCache

LAST_POSITION_ONLY = 1
# Calls a new signature gets while prepared: CUDA's cudagraph trees warm up on the first, record on the second,
# replay from the third; a CPU compiles on the first (inductor, no graphs).
PREPARING_CALLS = {"cuda": 3}
STATIC_KERNEL = "transformers {kernel} over every position of a StaticCache"


class CompiledDecode:
    """A compiled decode forward and the `StaticCache` it writes, for batches of `batch` rows and `capacity`
    positions (prompt + new tokens)."""

    def __init__(
        self, model: nn.Module, *, batch: int, capacity: int, decode_attention: str = "static",
        bucket: int = LIVE_BUCKET, preparation: Preparation | None = None, preparing_calls: int | None = None,
    ) -> None:  # fmt: skip
        self.model = model
        self.batch = batch
        self.capacity = capacity
        self.decode_attention = decode_attention
        device = next(model.parameters()).device
        self.device = device
        text_config = model.config.get_text_config(decoder=True)
        if decode_attention == "live":
            if not all(isinstance(layer.self_attn, SyncFreeAttention) for layer in model.model.layers):
                raise ValueError(
                    "decode_attention 'live' needs attention modules that take the cache's attention: "
                    "apply workers.models.attention.make_sync_free to the model (workers.models.loading.load_model does)"
                )
            self.cache: StaticCache | LiveCache = LiveCache(
                text_config.num_hidden_layers, capacity, device=device, bucket=bucket
            )
            self.kernel = KERNEL.format(bucket=bucket)
        elif decode_attention == "static":
            self.cache = StaticCache(config=text_config, max_cache_len=capacity)
            self.kernel = STATIC_KERNEL.format(kernel=model.config._attn_implementation)
        else:
            raise ValueError(f"Unknown decode_attention {decode_attention!r}. Available: static, live")
        raise_recompile_limit(RECOMPILE_LIMIT)
        # CUDA graphs on GPU; on the CPU inductor's fused C++ kernels (no graphs to replay there).
        mode = "reduce-overhead" if device.type == "cuda" else None
        forward = self._live_forward if decode_attention == "live" else self._forward
        self._step = torch.compile(forward, mode=mode, fullgraph=True, dynamic=False)
        self.preparation = preparation if preparation is not None else Preparation()
        self.preparing_calls = preparing_calls or PREPARING_CALLS.get(device.type, 1)
        self._compiled: set[int] = set()  # the attended lengths prepared so far (one for the static cache)

    def reset(self, padding: Tensor | None = None, prompt_length: int = 0) -> None:
        """Forget the previous generation; the buffers (and their addresses) stay. `padding` `[B, capacity]`
        and `prompt_length` describe the next one (the live cache builds its decode mask from them)."""
        self.cache.reset()
        if isinstance(self.cache, LiveCache):
            self.cache.begin(prompt_length, padding)

    def matches(self, batch: int, capacity: int) -> bool:
        return self.batch == batch and self.capacity == capacity

    def prefill(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """The prompt's forward, eager (its shape is used once per generation), filling the cache."""
        if isinstance(self.cache, LiveCache) and attention_mask is not None:
            attention_mask = attention_mask[:, : input_ids.shape[1]]  # the live cache's keys: the prompt's alone
        return self._forward(input_ids, position_ids, attention_mask)

    def decode(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None, length: int) -> Tensor:
        """One compiled decode forward `[B, 1]` that makes the sequence `length` long → last logits `[B, 1, V]`."""
        attended = self.capacity
        if isinstance(self.cache, LiveCache):
            self.cache.step(length)
            attended = self.cache.live
        if attended in self._compiled:
            return self._call(input_ids, position_ids, attention_mask)
        what = f"LLaMA compiled decode step (batch {self.batch}, {attended} attended positions)"
        with self.preparation.preparing(what, self.device):
            written = self._write_position()
            for call in range(self.preparing_calls):
                if call:
                    self._rewind(written)  # each call writes the same token at the same position
                logits = self._call(input_ids, position_ids, attention_mask)
        self._compiled.add(attended)
        return logits

    def _call(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        if self.device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()  # the previous step's outputs are consumed
        return self._step(input_ids, position_ids, attention_mask)

    def _write_position(self) -> list[Tensor]:
        """The static cache's per-layer write counters before a step (`StaticLayer.cumulative_length`, a device
        tensor each step advances); the live cache writes at a position set before the step: nothing to keep."""
        return [layer.cumulative_length.clone() for layer in self.cache.layers
                if isinstance(getattr(layer, "cumulative_length", None), Tensor)]  # fmt: skip

    def _rewind(self, written: list[Tensor]) -> None:
        counters = [layer.cumulative_length for layer in self.cache.layers
                    if isinstance(getattr(layer, "cumulative_length", None), Tensor)]  # fmt: skip
        for counter, before in zip(counters, written, strict=True):
            counter.copy_(before)

    @property
    def preparation_s(self) -> float | None:
        """Seconds this step's signatures took to prepare (None: none prepared yet)."""
        return self.preparation.seconds if self._compiled else None

    def _forward(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        # The 2-D padding mask spans all `capacity` positions: the static cache's keys are always that long.
        return self.model(
            input_ids, attention_mask=attention_mask, position_ids=position_ids, **cache_kwargs(self.cache),
            use_cache=True, logits_to_keep=LAST_POSITION_ONLY,
        ).logits  # fmt: skip

    def _live_forward(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        # The live cache builds the step's mask itself, from the write position and the padding.
        assert isinstance(self.cache, LiveCache)
        return self.model(
            input_ids, attention_mask=self.cache.decode_mask(), position_ids=position_ids,
            **cache_kwargs(self.cache), use_cache=True, logits_to_keep=LAST_POSITION_ONLY,
        ).logits  # fmt: skip

    @property
    def graphs(self) -> int:
        """Attended lengths compiled so far: one graph each (one for the static cache)."""
        return len(self._compiled)

    @property
    def cache_bytes(self) -> int:
        if isinstance(self.cache, LiveCache):
            return self.cache.nbytes
        return sum(
            layer.keys.nbytes + layer.values.nbytes for layer in self.cache.layers if getattr(layer, "is_initialized", False)
        )

