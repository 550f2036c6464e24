"""The LLaDA sampler: bidirectional attention, token-exact with the official algorithm, invariants."""

from __future__ import annotations

import itertools
from functools import cache

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from tests.sampler_models import MASK_ID, PAD_ID, VOCAB_SIZE, left_padded_prompts, tiny_model
from workers.samplers import LladaStep, llada_generate, llada_steps, official_suppress_ids, transfer_schedule
from workers.samplers.llada.reference import reference_llada_generate

PROMPT_LENGTHS = [5, 8, 3]  # left-padded to 8
GEN = {"gen_length": 24, "block_length": 8, "steps": 12}  # 3 semi-autoregressive blocks of 4 steps


@cache
def llada_model(attn: str = "sdpa") -> torch.nn.Module:
    return tiny_model(bidirectional=True, attn=attn)


def _both(
    prompt, mask, *, seed: int = 0, full_logits: bool = False, flags: dict | None = None, **kw
) -> tuple:
    """(ours, reference) from the same model, inputs and seed; `flags` are the official EOS/EoT options."""
    flags = flags or {}
    ours_ids: dict = {}
    if flags:
        logits_ids, conf_ids = official_suppress_ids(temperature=kw.get("temperature", 0.0), **flags)
        ours_ids = {"logits_suppress_ids": logits_ids, "confidence_suppress_ids": conf_ids}
    model = llada_model()
    ours = llada_generate(
        model, prompt, mask, mask_id=MASK_ID, generator=torch.Generator().manual_seed(seed),
        full_logits=full_logits, **ours_ids, **kw,
    )  # fmt: skip
    ref = reference_llada_generate(
        model, prompt, mask, mask_id=MASK_ID, generator=torch.Generator().manual_seed(seed), **flags, **kw
    )
    return ours, ref


# --- the model really is bidirectional -------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("padded", [False, True])
def test_attention_is_bidirectional(attn: str, padded: bool) -> None:
    """config.is_causal=False reaches the attention kernel: a later token changes earlier logits."""
    ids, mask = left_padded_prompts([12, 9])
    later = ids.clone()
    later[:, -1] = (later[:, -1] + 1) % MASK_ID  # change only the last token
    bidirectional = llada_model(attn)
    causal = tiny_model(bidirectional=False, attn=attn)
    attention_mask = mask if padded else None
    first_real = ids.shape[1] - 9  # position 3: a real token in both rows
    with torch.no_grad():
        for model, bidirectional_ in ((bidirectional, True), (causal, False)):
            a = model(ids, attention_mask=attention_mask).logits[:, first_real : ids.shape[1] - 1]
            b = model(later, attention_mask=attention_mask).logits[:, first_real : ids.shape[1] - 1]
            change = (a - b).abs().amax(dim=-1)  # [B, positions before the last]
            if bidirectional_:
                assert float(change.min()) > 1e-4  # every earlier position sees the last token
            else:
                assert float(change.max()) < 1e-6  # the causal twin: none does


def test_padding_is_masked_out() -> None:
    """A left pad's token id does not reach the real tokens when the attention mask is given."""
    ids, mask = left_padded_prompts([4, 8])
    other_pad = ids.clone()
    other_pad[0, :4] = PAD_ID + 7
    with torch.no_grad():
        a = llada_model()(ids, attention_mask=mask).logits[0, 4:]
        b = llada_model()(other_pad, attention_mask=mask).logits[0, 4:]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_refuses_a_causal_model() -> None:
    ids, _ = left_padded_prompts([4])
    with pytest.raises(ValueError, match="is_causal"):
        llada_steps(
            tiny_model(bidirectional=False), ids, gen_length=8, block_length=8, steps=8, mask_id=MASK_ID
        )


# --- token-exact against the per-row transcription of the official sampler -------------------------------


@pytest.mark.parametrize(
    ("remasking", "temperature", "cfg_scale", "padded"),
    list(itertools.product(["low_confidence", "random"], [0.0, 0.9], [0.0, 1.5], [False, True])),
)
def test_matches_official_algorithm(
    remasking: str, temperature: float, cfg_scale: float, padded: bool
) -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    ours, ref = _both(
        ids,
        mask if padded else None,
        remasking=remasking,
        temperature=temperature,
        cfg_scale=cfg_scale,
        **GEN,
    )
    assert torch.equal(ours, ref)


