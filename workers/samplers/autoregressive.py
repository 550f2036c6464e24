"""The autoregressive decode loop (LLaMA) over a transformers causal LM and its KV cache, step by step.

Step 0 is the prefill (the whole prompt in one forward, filling the cache, giving the first new token:
the TTFT region); each later step is one decode forward of one token per row (an ITL region). Exactly
`n_new` tokens come out, so LLaMA and LLaDA are measured on equal output lengths. EOS is an ordinary
token by default (generation goes on after it); `logits_suppress_ids=eos_ids` bans it instead, which is
what `generate(min_new_tokens=N)` does through its `MinNewTokensLengthLogitsProcessor`.

Greedy output equals `model.generate(..., do_sample=False, max_new_tokens=N, eos_token_id=None)` (and, with
EOS suppressed, `generate(..., do_sample=False, min_new_tokens=N, max_new_tokens=N)`) token for token
because every forward sees the inputs `generate` builds (transformers 5.x `GenerationMixin`): the
cached keys and values so far, position ids `cumsum(mask) - 1` (0 on left pads, then +1 per new token),
the 2-D mask grown by one column per step (dropped when there is no padding), and logits only at the
last position (`logits_to_keep=1`). What it leaves out is the bookkeeping `generate` does around the
model (logits processors, stopping criteria, re-concatenating `input_ids` and re-deriving inputs every
step); the loop writes into preallocated tensors and adds no device sync of its own after setup (with
padding, transformers' mask preparation inside the forward may still sync, as it does under `generate`).

The KV cache is preallocated for the whole generation (`kv_cache.PreallocatedCache`): `generate`'s
`DynamicCache` concatenates the whole cache at every token, a copy that grows to tens of GB per step at
large batch and length. Attention sees the same keys and values either way; `cache="dynamic"` runs
`generate`'s own cache, for comparison. The `compile` variant hands the loop a `compiled.CompiledDecode`:
its decode steps then run compiled over a static cache (all positions, unwritten ones masked).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn
from transformers import DynamicCache, StaticCache
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, causal_mask_function

from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.compiled import CompiledDecode
from workers.samplers.kv_cache import PreallocatedCache
from workers.samplers.prompt_batch import check_prompt_batch

Phase = Literal["prefill", "decode"]
KvCache = Literal["preallocated", "dynamic"]
KV_CACHE: KvCache = "preallocated"  # what the runner measures with, recorded in every LLaMA artifact
LAST_POSITION_ONLY = 1  # logits_to_keep: only the next-token logits are needed
NEG_INF = float("-inf")


@dataclass(frozen=True)
class ArStep:
    """What one step did: step 0 is the prefill, every later one a decode of one token per row."""

    step: int  # 0 .. n_new-1; step t produced new token t
    phase: Phase


class ArDecoder:
    """The state of one autoregressive generation; `next()` runs the prefill, then one decode per call.

    `tokens` `[B, n_new]` fills from the left as steps run. Build it with `ar_steps`.
    """

    def __init__(
        self,
        model: nn.Module,
        prompt_ids: Tensor,
        attention_mask: Tensor | None,
        *,
        n_new: int,
        temperature: float,
        generator: torch.Generator | None,
        logits_suppress_ids: Sequence[int],
        cache: KvCache = KV_CACHE,
        compiled: CompiledDecode | None = None,
    ) -> None:
        check_prompt_batch(prompt_ids, attention_mask)
        if n_new <= 0:
            raise ValueError(f"n_new must be positive, got {n_new}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature}")
        vocab_size = int(model.config.vocab_size)
        bad = [i for i in logits_suppress_ids if not 0 <= i < vocab_size]
        if bad:
            raise ValueError(f"logits_suppress_ids {bad} are not in the model's vocabulary [0, {vocab_size})")
        batch, prompt_length = prompt_ids.shape
        device = prompt_ids.device
        self.model = model
        self.prompt_ids = prompt_ids
        self.prompt_length = prompt_length
        self.n_new = n_new
        self.temperature = float(temperature)
        self.generator = generator
        self._suppress = (
            torch.tensor(sorted(set(logits_suppress_ids)), dtype=torch.long, device=device)
            if logits_suppress_ids
            else None
        )
        self.tokens = torch.empty((batch, n_new), dtype=torch.long, device=device)  # [B, N]
        text_config = model.config.get_text_config(decoder=True)
        self._compiled = compiled
        if compiled is not None:
            if not compiled.matches(batch, prompt_length + n_new):
                raise ValueError(
                    f"the compiled decode step was built for batch {compiled.batch} and {compiled.capacity} "
                    f"positions, not {batch} and {prompt_length + n_new}"
                )
            self.cache = compiled.cache
        elif cache == "preallocated":
            self.cache: DynamicCache | PreallocatedCache | StaticCache = PreallocatedCache(
                text_config.num_hidden_layers, capacity=prompt_length + n_new
            )
        elif cache == "dynamic":
            self.cache = DynamicCache(config=text_config)  # as generate builds it
        else:
            raise ValueError(f"Unknown cache {cache!r}. Available: preallocated, dynamic")

        # One device sync here (as generate does once): without padding the mask is dropped entirely.
        padded = attention_mask is not None and not bool(attention_mask.all())
        self._decode_mask: Tensor | None = None
        if padded:
            ones = torch.ones((batch, n_new), dtype=attention_mask.dtype, device=device)
            self._mask: Tensor | None = torch.cat([attention_mask, ones], dim=-1)  # [B, P+N]
            self._decode_mask = _decode_mask_row(model, self._mask)  # [B, 1, 1, P+N] or None
            positions = attention_mask.long().cumsum(-1) - 1
            self._prompt_positions = positions.masked_fill(attention_mask == 0, 0)  # [B, P]
        else:
            self._mask = None
            self._prompt_positions = torch.arange(prompt_length, device=device).unsqueeze(0)  # [1, P]
        # New token t-1 is fed at step t, one position after the previous one.
        last = self._prompt_positions[:, -1:]  # [B or 1, 1]
        self._decode_positions = last + torch.arange(1, n_new, device=device)  # [B or 1, N-1]
        if compiled is not None:
            compiled.reset(self._mask, prompt_length)
        self._step = 0

    @property
    def done(self) -> bool:
        return self._step == self.n_new

    @property
    def cache_bytes(self) -> int:
        """Bytes the KV cache holds (its peak: the preallocated and static caches never grow)."""
        if self._compiled is not None:
            return self._compiled.cache_bytes
        if isinstance(self.cache, PreallocatedCache):
            return self.cache.nbytes
        return sum(t.nbytes for layer in self.cache.layers for t in (layer.keys, layer.values) if t is not None)

    @property
    def sequences(self) -> Tensor:
        """Prompt then the tokens generated so far: `[B, P + steps done]`, like `generate`'s output."""
        return torch.cat([self.prompt_ids, self.tokens[:, : self._step]], dim=-1)

    def __iter__(self) -> Iterator[ArStep]:
        return self

    @torch.no_grad()
    def __next__(self) -> ArStep:
        t = self._step
        if t == self.n_new:
            raise StopIteration
        if t == 0:
            logits = self._forward(self.prompt_ids, self._prompt_positions, self.prompt_length)  # [B, 1, V]
        else:
            logits = self._forward(
                self.tokens[:, t - 1 : t], self._decode_positions[:, t - 1 : t], self.prompt_length + t
            )
        self.tokens[:, t] = self._pick(logits[:, -1])
        self._step = t + 1
        return ArStep(step=t, phase="prefill" if t == 0 else "decode")

    def _forward(self, input_ids: Tensor, position_ids: Tensor, length: int) -> Tensor:
        """One forward over `input_ids` `[B, q]` that extends the cache to `length` tokens."""
        if self._compiled is not None:  # the static cache spans every position: so does its padding mask
            if length == self.prompt_length:
                return self._compiled.prefill(input_ids, position_ids, self._mask)
            return self._compiled.decode(input_ids, position_ids, self._mask, length)
        if self._mask is None:
            mask = None
        elif self._decode_mask is not None and input_ids.shape[1] == 1:
            mask = self._decode_mask[..., :length]  # [B, 1, 1, length]: used as is, nothing rebuilt
        else:
            mask = self._mask[:, :length]  # [B, length]: transformers builds the kernel's mask from it
        return self.model(
            input_ids,
            attention_mask=mask,
            position_ids=position_ids,
            **cache_kwargs(self.cache),
            use_cache=True,
            logits_to_keep=LAST_POSITION_ONLY,
        ).logits

    def _pick(self, logits: Tensor) -> Tensor:
        """Next token `[B]` from the last logits `[B, V]`: argmax, or a draw from softmax(logits / T)."""
        if self._suppress is not None:
            logits = logits.index_fill(-1, self._suppress, NEG_INF)
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        # float32 like generate's logits copy, so a seeded draw matches generate(do_sample=True, top_k=0).
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=self.generator).squeeze(1)


