"""LLaDA's semi-autoregressive masked-diffusion sampler, exposed as an iterator of steps.

The algorithm is the one of the official `generate.py` of ML-GSAI/LLaDA (newest version: batched prompts
with left padding, semi-autoregressive blocks, low-confidence and random remasking, Gumbel-max temperature
in float64, classifier-free guidance, EOS/EoT suppression; Nie et al. 2025, "Large Language Diffusion
Models", arXiv:2502.09992). Given the same model, prompt, settings and RNG state it commits the
same tokens in the same order, and draws the same random numbers; what differs is only how much work each
step does:

* Logits are projected only over the positions that can be committed in the current block (the official
  code projects and soft-maxes every position, then throws all but the block away). `full_logits=True`
  restores the official full projection; see `llada_steps` for when that matters.
* The per-row `topk` loop is one batched `topk`: every block starts fully masked (nothing right of the
  current block is ever committed), so every row has the same masked count, hence the same transfer
  schedule, which is therefore known on the host and costs no device sync.
* The attention mask is prepared once, not rebuilt (and checked with a device sync) at every forward.
  The only host syncs are at setup and one per block (to find the block's window), in `prepare_step`,
  which a caller that times steps runs before starting a step's timer; none inside a step.
* Gumbel noise at temperature > 0 is drawn only where it is read. On the CPU the generator still advances
  exactly as the official `rand_like(logits)` over `[B, L, V]` does (CPU draws are sequential, so the
  unread rows are drawn in window-sized chunks and dropped); on CUDA only the window's `[B, W, V]` is
  drawn (66 GB less at B=32, L=2048), which samples the same distribution but not the official numbers.

Token-exact parity with the official sampler is proven on the CPU (tests/test_llada_sampler.py). On CUDA
two things may legitimately break an exact tie differently, so parity there is not claimed: `torch.topk`
does not specify the order of equal values, and the CPU and CUDA kernels may order equal confidences
differently; and the block-only logits matmul has fewer rows than the official full one, so cuBLAS may
pick another kernel whose bf16 rounding differs in the last bit, which can flip a near-tie between two
tokens. `tests/gpu/` measures how often the second happens in bf16.

Iterating runs one step per `next()`: one model forward (one NFE; CFG doubles the batch, not the NFE) and
one commit. The sampler never times itself (STYLE 4): the caller wraps each `next()` in a timer.

Accelerated variants (Fast-dLLM, arXiv:2505.22618) change what a step computes, never the commit order
among the positions a step chooses:

* `cache="prefix"` / `"dual"`: the block's first step is the vanilla full forward, which also fills a KV
  cache (`block_cache.BlockCache`); the block's later steps feed only the window and what lies right of
  it (prefix) or the window alone (dual), attending to the cached keys and values of the rest
  (`llada_forward.LladaForward`, which runs every forward of a generation).
* `threshold` / `factor`: each step commits every candidate the confidence rule accepts, at least the
  schedule's count (`parallel.parallel_commit`); a block ends as soon as no row has a candidate left, so
  the forwards vary. Whether the block is over is read once per step, but between steps: the step leaves
  its flag on the device and `prepare_step` (or `done`) reads it, so the sync falls outside a step's timer
  as the per-block one does, and the step's committed count stays a 0-d tensor until its reader wants it.
* `graphs` (`llada_graphs.LladaGraphs`, the `graph` variant): each forward is replayed from a captured CUDA
  graph (inductor-compiled on a CPU) instead of dispatched operator by operator; the numbers are the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from workers.samplers.llada.block_cache import BlockCache
from workers.samplers.llada.forward import LladaForward
from workers.samplers.llada.graphs import LladaGraphs
from workers.samplers.llada.settings import (
    CACHES,
    REMASKING_STRATEGIES,
    Cache,
    LladaStep,
    Remasking,
    check_arguments,
    check_variant,
    official_suppress_ids,
    transfer_schedule,
)
from workers.samplers.llada.parallel import parallel_commit

__all__ = [
    "CACHES",
    "REMASKING_STRATEGIES",
    "Cache",
    "LladaSampler",
    "LladaStep",
    "Remasking",
    "llada_generate",
    "llada_steps",
    "official_suppress_ids",
    "transfer_schedule",
]

NEG_INF = float("-inf")
# The official code samples the Gumbel-max noise in float64: with low precision Gumbel-max the perplexity
# improves but generation quality drops (arXiv:2409.02908, cited by the official generate.py).
GUMBEL_DTYPE = torch.float64


class LladaSampler:
    """The state of one LLaDA generation; iterate it to run one denoising step per `next()`.

    `x` `[B, P+G]` holds the prompt followed by the generation region, `mask_id` where still masked.
    Build it with `llada_steps`.
    """

    def __init__(
        self,
        model: nn.Module,
        prompt_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        gen_length: int,
        block_length: int,
        steps: int,
        mask_id: int,
        temperature: float = 0.0,
        cfg_scale: float = 0.0,
        remasking: Remasking = "low_confidence",
        generator: torch.Generator | None = None,
        logits_suppress_ids: Sequence[int] = (),
        confidence_suppress_ids: Sequence[int] = (),
        full_logits: bool = False,
        cache: Cache = "none",
        threshold: float | None = None,
        factor: float | None = None,
        refresh_every_step: bool = False,
        graphs: LladaGraphs | None = None,
    ) -> None:
        """Set up a LLaDA generation; iterating it runs one step (one NFE) at a time.

        model: a bidirectional mask predictor (transformers causal-LM interface, `config.is_causal=False`).
        prompt_ids `[B, P]`, attention_mask `[B, P]` (1 = token, 0 = left padding) or None.
        gen_length / block_length / steps: as in the official sampler; `steps // (gen_length // block_length)`
            steps per block, and `steps <= gen_length`.
        mask_id: the [MASK] token id (from the tokenizer or config, never a literal).
        temperature: 0 is greedy; > 0 Gumbel-max in float64. cfg_scale: 0 disables classifier-free guidance.
        remasking: "low_confidence" (commit the most probable predictions) or "random".
        generator: the RNG for temperature and random remasking; None uses torch's global generator, as the
            official code does.
        logits_suppress_ids: ids whose logits are set to -inf before sampling (official `logits_eos_inf`).
        confidence_suppress_ids: ids set to -inf in the softmax that scores confidence (official
            `confidence_eos_eot_inf`); `official_suppress_ids` maps the official flags onto both lists.
        full_logits: project logits at every position, as the official code does. The default projects only
            the current block: the same numbers wherever a matmul's rows do not depend on how many rows it
            has (true for the CPU shapes tested, M = B*block >= 16), but a BLAS may choose another kernel for
            fewer rows and round the last bit differently, which can flip an exact near-tie.
        cache: "none" (vanilla), "prefix" or "dual": the Fast-dLLM KV caches (module docstring).
        threshold / factor: the confidence rules of parallel decoding (`parallel.parallel_commit`); at most
            one, only with low-confidence remasking. None of cache, threshold, factor: the vanilla sampler.
        refresh_every_step: a test option of the caches: refill the cache before every step (two forwards a
            step), so a cached variant must reproduce vanilla's tokens.
        graphs: the `graph` variant's captured forwards for this batch shape and cache (`LladaGraphs`, kept by
            the caller between generations); None runs every forward eagerly.
        """
        check_arguments(
            model, prompt_ids, attention_mask, gen_length, block_length, steps, mask_id, temperature,
            cfg_scale, remasking, logits_suppress_ids, confidence_suppress_ids,
        )  # fmt: skip
        check_variant(cache, threshold, factor, remasking)
        device = prompt_ids.device
        batch, prompt_length = prompt_ids.shape
        self.model = model
        self.mask_id = mask_id
        self.temperature = float(temperature)
        self.cfg_scale = float(cfg_scale)
        self.remasking: Remasking = remasking
        self.generator = generator
        self.prompt_length = prompt_length
        self.gen_length = gen_length
        self.block_length = block_length
        self.num_blocks = gen_length // block_length
        self.steps = steps
        self.steps_per_block = steps // self.num_blocks
        self.schedule = transfer_schedule(block_length, self.steps_per_block)
        self.full_logits = full_logits
        self.threshold = threshold
        self.factor = factor
        self.refresh_every_step = refresh_every_step
        self.cache_mode: Cache = cache

        self.x = torch.full(
            (batch, prompt_length + gen_length), mask_id, dtype=torch.long, device=device
        )  # [B, L]
        self.x[:, :prompt_length] = prompt_ids
        self._forward = LladaForward(
            model, attention_mask, self.x != mask_id, gen_length=gen_length, mask_id=mask_id,
            cfg_scale=self.cfg_scale, cache=cache, refresh_every_step=refresh_every_step, graphs=graphs,
        )  # fmt: skip
        self._logits_ids = _id_tensor(logits_suppress_ids, device)
        self._confidence_ids = _id_tensor(confidence_suppress_ids, device)
        self._noise: Tensor | None = None  # [B, W, V] float64, allocated on the first tempered step
        self._scratch: Tensor | None = None  # [W, V] float64: CPU rows drawn only to advance the generator
        self._window: tuple[int, int] = (0, 0)  # [lo, hi): positions whose logits the current block needs
        self._prepared = -1  # the block whose window has been found
        self._step = 0  # steps run so far, over the whole generation
        self._block = 0  # the block the next step works on
        self._block_step = 0  # steps already run in that block
        self._forwards = 0
        # A parallel step's (block, "the block still has masks" flag on the device), read between steps.
        self._pending: tuple[int, Tensor] | None = None

    @property
    def done(self) -> bool:
        """Whether every block is filled. After a parallel step this reads its pending flag (one host sync)."""
        self._settle()
        return self._block == self.num_blocks

    @property
    def block(self) -> int:
        """The block the next step works on (`num_blocks` once done)."""
        return self._block

    @property
    def parallel(self) -> bool:
        """Whether a confidence rule (threshold or factor) decides how many positions a step commits."""
        return self.threshold is not None or self.factor is not None

    @property
    def forwards(self) -> int:
        """Model forwards run so far (CFG doubles the batch of a forward, not their count)."""
        return self._forwards

    @property
    def kv_cache(self) -> BlockCache | None:
        """The block cache of a cached variant (None for vanilla), for the check that it was written."""
        return self._forward.cache

    @property
    def cache_bytes(self) -> int | None:
        """Bytes the KV cache holds (allocated once, at the first step, so also its peak); None: no cache."""
        cache = self._forward.cache
        return None if cache is None else cache.nbytes

    @property
    def generation(self) -> Tensor:
        """The generation region of `x`: `[B, G]`."""
        return self.x[:, self.prompt_length :]

    def __iter__(self) -> Iterator[LladaStep]:
        return self

    @torch.no_grad()
    def prepare_step(self) -> None:
        """Do the host-side work of the next step ahead of it: at a block's first step, find the block's
        window (one host sync); after a parallel step, read whether its block is over (one more). Idempotent;
        `next()` calls it too, so plain iteration needs nothing else."""
        if self.done:
            return
        block = self._block
        if self._prepared != block:
            self._start_block(self.prompt_length + (block + 1) * self.block_length)
            self._prepared = block

    @torch.no_grad()
    def __next__(self) -> LladaStep:
        if self.done:
            raise StopIteration
        block, i = self._block, self._block_step
        k = self.schedule[i]
        block_end = self.prompt_length + (block + 1) * self.block_length
        self.prepare_step()
        lo, hi = self._window
        x = self.x  # [B, L]
        batch, length = x.shape

        logits, forwards = self._forward.logits(x, refresh=i == 0)  # [B, W, V], W = hi - lo
        if self._logits_ids is not None:
            logits.index_fill_(-1, self._logits_ids, NEG_INF)

        if self.temperature > 0:
            x0 = self._gumbel_argmax(logits, lo, hi)  # [B, W]
        else:
            x0 = logits.argmax(dim=-1)  # [B, W]

        if self.remasking == "low_confidence":
            if self._confidence_ids is not None:
                logits.index_fill_(-1, self._confidence_ids, NEG_INF)
            p = torch.softmax(logits, dim=-1)  # [B, W, V]
            x0_p = p.gather(-1, x0.unsqueeze(-1)).squeeze(-1)  # [B, W]
            del p
        else:
            # Drawn over the whole sequence, as the official code does, to consume the same random numbers.
            x0_p = torch.rand((batch, length), generator=self.generator, device=x.device)[:, lo:hi]  # [B, W]

        candidate = x[:, lo:hi] == self.mask_id  # [B, W]
        if hi > block_end:  # full_logits: nothing right of the current block may be committed yet
            candidate[:, block_end - lo :] = False
        if self.parallel:
            committed, still_open = self._commit_parallel(x0, x0_p, candidate, k, lo, block_end)
            self._pending = (block, still_open)
            return self._record(block, committed, forwards)
        # The confidence row spans the whole sequence (-inf off the window) so that `topk` sees exactly the
        # row the official code gives it, and breaks ties among equal confidences the same way.
        confidence = torch.full((batch, length), NEG_INF, dtype=x0_p.dtype, device=x.device)  # [B, L]
        confidence[:, lo:hi] = torch.where(candidate, x0_p, NEG_INF)
        # Every row has >= k finite candidates (its block still holds >= k masks), so topk picks only
        # masked positions inside the window: the official `where(mask_index, x0, x)` is a no-op there.
        chosen = torch.topk(confidence, k, dim=-1).indices  # [B, k]
        x.scatter_(1, chosen, x0.gather(1, chosen - lo))
        return self._record(block, k * batch, forwards)

    def _commit_parallel(
        self, x0: Tensor, x0_p: Tensor, candidate: Tensor, k: int, lo: int, block_end: int
    ) -> tuple[Tensor, Tensor]:
        """Commit what the confidence rule accepts in each row; returns (tokens committed, whether the block
        still has masks), both 0-d tensors left on the device: nothing here reads them."""
        confidence = torch.where(candidate, x0_p, NEG_INF)  # [B, W]
        chosen, counts = parallel_commit(confidence, k, threshold=self.threshold, factor=self.factor)  # [B, W], [B]
        window = self.x[:, lo : lo + confidence.shape[-1]]  # [B, W], a view
        window.copy_(torch.where(chosen, x0, window))
        return counts.sum(), (self.x[:, lo:block_end] == self.mask_id).any()

    def _record(self, block: int, committed: int | Tensor, forwards: int) -> LladaStep:
        """Count the step and move to the next block once this one has had its steps (a parallel step's
        block may end earlier: `_settle` reads that between steps)."""
        record = LladaStep(step=self._step, block=block, committed=committed, forwards=forwards)
        self._step += 1
        self._forwards += forwards
        self._block_step += 1
        if self._block_step == self.steps_per_block:
            self._block, self._block_step = self._block + 1, 0
        return record

    def _settle(self) -> None:
        """Read the last parallel step's flag (a host sync, between steps) and end its block if no mask is left.
        A block that already had all its steps has moved on, and its flag no longer matters."""
        if self._pending is None:
            return
        block, still_open = self._pending
        self._pending = None
        if block == self._block and not bool(still_open):
            self._block, self._block_step = self._block + 1, 0

    def _start_block(self, block_end: int) -> None:
        """Choose the positions `[lo, hi)` whose logits this block needs: those that can be committed.

        Candidates are the masked positions left of `block_end`. Normally that is the block itself, but a
        mask id in the prompt (infilling), or a committed prediction that is itself `mask_id` (the official
        algorithm allows it), leaves masks further left, which stay candidates. Commits only happen inside
        the window, so the leftmost mask at the block's start bounds the window for all its steps; finding
        it costs one device sync per block.
        """
        length = self.x.shape[1]
        if self.full_logits:
            self._window = (0, length)
            self._forward.set_window(0, length, 0, length, self.x.device)
            return
        block_start = block_end - self.block_length
        left_masks = (self.x[:, :block_start] == self.mask_id).any(dim=0).nonzero()  # [n, 1]
        lo = int(left_masks[0, 0]) if left_masks.numel() else block_start
        self._window = (lo, block_end)
        keep = torch.arange(lo, block_end, device=self.x.device)
        self._forward.set_window(lo, block_end, keep, length, self.x.device)

    def _gumbel_argmax(self, logits: Tensor, lo: int, hi: int) -> Tensor:
        """Gumbel-max sample `[B, W]`: argmax of exp(logits) / (-log u)^T, in float64 like the official code.

        Only the window's noise `[B, W, V]` is kept. On the CPU the official `rand_like` over `[B, L, V]` is
        reproduced number for number: row b's positions [0, lo) and [hi, L) are drawn too, in chunks of at
        most W positions into a scratch buffer, and dropped. On CUDA only the window is drawn (see the
        module docstring).
        """
        batch, length = self.x.shape
        vocab, width = logits.shape[-1], hi - lo
        if self._noise is None or self._noise.shape != (batch, width, vocab):
            self._noise = torch.empty((batch, width, vocab), dtype=GUMBEL_DTYPE, device=logits.device)
        if _draws_official_stream(logits.device):
            for b in range(batch):
                self._skip_draws(lo, vocab, logits.device)  # positions [0, lo) of row b
                self._noise[b].uniform_(generator=self.generator)  # [W, V]
                self._skip_draws(length - hi, vocab, logits.device)  # positions [hi, L)
        else:
            self._noise.uniform_(generator=self.generator)
        gumbel = self._noise.log_().neg_().pow_(self.temperature)  # [B, W, V]
        scores = logits.to(GUMBEL_DTYPE, copy=True).exp_().div_(gumbel)  # [B, W, V]
        return scores.argmax(dim=-1)

    def _skip_draws(self, positions: int, vocab: int, device: torch.device) -> None:
        """Advance the generator by `positions` x `vocab` float64 uniforms, a window-sized chunk at a time."""
        chunk = max(1, self._window[1] - self._window[0])
        if self._scratch is None or self._scratch.shape != (chunk, vocab):
            self._scratch = torch.empty((chunk, vocab), dtype=GUMBEL_DTYPE, device=device)
        while positions > 0:
            rows = min(positions, chunk)
            self._scratch[:rows].uniform_(generator=self.generator)
            positions -= rows


def llada_steps(
    model: nn.Module, prompt_ids: Tensor, attention_mask: Tensor | None = None, **settings: Any
) -> LladaSampler:
    """Set up a LLaDA generation (the arguments of `LladaSampler`); iterating the result runs it one step
    (one NFE) at a time."""
    return LladaSampler(model, prompt_ids, attention_mask, **settings)


def llada_generate(
    model: nn.Module, prompt_ids: Tensor, attention_mask: Tensor | None = None, **settings: Any
) -> Tensor:
    """Run `llada_steps` (same arguments) to the end; returns the tokens `[B, P+G]` (prompt, then the
    generation)."""
    sampler = llada_steps(model, prompt_ids, attention_mask, **settings)
    for _ in sampler:
        pass
    return sampler.x


def _draws_official_stream(device: torch.device) -> bool:
    """CPU draws are sequential, so skipping by drawing reproduces the official stream; CUDA's Philox layout
    depends on the launch configuration of the whole tensor, so no chunking can."""
    return device.type == "cpu"


def _id_tensor(ids: Sequence[int], device: torch.device) -> Tensor | None:
    return torch.tensor(sorted(set(ids)), dtype=torch.long, device=device) if ids else None
