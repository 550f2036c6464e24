"""A GGUF model in llama.cpp, in this process, through the low-level bindings of llama-cpp-python.

Two uses, one per paradigm. A diffusion model's step is one non-causal forward over whole sequences
(`forward_logits`): each row of the batch decoded on its own, logits kept only for the positions the sampler asked
for, and nothing kept between forwards. An autoregressive model decodes with llama.cpp's own loop pieces
(`AutoregressiveContext`): the prompt of every row in one batch, then one token a row per `llama_decode`, each row's
next token chosen by llama.cpp's greedy sampler, each row in its own slice of the KV cache.

Kernel settings that can change a token are fixed here and recorded with every run (`KernelSettings`): flash
attention is off and the KV cache keeps the run's precision, so llama.cpp's logits agree with the PyTorch loaders'
within float error (tests/test_engine_llama_cpp.py) and a token differs only where two logits tie that closely.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import llama_cpp

_GGML_LOG_ERROR = 4  # ggml.h: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5


@llama_cpp.llama_log_callback
def _errors_only(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """llama.cpp's own messages (every tensor it loads, every context it makes) would bury the sweep's progress
    lines: only its errors reach stderr."""
    if level == _GGML_LOG_ERROR:
        sys.stderr.write(text.decode("utf-8", "replace"))


llama_cpp.llama_log_set(_errors_only, ctypes.c_void_p(0))  # module-level: the callback must outlive every call

# The KV cache's element type for each run dtype: the run's own precision (bf16 falls back to f16, which llama.cpp's
# CPU attention supports everywhere; the record says which ran).
_KV_TYPES = {"float32": ("f32", llama_cpp.GGML_TYPE_F32), "float16": ("f16", llama_cpp.GGML_TYPE_F16),
             "bfloat16": ("f16", llama_cpp.GGML_TYPE_F16)}
_ALL_GPU_LAYERS = 999  # offload every layer where the build has a GPU backend


class EngineRuntimeError(RuntimeError):
    """llama.cpp refused a load, a context or a decode (its return code in the message)."""


@dataclass(frozen=True)
class KernelSettings:
    """What llama.cpp ran with, as recorded in the run's environment: the settings that can move a near-tied token."""

    flash_attention: bool
    kv_cache_type: str
    threads: int
    gpu_layers: int


def kernel_settings(dtype: str, threads: int, on_gpu: bool) -> KernelSettings:
    return KernelSettings(flash_attention=False, kv_cache_type=_KV_TYPES[dtype][0], threads=threads,
                          gpu_layers=_ALL_GPU_LAYERS if on_gpu else 0)


@functools.cache
def _init_backend() -> None:
    """llama.cpp's backends, initialised once per process before the first model loads."""
    llama_cpp.llama_backend_init()


class GgufModel:
    """One GGUF file loaded once; contexts for each batch shape are made from it on demand and kept."""

    def __init__(self, path: Path, settings: KernelSettings, dtype: str) -> None:
        _init_backend()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = settings.gpu_layers
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise EngineRuntimeError(f"llama.cpp could not load {path}")
        self.path = path
        self.settings = settings
        self._kv_type = _KV_TYPES[dtype][1]
        self._model = model
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)))
        self.weights_bytes = int(llama_cpp.llama_model_size(model))
        self._contexts: dict[tuple[str, int, int], _Context] = {}

    def context(self, kind: str, rows: int, length: int) -> _Context:
        """A context for `rows` sequences of up to `length` positions, `kind` "diffusion" (non-causal, every token
        in one micro-batch) or "autoregressive" (causal, a KV cache of rows x length cells)."""
        key = (kind, rows, length)
        if key not in self._contexts:
            self._contexts[key] = _Context(self, rows, length, causal=kind == "autoregressive")
        return self._contexts[key]

    def close(self) -> None:
        for context in self._contexts.values():
            context.close()
        self._contexts.clear()
        if self._model:
            llama_cpp.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # a worker dropping the model frees llama.cpp's memory with it
        try:
            self.close()
        except Exception:
            pass


