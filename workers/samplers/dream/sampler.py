"""Dream's masked-diffusion sampler (`diffusion_generate`), exposed as an iterator of steps.

The algorithm is the official `generation_utils.DreamGenerationMixin._sample` of Dream-v0 (HKUNLP; the copy
read is the one vendored by ZHZisZZ/dllm, identical in `_sample` and `sample_tokens` to NVlabs/Fast-dLLM's).
The generation region `[P, P+N)` starts fully masked; step i of `steps` (`t = timesteps[i]`,
`s = timesteps[i+1]`, `timesteps = linspace(1, eps, steps + 1)`) runs one forward over the whole sequence
and reads each masked position's shifted logits (workers/models/dream_model.py), then:

* `origin`: each masked position is revealed with probability `1 - s/t` (all at the last step), drawing one
  uniform per masked position of the batch in row-major order; revealed positions take
  `choose_tokens`' token;
* `maskgit_plus` / `topk_margin` / `entropy`: every masked position gets a token and a confidence (its
  probability, the top-two margin, the negative entropy); `int(mean masked per row * (1 - s/t))` positions
  per row are committed (all that remain at the last step): the most confident ones, or with `alg_temp` a
  draw without replacement from `softmax(confidence / alg_temp)` over the row.

Given the same model, prompt, settings and RNG state it commits the same tokens and draws the same random
numbers as the official code with torch's global RNG seeded alike (`generator`: a `torch.Generator` seeded
s reproduces `torch.manual_seed(s)`). What differs is only where the work falls:

* Logits are projected only for the positions that can be masked (the generation region, or further left
  if a mask id sits in the prompt), not for the whole sequence; `full_logits=True` projects every position
  as the official code does. The rows are the same numbers wherever a matmul's rows do not depend on how
  many rows it has (true for the CPU shapes tested).
* The host-side work of a step is done ahead of it in `prepare_step`, outside a caller's step timer: where
  the masked positions are (which sizes the official uniform draw, gathers the masked rows and sets the
  commit count) and the leftmost of them, two host reads per step. A greedy step (temperature 0) then reads
  nothing on the host: the official boolean indexing becomes index_select / index_copy_ over those known
  positions, and `origin` chooses a token for every masked row and keeps the revealed ones (row-wise
  arithmetic: the same tokens). A sampled step reads what the official code's data decide: the categorical
  draw's validation (its greedy fallback draws nothing), and for `origin` which rows are revealed (only those
  draw).

Token-exact parity with the official sampler is proven on the CPU in float32 (tests/test_dream_sampler.py,
against golden outputs of the official code, every step of every case). On CUDA it is not claimed, for the
reasons LLaDA's sampler gives: `torch.topk` may order exact ties differently, and the window's matmul has
fewer rows than the official full one, so its last bit may differ and flip a near-tie.

The official defaults are not DreamGenerationConfig's: under transformers 4.x, `diffusion_generate` called
without `top_k`, `top_p` or `temperature` takes them from the model config's legacy generation attributes,
so it runs with top_k=50, top_p=1.0 and temperature=1.0. Here None means no filter; pass top_k=50 (and a
temperature) to reproduce such a call.

Iterating runs one step per `next()`: one model forward (one NFE) and one commit; the sampler never times
itself (STYLE 4). `graphs` (`dream_graphs.DreamGraphs`, the `graph` variant) replays each forward from a
captured CUDA graph (inductor-compiled on a CPU) instead of dispatching it operator by operator. The
official sampler keeps no KV cache (`kv_cache` None): Fast-dLLM's caches need the semi-autoregressive
blocks that LLaDA's sampler has and Dream's whole-sequence schedule does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor, nn

from workers.models.dream_model import padding_inputs, predicting_positions
from workers.samplers.dream.graphs import DreamGraphs
from workers.samplers.dream.tokens import Confidence, choose_tokens
from workers.samplers.prompt_batch import check_bidirectional, check_prompt_batch

Algorithm = Literal["origin", "maskgit_plus", "topk_margin", "entropy"]
ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
_CONFIDENCE: dict[str, Confidence] = {
    "maskgit_plus": "probability",
    "topk_margin": "margin",
    "entropy": "entropy",
}

__all__ = ["ALGORITHMS", "Algorithm", "DreamSampler", "DreamStep", "dream_generate", "dream_steps"]


@dataclass(frozen=True)
class DreamStep:
    """What one step did: its index and how many positions it unmasked over the batch."""

    step: int  # 0 .. steps-1
    # Masked positions before the step minus after it, summed over the batch rows, as a 0-d tensor (reading
    # it syncs, so a timing caller reads it after its timed region). A committed prediction may itself be
    # `mask_id`, which the official algorithm allows and revisits: the count can fall short of the schedule.
    committed: int | Tensor
    forwards: int = 1  # model forwards this step ran


class DreamSampler:
    """The state of one Dream generation; iterate it to run one denoising step per `next()`.

    `x` `[B, P+N]` holds the prompt followed by the generation region, `mask_id` where still masked.
    Build it with `dream_steps`.
    """

    def __init__(
        self,
        model: nn.Module,
        input_ids: Tensor,
        *,
        gen_length: int,
        steps: int,
        mask_id: int,
        alg: Algorithm = "origin",
        alg_temp: float | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        top_k: int | None = None,
        eps: float = 1e-3,
        generator: torch.Generator | None = None,
        attention_mask: Tensor | None = None,
        full_logits: bool = False,
        graphs: DreamGraphs | None = None,
    ) -> None:
        """Set up a Dream generation; iterating it runs one step (one NFE) at a time.

        model: a Qwen2ForCausalLM made Dream's (`make_dream_bidirectional`). input_ids `[B, P]`;
        attention_mask `[B, P]` (1 = token, 0 = left padding) or None.
        gen_length: N, the tokens generated (the official `max_new_tokens`). steps: forwards, one per step.
        mask_id: the [MASK] token id (from the tokenizer or config, never a literal).
        alg / alg_temp / temperature / top_p / top_k / eps: the official generation config's meaning.
        generator: the RNG of every draw; None uses torch's global generator, as the official code does.
        full_logits: project logits at every position, as the official code does (see the module docstring).
        graphs: the `graph` variant's captured forward for this batch shape (`DreamGraphs`, kept by the caller
            between generations); None runs every forward eagerly.
        """
        _check_arguments(
            model, input_ids, attention_mask, gen_length, steps, mask_id, alg, temperature, top_p, top_k, eps
        )
        device = input_ids.device
        batch, prompt_length = input_ids.shape
        self.model = model
        self.mask_id = mask_id
        self.alg: Algorithm = alg
        self.alg_temp = alg_temp
        self.temperature = float(temperature)
        self.top_p = top_p
        self.top_k = top_k
        self.generator = generator
        self.steps = steps
        self.prompt_length = prompt_length
        self.gen_length = gen_length
        self.full_logits = full_logits

        length = prompt_length + gen_length
        if graphs is not None and not graphs.matches(batch, length):
            raise ValueError(
                f"the captured forward was built for {graphs.rows} rows of {graphs.length} positions, "
                f"not {batch} of {length}"
            )
        self._graphs = graphs
        self.x = torch.full((batch, length), mask_id, dtype=torch.long, device=device)  # [B, L]
        self.x[:, :prompt_length] = input_ids
        full_mask = None
        if attention_mask is not None:  # the generation region is always attended to, as in the official code
            full_mask = torch.cat(
                [attention_mask, attention_mask.new_ones((batch, gen_length))], dim=-1
            )  # [B, L]
        self._attention, self._position_ids = padding_inputs(model, full_mask)
        # Built where the official code builds it (the sequence's device), then read once: the step's
        # `1 - s/t` is float32 arithmetic on these values, done on the host.
        self._timesteps = torch.linspace(1, eps, steps + 1, device=device).cpu()  # [steps + 1]
        self._step = 0
        self._forwards = 0
        self._plan: _StepPlan | None = None  # the next step's host-side work, done ahead of it
        self._start = length  # positions >= start have their logits projected
        self._keep: Tensor | None = None  # logits_to_keep: the hidden states predicting [start, L)

    @property
    def done(self) -> bool:
        """Whether all `steps` steps have run."""
        return self._step == self.steps

    @property
    def forwards(self) -> int:
        """Model forwards run so far."""
        return self._forwards

    @property
    def kv_cache(self) -> None:
        """Dream's sampler keeps no KV cache."""
        return None

    @property
    def cache_bytes(self) -> None:
        """No KV cache, so no bytes."""
        return None

    @property
    def generation(self) -> Tensor:
        """The generation region of `x`: `[B, N]`."""
        return self.x[:, self.prompt_length :]

    def __iter__(self) -> Iterator[DreamStep]:
        return self

    @torch.no_grad()
    def prepare_step(self) -> None:
        """Do the host-side work of the next step ahead of it (two host reads): find the masked positions,
        widen the projected window to reach every one, and work out the step's schedule in the official
        float32 arithmetic. Idempotent; `next()` calls it too."""
        if self.done or (self._plan is not None and self._plan.step == self._step):
            return
        x = self.x
        batch, length = x.shape
        flat = (x.reshape(-1) == self.mask_id).nonzero().squeeze(-1)  # [M]: row-major, as `x[mask_index]`
        rows, columns = flat.div(length, rounding_mode="floor"), flat.remainder(length)
        masked, leftmost = flat.numel(), int(columns.min()) if flat.numel() else length
        start = 0 if self.full_logits else min(self._start, leftmost)
        if self._keep is None or start != self._start:
            self._start = start
            self._keep = predicting_positions(start, length, x.device)  # [L - start]
        t, s = self._timesteps[self._step], self._timesteps[self._step + 1]
        last = self._step == self.steps - 1
        ratio = 1 - s / t  # float32, as the official tensors compute it
        per_row = torch.tensor(masked) / batch  # float32, as the official `mask_index.sum() / batch`
        self._plan = _StepPlan(
            step=self._step,
            masked=masked,
            flat=flat,
            window_rows=rows * (length - start)
            + columns
            - start,  # [M]: the same rows of the window's logits
            p_transfer=1.0 if last else float(ratio),
            count=int(per_row) if last else int(per_row * ratio),
        )

    @torch.no_grad()
    def __next__(self) -> DreamStep:
        if self.done:
            raise StopIteration
        self.prepare_step()
        plan = self._plan
        assert plan is not None
        assert self._keep is not None
        if self._graphs is not None:
            logits = self._graphs.logits(self.x, self._keep, self._attention, self._position_ids)
        else:
            logits = self.model(
                self.x, attention_mask=self._attention, position_ids=self._position_ids, use_cache=False,
                logits_to_keep=self._keep,
            ).logits  # fmt: skip
        # logits [B, L - start, V]: row j predicts position start + j
        mask_logits = logits.reshape(-1, logits.shape[-1]).index_select(0, plan.window_rows)  # [M, V]
        if self.alg == "origin":
            self._reveal(plan, mask_logits)
        else:
            self._commit_confident(plan, mask_logits)
        record = DreamStep(step=self._step, committed=plan.masked - (self.x == self.mask_id).sum())
        self._step += 1
        self._forwards += 1
        return record

    def _choose(self, mask_logits: Tensor, confidence: Confidence = "probability") -> tuple[Tensor, Tensor]:
        return choose_tokens(
            mask_logits, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
            confidence=confidence, generator=self.generator,
        )  # fmt: skip

    def _reveal(self, plan: _StepPlan, mask_logits: Tensor) -> None:
        """`origin`: reveal each masked position with probability 1 - s/t (all at the last step).

        One uniform per masked position, as the official code draws. Greedy, every masked row's token is
        chosen and the unrevealed ones dropped (row-wise arithmetic: the same tokens, and no host read);
        sampled, only the revealed rows may draw, so which they are is read on the host, as the official
        boolean indexing does.
        """
        device = self.x.device
        revealed = (
            torch.rand((plan.masked,), generator=self.generator, device=device) < plan.p_transfer
        )  # [M]
        if self.temperature > 0:
            tokens = torch.full((plan.masked,), self.mask_id, dtype=torch.long, device=device)  # [M]
            chosen = revealed.nonzero().squeeze(-1)  # a host sync: the draw's size
            tokens.index_copy_(0, chosen, self._choose(mask_logits.index_select(0, chosen))[1])
        else:
            tokens = torch.where(revealed, self._choose(mask_logits)[1], self.mask_id)  # [M]
        self.x.view(-1).index_copy_(0, plan.flat, tokens)

    def _commit_confident(self, plan: _StepPlan, mask_logits: Tensor) -> None:
        """`maskgit_plus` / `topk_margin` / `entropy`: commit each row's most confident (or, with alg_temp,
        sampled) positions, as many per row as the schedule says for the batch's mean masked count."""
        confidence, tokens = self._choose(mask_logits, _CONFIDENCE[self.alg])  # [M], [M]
        if plan.count <= 0:
            return
        x = self.x
        full_confidence = torch.full(
            x.shape, float("-inf"), dtype=confidence.dtype, device=x.device
        )  # [B, L]
        full_confidence.view(-1).index_copy_(0, plan.flat, confidence)
        if not self.alg_temp:
            chosen = torch.topk(full_confidence, plan.count, dim=-1).indices  # [B, count]
        else:
            weights = torch.softmax(full_confidence / self.alg_temp, dim=-1)  # [B, L]
            chosen = torch.multinomial(
                weights, plan.count, generator=self.generator
            )  # [B, count], no replacement
        # Positions not masked at the step's start offer `mask_id`, as the official `x_` does: a row with
        # fewer masked positions than `count` (only once a prediction was `mask_id`) gets masks there.
        proposal = torch.full_like(x, self.mask_id)  # [B, L]
        proposal.view(-1).index_copy_(0, plan.flat, tokens)
        x.scatter_(1, chosen, proposal.gather(1, chosen))


