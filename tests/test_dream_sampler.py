"""Dream's sampler is token-exact against the official `diffusion_generate` (every golden case, every step),
and keeps its own promises: the shift, the commit schedule, the filters, the RNG, the step protocol."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import Qwen2ForCausalLM

from tests.dream_golden.tiny_checkpoint import MASK_ID, PAD_ID
from tests.dream_models import golden, golden_checkpoint, load_dream
from workers.samplers.dream.sampler import ALGORITHMS, DreamSampler, dream_generate, dream_steps
from workers.samplers.dream.tokens import categorical, choose_tokens, top_k_filter, top_p_filter

CASES = golden()["generation_cases"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Qwen2ForCausalLM:
    return load_dream(golden_checkpoint(tmp_path_factory.mktemp("dream")))


@pytest.fixture
def never_mask(model: Qwen2ForCausalLM):  # type: ignore[no-untyped-def]
    """The model with [MASK] never predicted (its logit -inf), so every position must end committed."""
    handle = model.lm_head.register_forward_hook(
        lambda _m, _i, out: out.index_fill_(-1, torch.tensor([MASK_ID]), float("-inf"))
    )
    yield model
    handle.remove()


def _settings(case: dict) -> dict:
    """The official kwargs of a golden case as the sampler's arguments."""
    kwargs = case["kwargs"]
    mask = kwargs["attention_mask"]
    return {
        "gen_length": kwargs["max_new_tokens"], "steps": kwargs["steps"], "mask_id": kwargs["mask_token_id"],
        "alg": kwargs["alg"], "alg_temp": kwargs["alg_temp"], "temperature": kwargs["temperature"],
        "top_p": kwargs["top_p"], "top_k": kwargs["top_k"], "eps": kwargs["eps"],
        "attention_mask": None if mask is None else torch.tensor(mask),
    }  # fmt: skip


@pytest.mark.parametrize("full_logits", [False, True], ids=["window", "full"])
@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_token_exact_against_the_official_sampler(
    model: Qwen2ForCausalLM, case: dict, full_logits: bool
) -> None:
    """Every step's sequence equals the official history, with a generator seeded as the official global
    RNG."""
    generator = torch.Generator().manual_seed(case["seed"])
    sampler = dream_steps(
        model,
        torch.tensor(case["input_ids"]),
        generator=generator,
        full_logits=full_logits,
        **_settings(case),
    )
    for i, _record in enumerate(sampler):
        assert sampler.x.tolist() == case["history"][i], f"step {i} differs"
    assert sampler.x.tolist() == case["sequences"]
    assert sampler.forwards == case["forwards"]
    assert int((sampler.x == MASK_ID).sum()) == case["still_masked"]


def test_golden_cases_cover_every_algorithm_and_filter() -> None:
    assert {case["alg"] for case in CASES} == set(ALGORITHMS)
    assert any(case["kwargs"]["top_k"] for case in CASES) and any(case["kwargs"]["top_p"] for case in CASES)
    assert any(case["kwargs"]["alg_temp"] for case in CASES) and any(
        case["kwargs"]["attention_mask"] for case in CASES
    )


def test_global_generator_is_the_official_default(model: Qwen2ForCausalLM) -> None:
    """generator=None draws from torch's global RNG, as the official code does."""
    case = next(c for c in CASES if c["setting"] == "topp" and c["alg"] == "entropy")
    torch.manual_seed(case["seed"])
    out = dream_generate(model, torch.tensor(case["input_ids"]), **_settings(case))
    assert out.tolist() == case["sequences"]


# ---------------------------------------------------------------- the step protocol and schedule


@pytest.mark.parametrize("alg", ["maskgit_plus", "topk_margin", "entropy"])
def test_confidence_algorithms_commit_the_schedule(never_mask: Qwen2ForCausalLM, alg: str) -> None:
    """Step i commits int(N (1 - s/t)) positions per row (all the rest at the last), N the masked count per
    row."""
    prompt = torch.tensor([[5, 6, 7], [8, 9, 10]])
    gen_length, steps, eps = 10, 4, 1e-3
    sampler = dream_steps(
        never_mask, prompt, gen_length=gen_length, steps=steps, mask_id=MASK_ID, alg=alg, eps=eps
    )
    timesteps = torch.linspace(1, eps, steps + 1)
    remaining, committed = gen_length, []
    for i, record in enumerate(sampler):
        sampler.prepare_step()  # idempotent between steps
        expected = (
            remaining
            if i == steps - 1
            else int(torch.tensor(remaining * 2) / 2 * (1 - timesteps[i + 1] / timesteps[i]))
        )
        committed.append(int(record.committed))
        assert committed[-1] == 2 * expected and record.forwards == 1 and record.step == i
        remaining -= expected
    assert sum(committed) == 2 * gen_length and sampler.done and sampler.forwards == steps
    assert sampler.generation.shape == (2, gen_length) and not (sampler.generation == MASK_ID).any()
    assert sampler.kv_cache is None and sampler.cache_bytes is None
    with pytest.raises(StopIteration):
        next(sampler)


