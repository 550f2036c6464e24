"""llama.cpp as a run's engine: the checkpoint converted to GGUF, loaded in llama.cpp, and the two things a run
steps through it.

A diffusion model's forward becomes `LlamaCppForward`, an object the package's sampler calls exactly as it calls
transformers' model (`model(x, attention_mask=None, use_cache=False, logits_to_keep=keep).logits`), so the
official algorithm stays the package's, token for token. An autoregressive model decodes with
`LlamaCppDecoder`, llama.cpp's batched greedy loop with the autoregressive loop's interface (`next()`: the
prefill, then one token a row; `tokens` `[B, N]`), so the scenario times its steps as it times the PyTorch loop's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from specs.engines import LLAMA_CPP, LLAMA_CPP_PYTHON_VERSION
from specs.results import EngineRecord
from workers.engine.gguf_convert import converted_gguf
from workers.engine.llama_cpp_runtime import AutoregressiveContext, GgufModel, forward_logits, kernel_settings
from workers.errors import SpecMismatchError
from workers.models.loading import LoadedModel

_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


class LlamaCppForward:
    """What a diffusion sampler calls as its model, each forward run in llama.cpp (non-causal, no cache)."""

    def __init__(self, gguf: GgufModel, config: Any, device: torch.device) -> None:
        self.gguf = gguf
        self.config = config  # transformers' config of the same checkpoint: the sampler reads its shape
        self.device = device

    def __call__(self, x: Tensor, attention_mask: Tensor | None = None, use_cache: bool = False,
                 logits_to_keep: Tensor | int = 0, **unsupported: Any) -> SimpleNamespace:
        if attention_mask is not None or unsupported:
            raise SpecMismatchError(
                "the llama.cpp engine runs unpadded prompt batches through whole-sequence forwards; padding and "
                f"cached forwards ({', '.join(unsupported) or 'attention_mask'}) are PyTorch's"
            )
        length = x.shape[1]
        if isinstance(logits_to_keep, Tensor):
            keep = logits_to_keep.cpu().numpy()
        else:
            keep = np.arange(length - logits_to_keep if logits_to_keep else 0, length)
        logits = forward_logits(self.gguf, x.cpu().numpy().astype(np.int32), keep)  # [B, K, V]
        return SimpleNamespace(logits=torch.from_numpy(logits).to(self.device))


class LlamaCppDecoder:
    """llama.cpp's greedy decode of a prompt batch `[B, P]`, one step a `next()`: step 0 the prefill, then one
    token a row. EOS is an ordinary token, as in the PyTorch loop: exactly `n_new` tokens come out."""

    def __init__(self, gguf: GgufModel, prompt_ids: Tensor, *, n_new: int, kv_bytes_per_cell: int) -> None:
        batch, prompt_length = prompt_ids.shape
        self._context = AutoregressiveContext(gguf, batch, prompt_length + n_new)
        self._prompts = prompt_ids.cpu().numpy().astype(np.int32)
        self.n_new = n_new
        self.tokens = torch.empty((batch, n_new), dtype=torch.long, device=prompt_ids.device)  # [B, N]
        self._host = np.empty((batch, n_new), dtype=np.int64)
        self._device = prompt_ids.device
        self._step = 0
        self.cache = None  # llama.cpp's own KV cache: the scenario's written-cache check is PyTorch's
        self._kv_bytes_per_cell = kv_bytes_per_cell

    def __iter__(self) -> LlamaCppDecoder:
        return self

    def __next__(self) -> int:
        if self._step >= self.n_new:
            raise StopIteration
        if self._step == 0:
            new = self._context.prefill(self._prompts)
        else:
            new = self._context.decode(self._host[:, self._step - 1].astype(np.int32))
        self._host[:, self._step] = new
        self._step += 1
        if self._step == self.n_new:
            self.tokens.copy_(torch.from_numpy(self._host))
        return self._step - 1

    @property
    def done(self) -> bool:
        return self._step == self.n_new

    @property
    def cache_bytes(self) -> int:
        return self._context.cells * self._kv_bytes_per_cell


@dataclass
class LlamaCppEngine:
    """One checkpoint in llama.cpp at one dtype, loaded once per worker process."""

    gguf: GgufModel
    gguf_record: dict
    dtype: str
    name: str = LLAMA_CPP
    torch_tensors: bool = False
    ar_kv_cache: str | None = LLAMA_CPP
    samples: bool = False

    @classmethod
    def open(cls, loaded: LoadedModel, dtype: str) -> LlamaCppEngine:
        checkpoint = getattr(loaded.spec.source, "checkpoint", None)
        if checkpoint is None or not Path(checkpoint).is_dir():
            raise SpecMismatchError(f"model {loaded.spec.name!r}: the llama.cpp engine converts a local checkpoint "
                                    "folder; give source.checkpoint a folder")
        path, record = converted_gguf(Path(checkpoint), dtype)
        settings = kernel_settings(dtype, torch.get_num_threads(), loaded.device.type == "cuda")
        return cls(gguf=GgufModel(path, settings, dtype), gguf_record=record, dtype=dtype)

    def diffusion_model(self, loaded: LoadedModel) -> LoadedModel:
        return dataclasses.replace(loaded, model=LlamaCppForward(self.gguf, loaded.model.config, loaded.device))

    def ar_steps(self, loaded: LoadedModel, input_ids: Tensor, *, n_new: int, temperature: float,
                 generator: torch.Generator | None, compiled: Any) -> LlamaCppDecoder:
        if temperature != 0 or compiled is not None:
            raise SpecMismatchError("the llama.cpp engine decodes greedily and uncompiled: set controls.temperature 0")
        return LlamaCppDecoder(self.gguf, input_ids, n_new=n_new, kv_bytes_per_cell=self._kv_bytes_per_cell(loaded))

    def weights_bytes(self, loaded: LoadedModel) -> int:
        return self.gguf.weights_bytes

    def _kv_bytes_per_cell(self, loaded: LoadedModel) -> int:
        """Bytes one position of one row holds in the KV cache: keys and values of every layer."""
        text = loaded.model.config.get_text_config(decoder=True)
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        return 2 * text.num_hidden_layers * kv_heads * head_dim * _BYTES[self.gguf.settings.kv_cache_type]

    def attention_kernel(self, torch_kernel: str | None) -> str:
        flash = "on" if self.gguf.settings.flash_attention else "off"
        return f"llama.cpp's attention (flash attention {flash}, {self.gguf.settings.kv_cache_type} KV cache)"

    def record(self) -> EngineRecord:
        s = self.gguf.settings
        return EngineRecord(
            name=LLAMA_CPP, version=f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}", flash_attention=s.flash_attention,
            kv_cache_type=s.kv_cache_type, threads=s.threads, gpu_layers=s.gpu_layers,
            gguf_type=self.gguf_record["out_type"], gguf_sha256=self.gguf_record["gguf_sha256"],
        )
