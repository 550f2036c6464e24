"""A model forward replayed at fixed input shapes: a CUDA graph captured by hand, or inductor on a CPU.

Eager PyTorch pays ~20-25 ms of host time per 8B forward (one dispatch per operator, hundreds per layer),
whatever the forward computes; a LLaDA step is one forward, so at small batch a step measures Python. A
CUDA graph records the forward's kernels once and replays them with one launch (PyTorch's "CUDA Graphs"
notes: static input buffers, warm-up on a side stream, capture, replay). What it replays is fixed: the
kernels, their shapes, and every tensor address they read or write. So:

* inputs are copied into static buffers owned here before each replay, and the output is a static buffer
  the next replay overwrites (the caller consumes it first);
* anything the forward writes outside its inputs (a KV cache) must be allocated before the capture and
  written at positions the inputs carry as tensors, never at host integers baked into the graph;
* a new input shape is a new graph (captured on its first call, which the scenario's warm-ups make).

On a CPU, which has no graphs, the same function over the same static buffers is compiled by inductor
(`torch.compile`, no graphs): what the CPU tests check for token-exactness, and what `just bench` times.
Every capture (or compilation) adds its wall time to `capture_s`, recorded as the run's `compile_s`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

# Side-stream forwards before a capture: lazy initialisations (cuBLAS workspaces, autotuning, a KV cache's
# buffers) happen there, outside the graph's private memory pool.
CAPTURE_WARMUP_ITERS = 2

# Signatures one compiled function may specialise into (a CPU prefix cache: one per block; a live decode: one per
# bucket); torch's default is 8.
RECOMPILE_LIMIT = 64

Key = tuple[tuple[tuple[int, ...], torch.dtype] | None, ...]


@dataclass
class _Entry:
    inputs: list[Tensor | None]  # the static buffers the replayed forward reads
    output: Tensor | None = None  # CUDA: the static output the replay writes
    graph: torch.cuda.CUDAGraph | None = None
    compiled: Callable[..., Tensor] | None = None  # CPU: the inductor-compiled forward


class CapturedForward:
    """`fn(*inputs) -> Tensor` replayed per input signature (shapes and dtypes; None inputs allowed).

    `pool` lets several captured forwards share one CUDA memory pool (they run one after the other, never
    concurrently, which is what sharing needs); `shared_pool()` makes one.
    """

    def __init__(self, fn: Callable[..., Tensor], device: torch.device, *, pool: object | None = None) -> None:
        self.fn = fn
        self.device = device
        self.pool = pool
        self.capture_s = 0.0  # wall time of every capture (or compilation) so far
        self._entries: dict[Key, _Entry] = {}

    @property
    def graphs(self) -> int:
        """Input signatures captured (or compiled) so far."""
        return len(self._entries)

    def __call__(self, *inputs: Tensor | None) -> Tensor:
        key: Key = tuple(None if t is None else (tuple(t.shape), t.dtype) for t in inputs)
        entry = self._entries.get(key)
        if entry is None:
            start = time.perf_counter()
            entry = self._capture(inputs)
            self._entries[key] = entry
            output = self._replay(entry, inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.capture_s += time.perf_counter() - start
            return output
        return self._replay(entry, inputs)

    def _replay(self, entry: _Entry, inputs: tuple[Tensor | None, ...]) -> Tensor:
        for static, new in zip(entry.inputs, inputs, strict=True):
            if static is not None and new is not None and static.data_ptr() != new.data_ptr():
                static.copy_(new)
        if entry.graph is not None:
            entry.graph.replay()
            assert entry.output is not None
            return entry.output
        assert entry.compiled is not None
        return entry.compiled(*entry.inputs)

    def _capture(self, inputs: tuple[Tensor | None, ...]) -> _Entry:
        static = [None if t is None else t.clone() for t in inputs]
        if self.device.type != "cuda":
            self.fn(*static)  # eager once, as the side-stream warm-up does: lazy buffers allocated outside
            raise_recompile_limit(RECOMPILE_LIMIT)
            compiled = torch.compile(self.fn, fullgraph=True, dynamic=False)
            return _Entry(inputs=static, compiled=compiled)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(CAPTURE_WARMUP_ITERS):
                self.fn(*static)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            output = self.fn(*static)
        return _Entry(inputs=static, output=output, graph=graph)


def shared_pool(device: torch.device) -> object | None:
    """A CUDA graph memory pool several captured forwards may share (None off CUDA)."""
    return torch.cuda.graph_pool_handle() if device.type == "cuda" else None


def raise_recompile_limit(limit: int) -> None:
    """Let dynamo keep `limit` compiled variants of one function (`cache_size_limit` before torch 2.6)."""
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), limit))