def test_origin_reveals_everything_by_the_last_step(never_mask: Qwen2ForCausalLM) -> None:
    prompt = torch.tensor([[5, 6, 7]])
    out = dream_generate(
        never_mask, prompt, gen_length=12, steps=5, mask_id=MASK_ID, alg="origin", temperature=1.0,
        generator=torch.Generator().manual_seed(3),
    )  # fmt: skip
    assert out[:, :3].tolist() == prompt.tolist() and not (out == MASK_ID).any()


def test_a_mask_in_the_prompt_is_filled_and_the_window_widens(never_mask: Qwen2ForCausalLM) -> None:
    """Infilling: a [MASK] inside the prompt is a position like any other; the projected window reaches it."""
    prompt = torch.tensor([[5, MASK_ID, 7, 8], [9, 10, 11, 12]])
    settings = {"gen_length": 6, "steps": 3, "mask_id": MASK_ID, "alg": "entropy"}
    windowed = dream_generate(never_mask, prompt, **settings)
    full = dream_generate(never_mask, prompt, full_logits=True, **settings)
    assert torch.equal(windowed, full) and windowed[0, 1] != MASK_ID


def test_left_padding_keeps_a_row_as_it_would_be_alone(never_mask: Qwen2ForCausalLM) -> None:
    """The official padding inputs make a left-padded row generate what it generates unpadded (greedy)."""
    settings = {"gen_length": 6, "steps": 6, "mask_id": MASK_ID, "alg": "maskgit_plus"}
    alone = dream_generate(never_mask, torch.tensor([[20, 21, 22]]), **settings)
    padded = dream_generate(
        never_mask, torch.tensor([[PAD_ID, PAD_ID, 20, 21, 22], [30, 31, 32, 33, 34]]),
        attention_mask=torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]), **settings,
    )  # fmt: skip
    assert padded[0, 2:].tolist() == alone[0].tolist()


@pytest.mark.parametrize(
    ("change", "field"),
    [({"alg": "random"}, "alg"), ({"mask_id": 256}, "mask_id"), ({"steps": 0}, "steps"),
     ({"top_p": 1.5}, "top_p"), ({"top_k": 0}, "top_k"), ({"eps": 1.0}, "eps"),
     ({"temperature": -1.0}, "temperature")],
)  # fmt: skip
def test_bad_settings_are_refused_by_name(model: Qwen2ForCausalLM, change: dict, field: str) -> None:
    settings = {"gen_length": 4, "steps": 2, "mask_id": MASK_ID, **change}
    with pytest.raises(ValueError, match=field):
        DreamSampler(model, torch.tensor([[5, 6]]), **settings)


def test_a_causal_model_is_refused(tmp_path: Path) -> None:
    causal = load_dream(golden_checkpoint(tmp_path), bidirectional=False)
    with pytest.raises(ValueError, match="is_causal"):
        dream_steps(causal, torch.tensor([[5, 6]]), gen_length=4, steps=2, mask_id=MASK_ID)


# ---------------------------------------------------------------- token choice


def test_top_k_keeps_exactly_the_k_largest() -> None:
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.0, 1.0]])
    kept = top_k_filter(logits, 2)
    low = torch.finfo(torch.float32).min
    assert kept.tolist() == [[low, 3.0, low, 2.0, low]]
    assert torch.equal(top_k_filter(logits, 99), logits)  # k above the vocabulary keeps everything


def test_top_p_keeps_the_token_that_crosses_p() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    low = torch.finfo(torch.float32).min
    kept = top_p_filter(logits, 0.7)  # 0.5 < 0.7, 0.8 crosses it: the first two stay
    assert (kept != low).tolist() == [[True, True, False, False]]
    assert (top_p_filter(logits, 0.1) != low).tolist() == [
        [True, False, False, False]
    ]  # the top token always stays


def test_confidences_are_probability_margin_and_negative_entropy() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    probs = logits.softmax(-1)
    p, tokens = choose_tokens(logits, temperature=0.0, top_p=None, top_k=None)
    assert tokens.tolist() == [0, 0] and torch.equal(p, probs.max(-1).values)
    margin, _ = choose_tokens(logits, temperature=0.0, top_p=None, top_k=None, confidence="margin")
    assert torch.allclose(margin, torch.tensor([probs[0, 0] - probs[0, 1], 0.0]))
    entropy, _ = choose_tokens(logits, temperature=0.0, top_p=None, top_k=None, confidence="entropy")
    assert torch.allclose(entropy[1], -torch.log(torch.tensor(3.0))) and entropy[0] > entropy[1]