@dataclass(frozen=True)
class _StepPlan:
    """A step's host-side facts, known before it runs (`DreamSampler.prepare_step`)."""

    step: int
    masked: int  # masked positions over the batch, M
    flat: Tensor  # [M] their indices into x.view(-1), row-major
    window_rows: Tensor  # [M] the rows of the window's logits `[B * (L - start), V]` that predict them
    p_transfer: float  # origin: the probability of revealing a masked position
    count: int  # the others: positions committed per row


def dream_steps(model: nn.Module, input_ids: Tensor, **settings: object) -> DreamSampler:
    """Set up a Dream generation (the arguments of `DreamSampler`); iterating the result runs it one step
    (one NFE) at a time."""
    return DreamSampler(model, input_ids, **settings)  # type: ignore[arg-type]


def dream_generate(model: nn.Module, input_ids: Tensor, **settings: object) -> Tensor:
    """Run `dream_steps` (same arguments) to the end; returns the tokens `[B, P+N]` (prompt, then
    generation)."""
    sampler = dream_steps(model, input_ids, **settings)
    for _ in sampler:
        pass
    return sampler.x


def _check_arguments(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    gen_length: int,
    steps: int,
    mask_id: int,
    alg: str,
    temperature: float,
    top_p: float | None,
    top_k: int | None,
    eps: float,
) -> None:
    """What the official sampler needs of its inputs, as errors that say what to fix."""
    check_bidirectional(model, "Dream needs bidirectional attention",
                        "apply workers.models.dream_model.make_dream_bidirectional first")
    config = model.config
    check_prompt_batch(input_ids, attention_mask)
    if gen_length <= 0 or steps <= 0:
        raise ValueError(f"gen_length and steps must be positive, got {gen_length} and {steps}")
    vocab_size = int(config.vocab_size)
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id {mask_id} is not in the model's vocabulary [0, {vocab_size})")
    if alg not in ALGORITHMS:
        raise ValueError(f"alg {alg!r} is not a Dream remasking algorithm; allowed: {', '.join(ALGORITHMS)}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_k is not None and top_k <= 0:
        raise ValueError(f"top_k must be positive, got {top_k}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