@pytest.mark.parametrize(
    ("gen_length", "block_length", "steps"), [(16, 16, 16), (16, 16, 5), (32, 4, 16), (12, 3, 12)]
)
def test_matches_official_semi_autoregressive_shapes(gen_length: int, block_length: int, steps: int) -> None:
    """One block, an uneven schedule (remainder on the first steps), many short blocks, one step per token."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS, seed=3)
    ours, ref = _both(ids, mask, gen_length=gen_length, block_length=block_length, steps=steps)
    assert torch.equal(ours, ref)


def test_uses_the_global_rng_like_the_official_code() -> None:
    """With no generator both draw from torch's global RNG, in the same order and amounts."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    kw = dict(mask_id=MASK_ID, temperature=0.7, remasking="random", cfg_scale=1.0, **GEN)
    torch.manual_seed(11)
    ours = llada_generate(llada_model(), ids, mask, **kw)
    after_ours = torch.rand(3)
    torch.manual_seed(11)
    ref = reference_llada_generate(llada_model(), ids, mask, **kw)
    after_ref = torch.rand(3)
    assert torch.equal(ours, ref)
    assert torch.equal(after_ours, after_ref)


def _frequent_predictions(n: int) -> list[int]:
    """The `n` ids the model predicts most often at masked positions: suppressing them changes outputs."""
    ids, _ = left_padded_prompts(PROMPT_LENGTHS)
    x = torch.cat([ids, torch.full((ids.shape[0], 24), MASK_ID)], dim=1)
    with torch.no_grad():
        predicted = llada_model()(x).logits[:, ids.shape[1] :].argmax(-1).flatten()
    counts = torch.bincount(predicted, minlength=VOCAB_SIZE)
    counts[MASK_ID] = -1
    return counts.topk(n).indices.tolist()


@pytest.mark.parametrize(
    ("logits_eos_inf", "confidence_eos_eot_inf", "temperature", "remasking"),
    [
        (True, False, 0.0, "low_confidence"),
        (False, True, 0.0, "low_confidence"),
        (False, True, 0.9, "low_confidence"),
        (True, True, 0.0, "low_confidence"),
        (True, True, 0.9, "random"),
    ],
)
def test_matches_official_eos_eot_suppression(
    logits_eos_inf: bool, confidence_eos_eot_inf: bool, temperature: float, remasking: str
) -> None:
    eos, eot = _frequent_predictions(2)
    flags = {
        "eos_id": eos,
        "eot_id": eot,
        "logits_eos_inf": logits_eos_inf,
        "confidence_eos_eot_inf": confidence_eos_eot_inf,
    }
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    ours, ref = _both(ids, mask, flags=flags, temperature=temperature, remasking=remasking, **GEN)
    assert torch.equal(ours, ref)
    if logits_eos_inf:
        assert not bool((ours[:, ids.shape[1] :] == eos).any())


def test_official_confidence_flag_quirk() -> None:
    """At temperature 0 EOS and EoT lose confidence; above it only EoT does (the official code's aliasing)."""
    kw = {"eos_id": 5, "eot_id": 6, "logits_eos_inf": False, "confidence_eos_eot_inf": True}
    assert official_suppress_ids(temperature=0.0, **kw) == ((), (5, 6))
    assert official_suppress_ids(temperature=0.5, **kw) == ((), (6,))
    assert official_suppress_ids(temperature=0.5, **{**kw, "logits_eos_inf": True}) == ((5,), (6,))


def test_matches_official_when_mask_is_predicted() -> None:
    """A committed prediction equal to mask_id stays a candidate in later blocks, as in the official code."""
    mask_id = _frequent_predictions(1)[0]
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    ids[ids == mask_id] = mask_id + 1
    kw = dict(mask_id=mask_id, remasking="random", **GEN)
    sampler = llada_steps(llada_model(), ids, mask, generator=torch.Generator().manual_seed(0), **kw)
    left_open = False  # did a block end with masks left in it (so that later windows had to reach back)?
    for record in sampler:
        if record.step % sampler.steps_per_block == sampler.steps_per_block - 1:
            block_end = ids.shape[1] + (record.block + 1) * GEN["block_length"]
            left_open |= bool((sampler.x[:, :block_end] == mask_id).any()) and record.block < 2
    ref = reference_llada_generate(llada_model(), ids, mask, generator=torch.Generator().manual_seed(0), **kw)
    assert left_open, "the case no longer exercises re-opened positions: pick another seed"
    assert torch.equal(sampler.x, ref)