def test_categorical_draw_is_multinomial_and_falls_back_to_greedy_off_the_simplex() -> None:
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([categorical(probs, generator)[1] for _ in range(2000)])  # [2000, 2]
    frequency = (draws[:, 0] == 1).float().mean()
    assert 0.55 < frequency < 0.65  # token 1 of row 0 has probability 0.6
    # A bfloat16 row whose renormalised sum misses 1 by 1e-6 fails torch's simplex check: the official code
    # then takes the greedy token for the whole batch, and draws nothing.
    rough = torch.tensor([[0.00738525390625, 0.3046875, 0.6640625, 0.0218505859375]], dtype=torch.bfloat16)
    assert ((rough / rough.sum(-1, keepdim=True)).sum(-1) - 1).abs().item() >= 1e-6
    batch = torch.cat([torch.tensor([[0.1, 0.6, 0.3, 0.0]], dtype=torch.bfloat16), rough])
    state = generator.get_state()
    _, tokens = categorical(batch, generator)
    assert tokens.tolist() == [1, 2] and torch.equal(generator.get_state(), state)


# ---------------------------------------------------------------- host syncs


class _HostReads(TorchDispatchMode):
    """Records every operator that makes the host wait for a device value: a scalar read (`item`, `bool`,
    `int`), `nonzero`, `masked_select`, and indexing by a boolean mask (which runs `nonzero` inside)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = str(func.overloadpacket)
        indices = args[1] if name in ("aten.index", "aten.index_put", "aten.index_put_") else ()
        by_mask = any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
        if (
            name in ("aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.is_nonzero")
            or by_mask
        ):
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


def _reads_per_step(model: Qwen2ForCausalLM, **settings: object) -> list[list[str]]:
    ids = torch.tensor([[PAD_ID, 20, 21, 22], [30, 31, 32, 33]])
    sampler = dream_steps(model, ids, attention_mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]), **settings)
    per_step = []
    while not sampler.done:
        sampler.prepare_step()  # the per-step host read, outside the step
        with _HostReads() as reads:
            next(sampler)
        per_step.append(reads.reads)
    return per_step


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_a_greedy_step_reads_nothing_on_the_host(model: Qwen2ForCausalLM, alg: str) -> None:
    per_step = _reads_per_step(model, gen_length=8, steps=4, mask_id=MASK_ID, alg=alg, top_p=0.9, top_k=20)
    assert len(per_step) == 4 and per_step == [[], [], [], []]


def test_a_sampled_step_reads_only_what_the_official_data_decide(model: Qwen2ForCausalLM) -> None:
    """The guard sees host reads: a sampled step validates its categorical draw (one scalar read)."""
    settings = {"gen_length": 8, "steps": 4, "mask_id": MASK_ID, "temperature": 0.8}
    per_step = _reads_per_step(model, alg="entropy", **settings)
    assert all(reads == ["aten._local_scalar_dense"] for reads in per_step)
    per_step = _reads_per_step(model, alg="origin", generator=torch.Generator().manual_seed(0), **settings)
    assert all("aten.nonzero" in reads for reads in per_step)


def test_steps_past_the_last_mask_still_run_their_forward(never_mask: Qwen2ForCausalLM) -> None:
    """More steps than tokens: the official loop runs every step's forward even with nothing left to
    commit."""
    for alg in ALGORITHMS:
        sampler = dream_steps(
            never_mask, torch.tensor([[5, 6]]), gen_length=2, steps=5, mask_id=MASK_ID, alg=alg,
            temperature=0.5, generator=torch.Generator().manual_seed(1),
        )  # fmt: skip
        committed = [int(record.committed) for record in sampler]
        assert sampler.forwards == 5 and sum(committed) == 2 and not (sampler.x == MASK_ID).any()


# ---------------------------------------------------------------- properties


@hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    alg=st.sampled_from(ALGORITHMS),
    temperature=st.sampled_from([0.0, 0.8]),
    pads=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    masks_in_prompt=st.integers(0, 2),
    steps=st.integers(1, 7),
    seed=st.integers(0, 2**16),
)
def test_window_and_full_projection_agree_and_account_for_every_token(
    model: Qwen2ForCausalLM,
    alg: str,
    temperature: float,
    pads: list[int],
    masks_in_prompt: int,
    steps: int,
    seed: int,
) -> None:
    """Whatever the padding, the masks left in a prompt and the step count: projecting only the window gives
    the official full projection's tokens, and the step records account for every position unmasked."""
    gen = torch.Generator().manual_seed(seed)
    width = 6
    ids = torch.randint(3, MASK_ID, (len(pads), width), generator=gen)
    ids[0, width - 1 - masks_in_prompt : width - 1] = MASK_ID  # infilling positions inside the first prompt
    mask = torch.ones_like(ids)
    for row, pad in enumerate(pads):
        ids[row, :pad], mask[row, :pad] = PAD_ID, 0
    settings = {"gen_length": 6, "steps": steps, "mask_id": MASK_ID, "alg": alg, "temperature": temperature}
    runs = []
    for full_logits in (False, True):
        sampler = dream_steps(
            model, ids, attention_mask=mask, full_logits=full_logits,
            generator=torch.Generator().manual_seed(seed), **settings,
        )  # fmt: skip
        committed = sum(int(record.committed) for record in sampler)
        assert committed == int((ids == MASK_ID).sum()) + 6 * len(pads) - int((sampler.x == MASK_ID).sum())
        assert sampler.forwards == steps
        runs.append(sampler.x)
    assert torch.equal(runs[0], runs[1])