def ar_steps(
    model: nn.Module,
    prompt_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    n_new: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    logits_suppress_ids: Sequence[int] = (),
    cache: KvCache = KV_CACHE,
    compiled: CompiledDecode | None = None,
) -> ArDecoder:
    """Set up an autoregressive generation of exactly `n_new` tokens; iterating runs prefill, then decodes.

    prompt_ids `[B, P]`, attention_mask `[B, P]` (1 = token, 0 = left padding) or None. temperature 0 is
    greedy; > 0 samples from softmax(logits / T) with `generator` (None: torch's global generator).
    logits_suppress_ids: ids never to be picked (the EOS ids, to match `generate(min_new_tokens=N)`).
    cache: "preallocated" (written in place, what the runner measures) or "dynamic" (generate's own).
    compiled: the compile variant's decode step and static cache (replaces `cache`), reused across
        generations of its shape.
    """
    return ArDecoder(
        model, prompt_ids, attention_mask, n_new=n_new, temperature=temperature, generator=generator,
        logits_suppress_ids=logits_suppress_ids, cache=cache, compiled=compiled,
    )  # fmt: skip


def ar_generate(
    model: nn.Module, prompt_ids: Tensor, attention_mask: Tensor | None = None, **settings: Any
) -> Tensor:
    """Run `ar_steps` (same arguments) to the end; returns `[B, P + n_new]` (the prompt, then the new tokens)."""
    decoder = ar_steps(model, prompt_ids, attention_mask, **settings)
    for _ in decoder:
        pass
    return decoder.sequences


