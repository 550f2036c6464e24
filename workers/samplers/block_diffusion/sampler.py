"""Fast-dLLM v2's block-diffusion sampler (the official `generate`), exposed as an iterator of forwards.

The algorithm is `Fast_dLLM_QwenForCausalLM.generate` of Efficient-Large-Model/Fast_dLLM_v2_7B (Wu et al. 2025,
arXiv:2509.26328), in its order of operations: a prompt longer than a block is prefilled (its next token taken when
it ends on a block boundary); then `max_new_tokens // block_length` blocks, each of masks after the sequence so far
up to the next block boundary, decoded sub-block by sub-block (a forward of the block against the KV cache of the
prefix, committing the masked positions whose confidence exceeds `threshold` and at least each row's most
confident one), and completed by a forward that caches the block and gives the next token. With `sub_block_cache`
(the official `use_block_cache`) a sub-block whose first position is committed in every row feeds only itself
(workers/samplers/block_diffusion/forward.py). With a `stop_token_id` the official stop rules apply (docs/samplers.md: a stop
token in any row ends every row; the sequences are cut after the first row's first stop).

Given the same model, prompt, settings and RNG it commits the same tokens with the same forwards as the official
code (tests/test_block_diffusion_sampler.py, against golden outputs of the official code). What differs is where
the work falls: the logits are projected only for the positions a forward reads; the KV cache is one preallocated
buffer (workers/samplers/block_diffusion/cache.py), not a concatenation per forward; and the host's decisions (whether a
sub-block still has masks, whether its first position is committed, the stop rules) are made in `prepare_step`,
ahead of the forward and outside a caller's step timer, from one read of the block's tokens per forward.

Two options depart from the official code, each off by default here (the runner takes them from the spec,
specs/block_diffusion.py): `commit_mask_predictions=False` takes the runner-up token where the top prediction is
the mask id (the official loop never ends once a row's top prediction stays the mask); `prefill_one_block_prompt`
feeds a prompt of exactly one block, which the official code never shows the model. `gen_length` stops the
generation as soon as its first `gen_length` positions are committed in every row (their tokens are the
official ones), saving the rest of the last block.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from specs.block_diffusion import prefills
from workers.samplers.block_diffusion.cache import BlockDiffusionCache
from workers.samplers.block_diffusion.forward import (
    OFFICIAL_FORWARD_BLOCK,
    BlockDiffusionForward,
    ForwardPlan,
    Kind,
)
from workers.samplers.block_diffusion.graphs import BlockDiffusionGraphs
from workers.samplers.block_diffusion.tokens import choose_tokens, commit
from workers.samplers.prompt_batch import check_bidirectional, check_prompt_batch


@dataclass(frozen=True)
class BlockDiffusionStep:
    """What one forward did: its index, its kind, the block it worked on, and the tokens it committed."""

    step: int
    kind: Kind
    block: int  # -1 for the prefill
    committed: int | Tensor  # positions committed over the batch (a 0-d tensor where a rule decided: read it late)
    forwards: int = 1


class BlockDiffusionSampler:
    """The state of one generation; iterate it to run one forward per `next()`. Build it with `block_diffusion_steps`.

    `x` `[B, P + capacity]` holds the prompt followed by mask ids, committed in place."""

    def __init__(
        self,
        model: nn.Module,
        prompt_ids: Tensor,
        *,
        max_new_tokens: int,
        block_length: int,
        sub_block_length: int,
        mask_id: int,
        threshold: float = 1.0,
        stop_token_id: int | None = None,
        temperature: float = 0.0,
        top_p: float = 0.95,
        generator: torch.Generator | None = None,
        sub_block_cache: bool = False,
        commit_mask_predictions: bool = True,
        prefill_one_block_prompt: bool = False,
        gen_length: int | None = None,
        graphs: BlockDiffusionGraphs | None = None,
    ) -> None:
        """model: a Qwen2ForCausalLM with bidirectional attention (`make_dream_bidirectional`); prompt_ids `[B, P]`.
        max_new_tokens / block_length / sub_block_length / threshold / temperature / top_p / stop_token_id: the
        official arguments (`small_block_size` is the sub-block; None stops on nothing). mask_id: the [MASK] id
        (from the tokenizer or config, never a literal). generator: the RNG of a sampled draw (None: torch's global
        one, as the official code uses). graphs: the `graph` variant's captured forwards for this batch shape
        (`bd_graphs.BlockDiffusionGraphs`, kept by the caller between generations)."""
        batch, prompt_length = prompt_ids.shape
        _check_arguments(model, prompt_ids, max_new_tokens, block_length, sub_block_length, mask_id, threshold,
                         temperature, top_p, gen_length)  # fmt: skip
        self.model = model
        self.mask_id = mask_id
        self.block_length = block_length
        self.sub_block_length = sub_block_length
        self.threshold = float(threshold)
        self.stop_token_id = stop_token_id
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.generator = generator
        self.sub_block_cache = sub_block_cache
        self.excluded_id = None if commit_mask_predictions else mask_id
        self.prefill = prefills(prompt_length, block_length, prefill_one_block_prompt)
        self.prompt_length = prompt_length
        self.num_blocks = max_new_tokens // block_length
        self.gen_length = gen_length
        prefill_length = prompt_length // block_length * block_length if self.prefill else 0
        capacity = _official_length(prompt_length, self.num_blocks, block_length, self.prefill)
        self.x = torch.full((batch, capacity), mask_id, dtype=torch.long, device=prompt_ids.device)  # [B, L]
        self.x[:, :prompt_length] = prompt_ids
        cache_length = max(prefill_length + self.num_blocks * block_length, 1)
        if graphs is not None:
            cache = graphs.prepare(batch, cache_length)
        else:
            layers = model.config.get_text_config(decoder=True).num_hidden_layers
            cache = BlockDiffusionCache(layers, cache_length)
        self._forward = BlockDiffusionForward(model, cache, graphs)
        self.forward_log: list[list[object]] = []  # what each forward fed, as the official forward log records it
        self._cached = 0  # positions in the KV cache's committed prefix
        self._length = prompt_length  # the official sequence's length so far (what generate would return)
        self._block = -1
        self._plans = self._host_loop()
        self._plan: ForwardPlan | None = None
        self._finished = False

    # ---------------------------------------------------------------- the step protocol

    @property
    def done(self) -> bool:
        """Whether the generation is over (decides the next forward first: host reads, outside a step timer)."""
        self.prepare_step()
        return self._finished

    @property
    def forwards(self) -> int:
        return len(self.forward_log)

    @property
    def kv_cache(self) -> BlockDiffusionCache:
        return self._forward.cache

    @property
    def cache_bytes(self) -> int:
        return self._forward.cache.nbytes

    @property
    def sequences(self) -> Tensor:
        """What the official `generate` returns: the sequence so far, cut after the first row's first stop token."""
        x = self.x[:, : self._length]
        stop = self._first_stop(self.prompt_length, self._length)
        return x if stop is None else x[:, : self.prompt_length + stop + 1]

    @property
    def generation(self) -> Tensor:
        """The generated positions: `[B, gen_length]` (a run's tokens), else all of the official sequence's."""
        end = self._length if self.gen_length is None else self.prompt_length + self.gen_length
        return self.x[:, self.prompt_length : end]

    def __iter__(self) -> Iterator[BlockDiffusionStep]:
        return self

    @torch.no_grad()
    def prepare_step(self) -> None:
        """Decide the next forward (its host reads happen here); idempotent, and `next()` calls it too."""
        if self._plan is None and not self._finished:
            self._plan = next(self._plans, None)
            self._finished = self._plan is None

    @torch.no_grad()
    def __next__(self) -> BlockDiffusionStep:
        self.prepare_step()
        plan = self._plan
        if plan is None:
            raise StopIteration
        self._plan = None
        logits = self._forward.logits(plan, self.x)  # [B, kept, V]
        if plan.append_at is not None:
            head = logits[:, -1]  # [B, V]: the next-token head's raw logits, argmax as the official code takes it
            if self.excluded_id is not None:
                head = head.index_fill(-1, torch.tensor([self.excluded_id], device=head.device), float("-inf"))
            self.x[:, plan.append_at] = head.argmax(dim=-1)
            committed: int | Tensor = self.x.shape[0]
        elif plan.kind == "prefill":
            committed = 0
        else:
            tokens, confidence = choose_tokens(
                logits, temperature=self.temperature, top_p=self.top_p, generator=self.generator,
                excluded_id=self.excluded_id,
            )  # fmt: skip
            lo, hi = plan.commit
            committed = commit(self.x[:, lo:hi], tokens, confidence, mask_id=self.mask_id, threshold=self.threshold)
        self.forward_log.append(plan.record)
        return BlockDiffusionStep(step=len(self.forward_log) - 1, kind=plan.kind, block=self._block, committed=committed)

    # ---------------------------------------------------------------- the official loop, on the host

    def _host_loop(self) -> Iterator[ForwardPlan]:
        """The official `generate`'s loops: yields each forward's plan; the caller runs it before the loop goes on."""
        bs, sbs, prompt = self.block_length, self.sub_block_length, self.prompt_length
        if self.prefill:
            n = prompt // bs * bs
            token = prompt % bs == 0
            yield ForwardPlan("prefill", fed=(0, n), cache_start=0, visible=n, keep=(n - 1, n), mask_block=bs,
                              append_at=prompt if token else None, grows_cache=True)  # fmt: skip
            self._cached, self._length = n, prompt + token
        for block in range(self.num_blocks):
            if self._first_stop(prompt, self._length) is not None:
                return
            if self.gen_length is not None and self._length >= prompt + self.gen_length:
                return
            self._block = block
            start = self._length  # the official `prompt_length` of this block
            end = start + bs - start % bs
            lo, cached = end - bs, self._cached
            self._length = end
            ready = False  # the sub-block cache holds this block's keys (a full forward of it ran)
            while True:
                view = _BlockView(self.x, lo, end, self.mask_id)
                if self._stop_rule(start, end) or self._wanted(view):
                    return
                if not view.masked(lo, end):
                    yield ForwardPlan("complete", fed=(lo, end), cache_start=cached, visible=cached + bs,
                                      keep=(bs - 1, bs), mask_block=None, append_at=end, grows_cache=True)  # fmt: skip
                    self._cached, self._length = cached + bs, end + 1
                    break
                for s0 in range(0, bs, sbs):
                    while True:
                        view = _BlockView(self.x, lo, end, self.mask_id)
                        if not view.masked(lo + s0, lo + s0 + sbs):
                            break
                        if self._stop_rule(start, end):
                            break
                        if self._wanted(view):
                            return
                        sub = (lo + s0, lo + s0 + sbs)
                        if self.sub_block_cache and ready and not view.masked(lo + s0, lo + s0 + 1):
                            yield ForwardPlan("sub", fed=sub, cache_start=cached + s0, visible=cached + bs,
                                              keep=(0, sbs), mask_block=None, commit=sub, sub_block_offset=s0)
                        else:
                            yield ForwardPlan("block", fed=(lo, end), cache_start=cached, visible=cached + bs,
                                              keep=(s0, s0 + sbs), mask_block=OFFICIAL_FORWARD_BLOCK, commit=sub)
                            ready = True

    def _wanted(self, view: _BlockView) -> bool:
        """Whether the run's `gen_length` positions are all committed (never, without a gen_length)."""
        if self.gen_length is None:
            return False
        wanted_end = self.prompt_length + self.gen_length
        return wanted_end <= view.end + 1 and not view.masked(max(self.prompt_length, view.lo), wanted_end)

    def _stop_rule(self, start: int, end: int) -> bool:
        """The official in-block stop: the row-major first stop token of the block's new positions, if no row has
        a mask before its column."""
        column = self._first_stop(start, end)
        return column is not None and not bool((self.x[:, start : start + column] == self.mask_id).any())

    def _first_stop(self, start: int, end: int) -> int | None:
        """The column (from `start`) of the first stop token in row-major order over `[start, end)`, or None."""
        if self.stop_token_id is None:
            return None
        found = (self.x[:, start:end] == self.stop_token_id).nonzero()
        return int(found[0, 1]) if found.numel() else None


