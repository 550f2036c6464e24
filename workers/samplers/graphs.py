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
* a new input shape is a new graph (captured on its first call, which the scenario's warm-ups make);
* the replay writes its result into one static output per output shape and dtype, shared by every signature
  (and by every forward given the same `outputs`): a prefix cache's step has one input shape per block but
  one output shape `[rows, W, V]`, and one buffer per block would hold 518 MB each at B = 64 (16.6 GB over
  32 blocks). The forward's own result is an intermediate of the graph, freed at the end of the capture, so
  the next capture in the shared pool reuses its memory; the copy costs one read and write of the logits.

On a CPU, which has no graphs, the same function over the same static buffers is compiled by inductor
(`torch.compile`, no graphs), and its result copied into the same kind of static output: what the CPU tests
check for token-exactness, and what `just bench` times. Capturing (compiling) a signature, its warm-up
forwards and its first replay included, is preparation (`workers/measure/preparation.py`): timed into the
run's `preparation_s`, and an error of the run inside a timed repetition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from workers.measure.preparation import Preparation

# Side-stream forwards before a capture: lazy initialisations (cuBLAS workspaces, autotuning, a KV cache's
# buffers) happen there, outside the graph's private memory pool.
CAPTURE_WARMUP_ITERS = 2

# Signatures one compiled function may specialise into (a CPU prefix cache: one per block; a live decode: one per
# bucket); torch's default is 8.
RECOMPILE_LIMIT = 64

Key = tuple[tuple[tuple[int, ...], torch.dtype] | None, ...]
# The static outputs of one or more captured forwards: one buffer per output shape and dtype.
Outputs = dict[tuple[tuple[int, ...], torch.dtype], Tensor]


@dataclass
class _Entry:
    inputs: list[Tensor | None]  # the static buffers the replayed forward reads
    output: Tensor  # the static output the replay writes (shared with every signature of its shape)
    graph: torch.cuda.CUDAGraph | None = None
    compiled: Callable[..., Tensor] | None = None  # CPU: the inductor-compiled forward


class CapturedForward:
    """`fn(*inputs) -> Tensor` replayed per input signature (shapes and dtypes; None inputs allowed).

    `name` says what the forward is, for the preparation ledger. `pool` lets several captured forwards share
    one CUDA memory pool, and `outputs` their static outputs (they run one after the other, never
    concurrently, and each output is consumed before the next replay: what sharing needs); `shared_pool()`
    makes a pool. `preparation` is the run's ledger (a fresh one by default).
    """

    def __init__(
        self, fn: Callable[..., Tensor], device: torch.device, *, name: str = "captured forward",
        pool: object | None = None, outputs: Outputs | None = None, preparation: Preparation | None = None,
    ) -> None:  # fmt: skip
        self.fn = fn
        self.device = device
        self.name = name
        self.pool = pool
        self.outputs: Outputs = outputs if outputs is not None else {}
        self.preparation = preparation if preparation is not None else Preparation()
        self._entries: dict[Key, _Entry] = {}

    @property
    def graphs(self) -> int:
        """Input signatures captured (or compiled) so far."""
        return len(self._entries)

    def __call__(self, *inputs: Tensor | None) -> Tensor:
        key: Key = tuple(None if t is None else (tuple(t.shape), t.dtype) for t in inputs)
        entry = self._entries.get(key)
        if entry is not None:
            return self._replay(entry, inputs)
        with self.preparation.preparing(f"{self.name} at {describe(key)}", self.device):
            entry = self._capture(inputs)
            self._entries[key] = entry
            return self._replay(entry, inputs)

    def _replay(self, entry: _Entry, inputs: tuple[Tensor | None, ...]) -> Tensor:
        for static, new in zip(entry.inputs, inputs, strict=True):
            if static is not None and new is not None and static.data_ptr() != new.data_ptr():
                static.copy_(new)
        if entry.graph is not None:
            entry.graph.replay()
            return entry.output
        assert entry.compiled is not None
        return entry.output.copy_(entry.compiled(*entry.inputs))

    def _capture(self, inputs: tuple[Tensor | None, ...]) -> _Entry:
        static = [None if t is None else t.clone() for t in inputs]
        if self.device.type != "cuda":
            # Eager once, as the side-stream warm-up does: lazy buffers allocated outside, the output's shape known.
            output = self._output_like(self.fn(*static))
            raise_recompile_limit(RECOMPILE_LIMIT)
            compiled = torch.compile(self.fn, fullgraph=True, dynamic=False)
            return _Entry(inputs=static, output=output, compiled=compiled)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(CAPTURE_WARMUP_ITERS):
                result = self.fn(*static)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        output = self._output_like(result)  # outside the graph's pool, before the capture
        del result
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            output.copy_(self.fn(*static))  # the forward's own result: an intermediate, freed in the pool
        return _Entry(inputs=static, output=output, graph=graph)

    def _output_like(self, result: Tensor) -> Tensor:
        """The static output for `result`'s shape and dtype: the one already made for it, else a new one."""
        key = (tuple(result.shape), result.dtype)
        if key not in self.outputs:
            self.outputs[key] = torch.empty_like(result)
        return self.outputs[key]


def describe(key: Key) -> str:
    """A signature in words: `[3x24 int64, 8 int64, None]`."""
    parts = ["None" if k is None else f"{'x'.join(map(str, k[0])) or 'scalar'} {str(k[1]).removeprefix('torch.')}"
             for k in key]  # fmt: skip
    return f"[{', '.join(parts)}]"


def shared_pool(device: torch.device) -> object | None:
    """A CUDA graph memory pool several captured forwards may share (None off CUDA)."""
    return torch.cuda.graph_pool_handle() if device.type == "cuda" else None


def raise_recompile_limit(limit: int) -> None:
    """Let dynamo keep `limit` compiled variants of one function (`cache_size_limit` before torch 2.6)."""
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), limit))