def test_matches_official_with_masks_in_the_prompt() -> None:
    """Infilling: mask ids inside the prompt compete for commits, so the window reaches back to them."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    ids[:, -3] = MASK_ID
    ours, ref = _both(ids, mask, **GEN)
    assert torch.equal(ours, ref)


@pytest.mark.parametrize("cfg_scale", [0.0, 1.5])
def test_window_and_full_logits_agree(cfg_scale: float) -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    window, _ = _both(ids, mask, cfg_scale=cfg_scale, temperature=0.9, **GEN)
    full, ref = _both(ids, mask, cfg_scale=cfg_scale, temperature=0.9, full_logits=True, **GEN)
    assert torch.equal(window, full) and torch.equal(full, ref)


# --- memory of the tempered step -------------------------------------------------------------------------


class _Float64Allocations(TorchDispatchMode):
    """The largest float64 tensor any op creates while active (numel)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("official_stream", [True, False])
def test_gumbel_noise_spans_the_block_not_the_sequence(official_stream: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """At temperature > 0 only the window's noise is held: [B, W, V] float64, not [B, L, V] (66 GB at
    B=32, L=2048 for LLaDA-8B). The CPU still reproduces the official stream (drawn in window-sized
    chunks); the CUDA path, forced here, draws the window alone and still samples valid tokens."""
    from workers.samplers.llada import sampler as llada_module

    monkeypatch.setattr(llada_module, "_draws_official_stream", lambda device: official_stream)
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)  # B=3, P=8; G=24, block 8: L=32, W=8
    sampler = llada_steps(
        llada_model(), ids, mask, mask_id=MASK_ID, temperature=0.9, generator=torch.Generator().manual_seed(0), **GEN
    )
    with _Float64Allocations() as recorder:
        for _ in sampler:
            pass
    batch, width, length = 3, 8, 8 + 24
    assert recorder.largest <= batch * width * VOCAB_SIZE < batch * length * VOCAB_SIZE
    assert not bool((sampler.generation == MASK_ID).all())
    if official_stream:
        _, ref = _both(ids, mask, temperature=0.9, **GEN)
        assert torch.equal(sampler.x, ref)


# --- the iterator ----------------------------------------------------------------------------------------


def test_iterator_records_and_state() -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    sampler = llada_steps(llada_model(), ids, mask, gen_length=24, block_length=8, steps=9, mask_id=MASK_ID)
    assert sampler.x.shape == (3, 8 + 24) and bool((sampler.generation == MASK_ID).all())
    records = list(sampler)
    assert [r.step for r in records] == list(range(9))
    assert [r.block for r in records] == [0] * 3 + [1] * 3 + [2] * 3
    assert [r.committed for r in records] == [3 * k for k in transfer_schedule(8, 3)] * 3
    assert isinstance(records[0], LladaStep) and sampler.done
    with pytest.raises(StopIteration):
        next(sampler)
    assert torch.equal(
        sampler.x,
        llada_generate(llada_model(), ids, mask, gen_length=24, block_length=8, steps=9, mask_id=MASK_ID),
    )


def test_transfer_schedule_spreads_the_remainder_first() -> None:
    assert transfer_schedule(8, 3) == [3, 3, 2]
    assert transfer_schedule(32, 32) == [1] * 32
    assert sum(transfer_schedule(37, 5)) == 37


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gen_length": 24, "block_length": 7, "steps": 12}, "multiple of block_length"),
        ({"gen_length": 24, "block_length": 8, "steps": 10}, "multiple of the number of blocks"),
        ({"gen_length": 8, "block_length": 8, "steps": 9}, "at most gen_length"),
        (
            {"gen_length": 8, "block_length": 8, "steps": 4, "mask_id": VOCAB_SIZE},
            "not in the model's vocabulary",
        ),
        (
            {"gen_length": 8, "block_length": 8, "steps": 4, "remasking": "top_p"},
            "Available: low_confidence, random",
        ),
        (
            {"gen_length": 8, "block_length": 8, "steps": 4, "logits_suppress_ids": (VOCAB_SIZE + 3,)},
            "logits_suppress_ids",
        ),
        ({"gen_length": 8, "block_length": 8, "steps": 4, "temperature": -1.0}, ">= 0"),
    ],
)
def test_preconditions_are_errors(kwargs: dict, message: str) -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    with pytest.raises(ValueError, match=message):
        llada_steps(llada_model(), ids, mask, **{"mask_id": MASK_ID, **kwargs})


