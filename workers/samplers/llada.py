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
  it (prefix) or the window alone (dual), attending to the cached keys and values of the rest.
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
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor, nn
from transformers.masking_utils import create_bidirectional_mask

from workers.models.cache_kwarg import cache_kwargs
from workers.samplers.block_cache import BlockCache
from workers.samplers.llada_graphs import LladaGraphs
from workers.samplers.parallel import parallel_commit

Remasking = Literal["low_confidence", "random"]
REMASKING_STRATEGIES: tuple[str, ...] = get_args(Remasking)
Cache = Literal["none", "prefix", "dual"]
CACHES: tuple[str, ...] = get_args(Cache)

NEG_INF = float("-inf")
# The official code samples the Gumbel-max noise in float64: with low precision Gumbel-max the perplexity
# improves but generation quality drops (arXiv:2409.02908, cited by the official generate.py).
GUMBEL_DTYPE = torch.float64


@dataclass(frozen=True)
class LladaStep:
    """What one step did: which step of which block, and how many tokens it committed over the batch."""

    step: int  # 0 .. steps-1, over the whole generation
    block: int  # 0 .. num_blocks-1, the semi-autoregressive block being filled
    # Positions committed this step (the schedule's count), summed over the batch rows. A committed
    # prediction may itself be `mask_id`; the official algorithm allows that and revisits the position.
    # With a threshold or factor rule it is what the rule chose, at least the schedule's count per open row,
    # as a 0-d tensor: reading it syncs, so a timing caller reads it after its timed region.
    committed: int | Tensor
    forwards: int = 1  # model forwards this step ran (2 only with the cache test option refresh_every_step)


def transfer_schedule(block_length: int, steps_per_block: int) -> list[int]:
    """Tokens to commit at each step of one block.

    LLaDA's linear noise schedule (paper Eq. 8) makes the expected number of tokens unmasked per step
    constant, so the official `get_num_transfer_tokens` spreads a block's masked count evenly over its
    steps, the remainder going to the earliest steps. A block is always fully masked when its turn comes,
    so its masked count is `block_length` in every row and the schedule is the same for all rows.
    """
    base, remainder = divmod(block_length, steps_per_block)
    return [base + (1 if i < remainder else 0) for i in range(steps_per_block)]