def _decode_mask_row(model: nn.Module, mask: Tensor) -> Tensor | None:
    """The attention mask of the last decode step, `[B, 1, 1, P+N]`, in the configured kernel's format.

    A single new token may attend to every cached position that is not padding, so decode step t needs
    exactly the first `P+t` columns of this row: a view, where transformers (and `generate`) would build
    the mask again at every step from the 2-D mask, checking it with a device sync. Built by the same mask
    function transformers uses (`create_causal_mask` calls it with these offsets). Kernels whose mask is
    not a dense 4-D tensor (flash attention's 2-D mask, flex attention's BlockMask) get None: the loop then
    passes the 2-D mask as `generate` does.
    """
    config = model.config
    build = ALL_MASK_ATTENTION_FUNCTIONS.get(config._attn_implementation)
    if build is None:
        return None
    batch, total = mask.shape
    row = build(
        batch_size=batch,
        q_length=1,
        kv_length=total,
        q_offset=total - 1,
        kv_offset=0,
        mask_function=causal_mask_function,
        attention_mask=mask.to(torch.bool),
        allow_is_causal_skip=False,
        dtype=next(model.parameters()).dtype,
        config=config,
        device=mask.device,
    )
    return row if isinstance(row, Tensor) and row.ndim == 4 else None