def test_pad_equal_to_mask_is_an_error() -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    ids[mask == 0] = MASK_ID
    with pytest.raises(ValueError, match="pad token is the mask token"):
        llada_steps(llada_model(), ids, mask, gen_length=8, block_length=8, steps=4, mask_id=MASK_ID)


# --- invariants (hypothesis) -----------------------------------------------------------------------------

shapes = st.tuples(
    st.integers(1, 3),  # batch
    st.integers(1, 6),  # longest prompt
    st.sampled_from([1, 2, 3, 4, 8]),  # block length
    st.integers(1, 3),  # blocks
).flatmap(
    lambda s: st.tuples(
        st.just(s),
        st.integers(1, s[2]),  # steps per block
        st.lists(st.integers(1, s[1]), min_size=s[0], max_size=s[0]),  # prompt lengths
    )
)
options = st.fixed_dictionaries(
    {
        "temperature": st.sampled_from([0.0, 0.9]),
        "remasking": st.sampled_from(["low_confidence", "random"]),
        "cfg_scale": st.sampled_from([0.0, 1.0]),
        "padded": st.booleans(),
        "seed": st.integers(0, 2**16),
    }
)


def _case(shape, opts):
    (_batch, _, block_length, blocks), steps_per_block, lengths = shape
    ids, mask = left_padded_prompts(lengths, seed=opts["seed"])
    kw = {
        "gen_length": block_length * blocks, "block_length": block_length, "steps": steps_per_block * blocks,
        "temperature": opts["temperature"], "remasking": opts["remasking"], "cfg_scale": opts["cfg_scale"],
    }  # fmt: skip
    return ids, (mask if opts["padded"] else None), kw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, opts=options)
def test_invariants(shape, opts) -> None:
    """Prompt fixed; commits follow the schedule, only inside the current block, never revised; no mask left.

    [MASK] itself is suppressed from the predictions here: a random model may predict it, which the official
    algorithm allows (and which would re-open a committed position); LLaDA-8B never does in practice.
    """
    ids, mask, kw = _case(shape, opts)
    prompt_length = ids.shape[1]
    sampler = llada_steps(
        llada_model(), ids, mask, mask_id=MASK_ID, logits_suppress_ids=(MASK_ID,),
        generator=torch.Generator().manual_seed(opts["seed"]), **kw,
    )  # fmt: skip
    schedule = transfer_schedule(kw["block_length"], sampler.steps_per_block)
    before = sampler.x.clone()
    for record in sampler:
        after = sampler.x
        block_start = prompt_length + record.block * kw["block_length"]
        block_end = block_start + kw["block_length"]
        newly = (before == MASK_ID) & (after != MASK_ID)  # [B, L]
        assert torch.equal(after[:, :prompt_length], ids)
        assert torch.equal(
            after[before != MASK_ID], before[before != MASK_ID]
        )  # committed tokens never change
        k = schedule[record.step % sampler.steps_per_block]
        assert newly.sum(dim=1).tolist() == [k] * ids.shape[0]
        assert record.committed == k * ids.shape[0]
        assert not bool(newly[:, :block_start].any()) and not bool(newly[:, block_end:].any())
        assert bool((after[:, block_end:] == MASK_ID).all())  # later blocks wait for their turn
        before = after.clone()
    assert not bool((sampler.x == MASK_ID).any())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, opts=options)
def test_matches_official_on_random_shapes(shape, opts) -> None:
    """Token-exact for any shape (full_logits: bit-for-bit even where BLAS picks kernels by row count)."""
    ids, mask, kw = _case(shape, opts)
    ours, ref = _both(ids, mask, seed=opts["seed"], full_logits=True, **kw)
    assert torch.equal(ours, ref)