class _BlockView:
    """One host read of a block's tokens and the slot after it: `x[:, lo : end + 1]`."""

    def __init__(self, x: Tensor, lo: int, end: int, mask_id: int) -> None:
        self.lo, self.end = lo, end
        self.is_mask = (x[:, lo : end + 1] == mask_id).cpu()  # [B, block + 1], the one sync

    def masked(self, lo: int, hi: int) -> bool:
        """Whether any row holds a mask in `[lo, hi)` (sequence positions inside the view)."""
        if hi <= lo:
            return False
        return bool(self.is_mask[:, lo - self.lo : hi - self.lo].any())


def _official_length(prompt_length: int, num_blocks: int, block_length: int, prefill: bool) -> int:
    """The sequence's length once `num_blocks` blocks are done: each fills up to the next block boundary and adds
    the next token."""
    length = prompt_length + (prefill and prompt_length % block_length == 0)
    if num_blocks == 0:
        return length
    return length + block_length - length % block_length + 1 + (num_blocks - 1) * block_length


def block_diffusion_steps(model: nn.Module, prompt_ids: Tensor, **settings: object) -> BlockDiffusionSampler:
    """Set up a generation (the arguments of `BlockDiffusionSampler`); iterating it runs one forward at a time."""
    return BlockDiffusionSampler(model, prompt_ids, **settings)  # type: ignore[arg-type]