class _Context:
    """A llama.cpp context and one reusable batch of rows x length tokens, filled through numpy views."""

    def __init__(self, model: GgufModel, rows: int, length: int, *, causal: bool) -> None:
        tokens = rows * length
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = tokens
        params.n_batch = tokens
        params.n_ubatch = tokens  # non-causal attention needs a whole sequence in one micro-batch
        params.n_seq_max = rows
        # Each row its own slice of the cache: a unified cache would have every row attend (masked) over every row's
        # cells, B times the keys it needs.
        params.kv_unified = False
        params.n_threads = params.n_threads_batch = model.settings.threads
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.type_k = params.type_v = model._kv_type
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(model._model, params)
        if not ctx:
            raise EngineRuntimeError(f"llama.cpp could not make a context of {rows} x {length} tokens")
        self.ctx = ctx
        self.rows, self.length, self.n_vocab = rows, length, model.n_vocab
        llama_cpp.llama_set_causal_attn(ctx, causal)
        self.memory = llama_cpp.llama_get_memory(ctx)  # None for a model llama.cpp keeps no cache for
        self.batch = llama_cpp.llama_batch_init(tokens, 0, rows)
        self._token = np.ctypeslib.as_array(self.batch.token, shape=(tokens,))
        self._pos = np.ctypeslib.as_array(self.batch.pos, shape=(tokens,))
        self._logits_flag = np.ctypeslib.as_array(self.batch.logits, shape=(tokens,))
        self._n_seq_id = np.ctypeslib.as_array(self.batch.n_seq_id, shape=(tokens,))
        self._n_seq_id[:] = 1
        self._seq_of = [self.batch.seq_id[i] for i in range(tokens)]  # each points at n_seq_max ids
        self._seqs = np.full(tokens, -1, dtype=np.int32)  # the sequence ids written into the batch so far
        self.greedy = llama_cpp.llama_sampler_init_greedy()

    def fill(self, tokens: np.ndarray, positions: np.ndarray, seqs: np.ndarray, outputs: np.ndarray) -> None:
        """Lay one batch out: token ids, positions, sequence ids and which tokens return logits (all 1-D, same length)."""
        n = len(tokens)
        self.batch.n_tokens = n
        self._token[:n] = tokens
        self._pos[:n] = positions
        self._logits_flag[:n] = outputs
        # A diffusion forward lays out the same sequences every time, and a decode step the same ones every token:
        # only ids that changed are written (element by element, through the batch's pointer table).
        for i in np.flatnonzero(self._seqs[:n] != seqs).tolist():
            self._seq_of[i][0] = int(seqs[i])
        self._seqs[:n] = seqs

    def decode(self) -> None:
        code = llama_cpp.llama_decode(self.ctx, self.batch)
        if code != 0:
            raise EngineRuntimeError(f"llama_decode returned {code} for {self.batch.n_tokens} tokens")

    def logits(self, outputs: int) -> np.ndarray:
        """The logits of the last decode's outputs, in batch order: `[outputs, V]` float32 (llama.cpp's buffer)."""
        pointer = llama_cpp.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(pointer, shape=(outputs, self.n_vocab))

    def clear(self) -> None:
        if self.memory:
            llama_cpp.llama_memory_clear(self.memory, True)

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_sampler_free(self.greedy)
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None


def forward_logits(model: GgufModel, x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """One non-causal forward of a diffusion model over `x` `[B, L]`: logits `[B, len(keep), V]` at positions `keep`
    of every row.

    Each row is its own decode: llama.cpp keeps no cache for a diffusion model, and in one batch of several
    sequences every query attends (masked) over every row's keys, B times the keys it needs (at B = 4 on the
    miniature, 1.35x the time of four single-row decodes). Such a decode runs as an encode, which returns the
    logits of every position (the LM head runs over the whole sequence, where the PyTorch forward runs it over the
    window only); the window's rows are taken from them, copied out of llama.cpp's reused buffer.
    """
    rows, length = x.shape
    context = model.context("diffusion", 1, length)
    positions, seqs, outputs = (np.arange(length, dtype=np.int32), np.zeros(length, dtype=np.int32),
                                np.ones(length, dtype=np.int8))
    logits = np.empty((rows, len(keep), model.n_vocab), dtype=np.float32)
    for row in range(rows):
        context.clear()
        context.fill(x[row], positions, seqs, outputs)
        context.decode()
        logits[row] = context.logits(length)[keep]
    return logits


class AutoregressiveContext:
    """llama.cpp's decode of `rows` sequences: `prefill(prompts)`, then `decode(tokens)` once per new token, each
    returning the next token of every row by llama.cpp's greedy sampler."""

    def __init__(self, model: GgufModel, rows: int, length: int) -> None:
        self._context = model.context("autoregressive", rows, length)
        self._rows = rows
        self._position = 0

    def prefill(self, prompts: np.ndarray) -> np.ndarray:
        """Every row's prompt `[B, P]` in one batch, logits at each row's last position: the first new tokens `[B]`."""
        rows, prompt_length = prompts.shape
        context = self._context
        context.clear()
        outputs = np.zeros(prompt_length, dtype=np.int8)
        outputs[-1] = 1
        context.fill(prompts.reshape(-1), np.tile(np.arange(prompt_length, dtype=np.int32), rows),
                     np.repeat(np.arange(rows, dtype=np.int32), prompt_length), np.tile(outputs, rows))
        context.decode()
        self._position = prompt_length
        return self._sample([(r + 1) * prompt_length - 1 for r in range(rows)])

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        """One token a row `[B]` at the next position: the following tokens `[B]`."""
        rows = self._rows
        context = self._context
        context.fill(tokens, np.full(rows, self._position, dtype=np.int32), np.arange(rows, dtype=np.int32),
                     np.ones(rows, dtype=np.int8))
        context.decode()
        self._position += 1
        return self._sample(list(range(rows)))

    def _sample(self, batch_positions: list[int]) -> np.ndarray:
        greedy, ctx = self._context.greedy, self._context.ctx
        return np.array([llama_cpp.llama_sampler_sample(greedy, ctx, i) for i in batch_positions], dtype=np.int64)

    @property
    def cells(self) -> int:
        """KV cells written so far (every row's positions)."""
        return self._rows * self._position