def official_suppress_ids(
    *,
    eos_id: int,
    eot_id: int,
    logits_eos_inf: bool,
    confidence_eos_eot_inf: bool,
    temperature: float,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Map the official `logits_eos_inf` / `confidence_eos_eot_inf` flags onto our two id lists.

    Returns `(logits_suppress_ids, confidence_suppress_ids)`. Paper Appendix B.4: EOS may be banned from
    sampling (`logits_eos_inf`), and EOS/EoT may be kept from looking confident (`confidence_eos_eot_inf`).
    The official code does the latter with `logits_with_noise[..., EOS] = logits[..., EoT] = -inf` after
    sampling: at temperature 0 `logits_with_noise` *is* `logits`, so both ids reach the confidence softmax;
    at temperature > 0 it is a fresh float64 tensor that is never read again, so only EoT does. We
    reproduce that, since the goal is the official tokens.
    """
    logits_ids = (eos_id,) if logits_eos_inf else ()
    if not confidence_eos_eot_inf:
        return logits_ids, ()
    return logits_ids, ((eos_id, eot_id) if temperature == 0 else (eot_id,))


class LladaSampler:
    """The state of one LLaDA generation; iterate it to run one denoising step per `next()`.

    `x` `[B, P+G]` holds the prompt followed by the generation region, `mask_id` where still masked.
    Build it with `llada_steps`.
    """

    def __init__(
        self,
        model: nn.Module,
        prompt_ids: Tensor,
        attention_mask: Tensor | None,
        *,
        gen_length: int,
        block_length: int,
        steps: int,
        mask_id: int,
        temperature: float,
        cfg_scale: float,
        remasking: Remasking,
        generator: torch.Generator | None,
        logits_suppress_ids: Sequence[int],
        confidence_suppress_ids: Sequence[int],
        full_logits: bool,
        cache: Cache = "none",
        threshold: float | None = None,
        factor: float | None = None,
        refresh_every_step: bool = False,
        graphs: LladaGraphs | None = None,
    ) -> None:
        _check_arguments(
            model, prompt_ids, attention_mask, gen_length, block_length, steps, mask_id, temperature,
            cfg_scale, remasking, logits_suppress_ids, confidence_suppress_ids,
        )  # fmt: skip
        _check_variant(cache, threshold, factor, remasking)
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
        # Positions the unconditional (CFG) half re-masks: the prompt as it was given, pads included.
        self._prompt_index = self.x != mask_id  # [B, L]
        self._attn = _prepare_attention_mask(model, attention_mask, gen_length, double=cfg_scale > 0)
        self._logits_ids = _id_tensor(logits_suppress_ids, device)
        self._confidence_ids = _id_tensor(confidence_suppress_ids, device)
        self._noise: Tensor | None = None  # [B, W, V] float64, allocated on the first tempered step
        self._scratch: Tensor | None = None  # [W, V] float64: CPU rows drawn only to advance the generator
        self._window: tuple[int, int] = (0, 0)  # [lo, hi): positions whose logits the current block needs
        self._keep: Tensor | int = 0  # logits_to_keep for that window
        self._prepared = -1  # the block whose window has been found
        self._step = 0  # steps run so far, over the whole generation
        self._block = 0  # the block the next step works on
        self._block_step = 0  # steps already run in that block
        self._forwards = 0
        # A parallel step's (block, "the block still has masks" flag on the device), read between steps.
        self._pending: tuple[int, Tensor] | None = None
        layers = model.config.get_text_config(decoder=True).num_hidden_layers
        self._graphs = graphs
        if graphs is not None:
            rows = batch * (2 if cfg_scale > 0 else 1)
            if not graphs.matches(rows, prompt_length + gen_length, cache):
                raise ValueError(
                    f"the captured forwards were built for {graphs.rows} rows of {graphs.length} positions with "
                    f"cache {graphs.cache_mode!r}, not {rows} of {prompt_length + gen_length} with {cache!r}"
                )
            self._cache = graphs.cache  # the graphs write their own cache, which outlives this generation
        else:
            self._cache = BlockCache(layers, prompt_length + gen_length) if cache != "none" else None
        self._feed: tuple[int, int] = (0, 0)  # [start, end): positions a cached forward feeds
        self._feed_positions: Tensor | None = None  # [1, end - start]
        self._feed_keep: Tensor | None = None  # the window's indices within the fed positions

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
        return self._cache

    @property
    def cache_bytes(self) -> int | None:
        """Bytes the KV cache holds (allocated once, at the first step, so also its peak); None: no cache."""
        return None if self._cache is None else self._cache.nbytes

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

        logits, forwards = self._logits(refresh=i == 0)  # [B, W, V], W = hi - lo
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
            self._window, self._keep = (0, length), 0
            self._set_feed()
            return
        block_start = block_end - self.block_length
        left_masks = (self.x[:, :block_start] == self.mask_id).any(dim=0).nonzero()  # [n, 1]
        lo = int(left_masks[0, 0]) if left_masks.numel() else block_start
        self._window = (lo, block_end)
        self._keep = torch.arange(lo, block_end, device=self.x.device)
        self._set_feed()

    def _set_feed(self) -> None:
        """A cached forward feeds the window and, for a prefix cache, everything right of it."""
        if self._cache is None:
            return
        lo, hi = self._window
        start, end = lo, (self.x.shape[1] if self.cache_mode == "prefix" else hi)
        device = self.x.device
        self._feed = (start, end)
        self._feed_positions = torch.arange(start, end, device=device).unsqueeze(0)  # [1, end - start]
        self._feed_keep = torch.arange(lo - start, hi - start, device=device)

    def _logits(self, *, refresh: bool) -> tuple[Tensor, int]:
        """The step's forward: logits `[B, W, V]` over the window, CFG applied, and the forwards it ran.

        Vanilla: one full forward. Cached, at the block's first step (`refresh`): the same full forward,
        which also fills the cache; at later steps, one forward over the fed positions only. With
        `refresh_every_step` every step refills the cache (a forward whose logits are dropped) and then
        takes its logits from the cached forward, which must then give vanilla's numbers: the tests' proof
        that a cached forward computes what the full one does.
        """
        x = self.x
        if self.cfg_scale > 0:
            x = torch.cat([x, x.masked_fill(self._prompt_index, self.mask_id)])  # [2B, L]
        cache, forwards = self._cache, 1
        if self._graphs is not None:
            logits, forwards = self._replayed_logits(x, refresh=refresh)
        elif cache is None:
            # Vanilla LLaDA has no KV cache: use_cache=False keeps transformers from filling one at every step.
            logits = self.model(x, attention_mask=self._attn, use_cache=False, logits_to_keep=self._keep).logits
        elif refresh and not self.refresh_every_step:
            cache.feed_from(0)
            logits = self.model(
                x, attention_mask=self._attn, **cache_kwargs(cache), use_cache=False, logits_to_keep=self._keep
            ).logits
        else:
            if self.refresh_every_step:
                cache.feed_from(0)
                self.model(x, attention_mask=self._attn, **cache_kwargs(cache), use_cache=False, logits_to_keep=1)
                forwards = 2
            start, end = self._feed
            cache.feed_from(start)
            attn = self._attn
            if attn is not None and attn.ndim == 4:
                attn = attn[:, :, start:end]  # [B, 1, end - start, L]: the fed queries' rows
            logits = self.model(
                x[:, start:end], attention_mask=attn, position_ids=self._feed_positions, **cache_kwargs(cache),
                use_cache=False, logits_to_keep=self._feed_keep,
            ).logits  # fmt: skip
        if self.cfg_scale > 0:
            cond, uncond = logits.chunk(2, dim=0)
            # Unsupervised classifier-free guidance, as in the official code: uncond + (w + 1)(cond - uncond).
            logits = uncond + (self.cfg_scale + 1) * (cond - uncond)
        return logits, forwards

    def _replayed_logits(self, x: Tensor, *, refresh: bool) -> tuple[Tensor, int]:
        """`_logits`' forwards, replayed from the captured graphs: the same inputs, as tensors."""
        graphs = self._graphs
        assert graphs is not None
        keep = self._keep if isinstance(self._keep, Tensor) else None  # None: every position (full_logits)
        if self._cache is None or (refresh and not self.refresh_every_step):
            return graphs.full_logits(x, keep, self._attn), 1
        forwards = 1
        if self.refresh_every_step:
            graphs.full_logits(x, keep, self._attn)
            forwards = 2
        start, end = self._feed
        attn = self._attn
        if attn is not None and attn.ndim == 4:
            attn = attn[:, :, start:end]  # [B, 1, end - start, L]: the fed queries' rows
        assert self._feed_positions is not None and self._feed_keep is not None
        return graphs.cached_logits(x[:, start:end], self._feed_positions, self._feed_keep, attn), forwards

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
) -> LladaSampler:
    """Set up a LLaDA generation; iterating the result runs it one step (one NFE) at a time.

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
    threshold / factor: the confidence rules of parallel decoding (`parallel.parallel_commit`); at most one,
        only with low-confidence remasking. None of cache, threshold, factor: the vanilla sampler.
    refresh_every_step: a test option of the caches: refill the cache before every step (two forwards a
        step), so a cached variant must reproduce vanilla's tokens.
    graphs: the `graph` variant's captured forwards for this batch shape and cache (`LladaGraphs`, kept by
        the caller between generations); None runs every forward eagerly.
    """
    return LladaSampler(
        model, prompt_ids, attention_mask, gen_length=gen_length, block_length=block_length, steps=steps,
        mask_id=mask_id, temperature=temperature, cfg_scale=cfg_scale, remasking=remasking,
        generator=generator, logits_suppress_ids=logits_suppress_ids,
        confidence_suppress_ids=confidence_suppress_ids, full_logits=full_logits, cache=cache,
        threshold=threshold, factor=factor, refresh_every_step=refresh_every_step, graphs=graphs,
    )  # fmt: skip