def block_diffusion_generate(model: nn.Module, prompt_ids: Tensor, **settings: object) -> Tensor:
    """Run `block_diffusion_steps` to the end; returns what the official `generate` returns (`sequences`)."""
    sampler = block_diffusion_steps(model, prompt_ids, **settings)
    for _ in sampler:
        pass
    return sampler.sequences


def _check_arguments(
    model: nn.Module, prompt_ids: Tensor, max_new_tokens: int, block_length: int, sub_block_length: int,
    mask_id: int, threshold: float, temperature: float, top_p: float, gen_length: int | None,
) -> None:  # fmt: skip
    """What the official loop needs of its inputs, as errors that say what to fix."""
    check_bidirectional(model, "block diffusion attends bidirectionally inside a block",
                        "apply workers.models.dream_model.make_dream_bidirectional first")
    config = model.config
    check_prompt_batch(prompt_ids, None)
    if max_new_tokens < 0 or min(block_length, sub_block_length) <= 0:
        raise ValueError(f"max_new_tokens must be >= 0 and block_length and sub_block_length positive, got "
                         f"{max_new_tokens}, {block_length}, {sub_block_length}")  # fmt: skip
    if block_length % sub_block_length:
        raise ValueError(f"sub_block_length {sub_block_length} must divide block_length {block_length}: the official "
                         "loop decodes block // sub_block sub-blocks and never ends on the rest")  # fmt: skip
    if not 0 <= mask_id < int(config.vocab_size):
        raise ValueError(f"mask_id {mask_id} is not in the model's vocabulary [0, {config.vocab_size})")
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if temperature < 0 or not 0 < top_p <= 1:
        raise ValueError(f"temperature must be >= 0 and top_p in (0, 1], got {temperature} and {top_p}")
    if temperature > 0 and prompt_ids.shape[0] > 1:
        raise ValueError("temperature > 0 samples the first row only in the official code: sample one row at a time")
    if gen_length is not None and gen_length <= 0:
        raise ValueError(f"gen_length must be positive, got {gen_length}")
    if getattr(config, "_attn_implementation", None) == "flash_attention_2":
        raise ValueError("the prefill's block-causal mask needs a kernel that takes a 4-D mask: use sdpa or eager")