def llada_generate(
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
) -> Tensor:
    """Run `llada_steps` to the end; returns the tokens `[B, P+G]` (prompt, then the generation)."""
    sampler = llada_steps(
        model, prompt_ids, attention_mask, gen_length=gen_length, block_length=block_length, steps=steps,
        mask_id=mask_id, temperature=temperature, cfg_scale=cfg_scale, remasking=remasking,
        generator=generator, logits_suppress_ids=logits_suppress_ids,
        confidence_suppress_ids=confidence_suppress_ids, full_logits=full_logits, cache=cache,
        threshold=threshold, factor=factor, refresh_every_step=refresh_every_step, graphs=graphs,
    )  # fmt: skip
    for _ in sampler:
        pass
    return sampler.x


def _draws_official_stream(device: torch.device) -> bool:
    """CPU draws are sequential, so skipping by drawing reproduces the official stream; CUDA's Philox layout
    depends on the launch configuration of the whole tensor, so no chunking can."""
    return device.type == "cpu"


def _id_tensor(ids: Sequence[int], device: torch.device) -> Tensor | None:
    return torch.tensor(sorted(set(ids)), dtype=torch.long, device=device) if ids else None


def _prepare_attention_mask(
    model: nn.Module, attention_mask: Tensor | None, gen_length: int, *, double: bool
) -> Tensor | None:
    """The padding mask in the form the model's attention wants, built once for every step.

    The generation region is always attended to (ones), as in the official code; CFG doubles the batch.
    A mask without padding becomes None, which is what transformers would turn it into anyway (after a
    device sync, at every forward). Otherwise transformers' own `create_bidirectional_mask` builds the
    mask for the configured attention kernel (a 4-D mask for sdpa/eager, which later forwards take as is).
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    batch = attention_mask.shape[0]
    ones = torch.ones((batch, gen_length), dtype=attention_mask.dtype, device=attention_mask.device)
    mask = torch.cat([attention_mask, ones], dim=-1)  # [B, L]
    if double:
        mask = torch.cat([mask, mask])  # [2B, L]
    config = model.config
    dtype = next(model.parameters()).dtype
    shape_only = torch.empty((mask.shape[0], mask.shape[1], 0), dtype=dtype, device=mask.device)
    return create_bidirectional_mask(config=config, inputs_embeds=shape_only, attention_mask=mask)


def _check_arguments(
    model: nn.Module,
    prompt_ids: Tensor,
    attention_mask: Tensor | None,
    gen_length: int,
    block_length: int,
    steps: int,
    mask_id: int,
    temperature: float,
    cfg_scale: float,
    remasking: str,
    logits_suppress_ids: Sequence[int],
    confidence_suppress_ids: Sequence[int],
) -> None:
    """The official sampler's preconditions (its asserts and docstring), as errors that say what to fix."""
    config = getattr(model, "config", None)
    if getattr(config, "is_causal", True) is not False:
        raise ValueError(
            "LLaDA needs bidirectional attention but the model's config.is_causal is not False; "
            "build it with e.g. LlamaConfig(..., is_causal=False)"
        )
    vocab_size = int(config.vocab_size)
    if prompt_ids.ndim != 2 or prompt_ids.dtype != torch.long:
        raise ValueError(
            "prompt_ids must be a [batch, prompt_len] long tensor, "
            f"got {tuple(prompt_ids.shape)} {prompt_ids.dtype}"
        )
    if attention_mask is not None and attention_mask.shape != prompt_ids.shape:
        raise ValueError(
            f"attention_mask must have the prompt's shape {tuple(prompt_ids.shape)}, "
            f"got {tuple(attention_mask.shape)}"
        )
    if gen_length <= 0 or block_length <= 0 or steps <= 0:
        raise ValueError(
            f"gen_length, block_length and steps must be positive, got {gen_length}, {block_length}, {steps}"
        )
    if gen_length % block_length:
        raise ValueError(f"gen_length ({gen_length}) must be a multiple of block_length ({block_length})")
    num_blocks = gen_length // block_length
    if steps % num_blocks:
        raise ValueError(
            f"steps ({steps}) must be a multiple of the number of blocks "
            f"(gen_length // block_length = {num_blocks})"
        )
    if steps > gen_length:
        raise ValueError(
            f"steps ({steps}) must be at most gen_length ({gen_length}): at least one token per step"
        )
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id {mask_id} is not in the model's vocabulary [0, {vocab_size})")
    for name, ids in (
        ("logits_suppress_ids", logits_suppress_ids),
        ("confidence_suppress_ids", confidence_suppress_ids),
    ):
        bad = [i for i in ids if not 0 <= i < vocab_size]
        if bad:
            raise ValueError(f"{name} {bad} are not in the model's vocabulary [0, {vocab_size})")
    if remasking not in REMASKING_STRATEGIES:
        raise ValueError(f"Unknown remasking {remasking!r}. Available: {', '.join(REMASKING_STRATEGIES)}")
    if temperature < 0 or cfg_scale < 0:
        raise ValueError(f"temperature and cfg_scale must be >= 0, got {temperature} and {cfg_scale}")
    if attention_mask is not None and bool((prompt_ids[attention_mask == 0] == mask_id).any()):
        raise ValueError("the pad token is the mask token: pad prompts with a token other than mask_id")


def _check_variant(cache: str, threshold: float | None, factor: float | None, remasking: str) -> None:
    """An accelerated variant's settings, as errors that say what is allowed."""
    if cache not in CACHES:
        raise ValueError(f"Unknown cache {cache!r}. Available: {', '.join(CACHES)}")
    if threshold is not None and factor is not None:
        raise ValueError("give either threshold or factor, not both")
    if threshold is not None and not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if factor is not None and not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor}")
    if (threshold is not None or factor is not None) and remasking != "low_confidence":
        raise ValueError("threshold and factor rank the model's confidence: they need remasking 'low_confidence'")
