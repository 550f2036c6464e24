"""Fast-dLLM v2's sampler is token-exact against the official `generate` (every golden case: tokens and every
forward), and keeps its own promises: the fixed schedule at threshold 1, the early stop at a run's length, the two
named departures, and refusals that say what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen2ForCausalLM

from specs.block_diffusion import schedule
from tests.fast_dllm_golden.cases import prompt
from tests.fast_dllm_golden.tiny_checkpoint import MASK_ID, write_tiny_fast_dllm_checkpoint
from tests.fast_dllm_models import golden, golden_checkpoint, load_fast_dllm, run_golden_case
from workers.samplers.block_diffusion.sampler import block_diffusion_generate, block_diffusion_steps

CASES = golden()["generation_cases"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Qwen2ForCausalLM:
    return load_fast_dllm(golden_checkpoint(tmp_path_factory.mktemp("fast-dllm")))


@pytest.fixture
def mask_on_top(model: Qwen2ForCausalLM):  # type: ignore[no-untyped-def]
    """The model with [MASK] every position's most likely token, by a margin."""
    handle = model.lm_head.register_forward_hook(
        lambda _m, _i, out: out.index_add_(-1, torch.tensor([MASK_ID]), torch.full((*out.shape[:-1], 1), 50.0))
    )
    yield model
    handle.remove()


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_token_exact_against_the_official_generate(model: Qwen2ForCausalLM, case: dict) -> None:
    """The returned sequences, and every forward: what it fed, whether the cache grew, which sub-block it fed alone."""
    sampler = run_golden_case(model, case)
    assert sampler.sequences.tolist() == case["sequences"]
    assert sampler.forward_log == case["forward_log"] and sampler.forwards == case["forwards"]


def test_eager_attention_agrees_and_other_weights_do_not(tmp_path: Path) -> None:
    """The golden data tells models apart: eager attention gives the same tokens, the next seed's weights do not."""
    case = next(c for c in CASES if c["name"] == "b8s4-p11-t0.7-nocache")
    eager = load_fast_dllm(golden_checkpoint(tmp_path / "golden"), attention="eager")
    assert run_golden_case(eager, case).sequences.tolist() == case["sequences"]
    other = load_fast_dllm(write_tiny_fast_dllm_checkpoint(tmp_path / "other", seed=1))
    assert run_golden_case(other, case).sequences.tolist() != case["sequences"]


@pytest.mark.parametrize("prompt_length, gen_length", [(5, 12), (11, 9), (16, 17), (16, 1), (13, 20)])
@pytest.mark.parametrize("sub_block_cache", [False, True])
def test_a_run_stops_at_its_length_with_the_official_tokens(
    model: Qwen2ForCausalLM, prompt_length: int, gen_length: int, sub_block_cache: bool
) -> None:
    """`gen_length` ends the generation once its positions are committed: the official tokens, no more forwards than
    the official run's, and at threshold 1 exactly the schedule's K."""
    ids = torch.tensor(prompt(2, prompt_length, salt=5))
    plan = schedule(prompt_length, gen_length, 8, 4)
    common = {"block_length": 8, "sub_block_length": 4, "mask_id": MASK_ID, "sub_block_cache": sub_block_cache}
    official = block_diffusion_steps(model, ids, max_new_tokens=plan.max_new_tokens, **common)
    for _ in official:
        pass
    run = block_diffusion_steps(model, ids, max_new_tokens=plan.max_new_tokens, gen_length=gen_length, **common)
    for _ in run:
        pass
    assert run.generation.shape == (2, gen_length) and not (run.generation == MASK_ID).any()
    assert torch.equal(run.generation, official.generation[:, :gen_length])
    assert run.forwards <= official.forwards
    assert run.forwards == plan.max_forwards  # threshold 1: one token per row per forward, rows in step


@pytest.mark.parametrize("threshold", [0.7, 0.3])
def test_lower_thresholds_take_between_the_least_and_k_forwards(model: Qwen2ForCausalLM, threshold: float) -> None:
    ids = torch.tensor(prompt(2, 11, salt=6))
    plan = schedule(11, 30, 8, 4)
    sampler = block_diffusion_steps(model, ids, max_new_tokens=plan.max_new_tokens, gen_length=30, block_length=8,
                                    sub_block_length=4, mask_id=MASK_ID, threshold=threshold)  # fmt: skip
    committed = [int(step.committed) for step in sampler]
    assert plan.min_forwards <= sampler.forwards < plan.max_forwards
    assert sum(committed) >= 2 * 30  # every generated token, both rows (the prefill's and completions' included)


def test_committing_mask_predictions_never_ends_and_skipping_them_does(mask_on_top: Qwen2ForCausalLM) -> None:
    """The official loop commits the mask id and stays on the same position forever; the named departure takes the
    runner-up token there."""
    ids = torch.tensor(prompt(2, 11))
    common = {"max_new_tokens": 16, "block_length": 8, "sub_block_length": 4, "mask_id": MASK_ID}
    official = block_diffusion_steps(mask_on_top, ids, **common)
    for _ in range(40):
        next(official)
    assert not official.done and official.forwards == 40
    fixed = block_diffusion_steps(mask_on_top, ids, commit_mask_predictions=False, **common)
    for _ in fixed:
        pass
    assert fixed.forwards == schedule(11, 14, 8, 4).max_forwards
    assert not (fixed.sequences == MASK_ID).any()


def test_a_one_block_prompt_is_ignored_officially_and_prefilled_on_request(model: Qwen2ForCausalLM) -> None:
    ids = torch.tensor(prompt(2, 8, salt=3))
    common = {"max_new_tokens": 16, "block_length": 8, "sub_block_length": 4, "mask_id": MASK_ID, "threshold": 0.7}
    official = block_diffusion_generate(model, ids, **common)
    assert torch.equal(official[0, 8:], official[1, 8:])  # two prompts, one answer: neither was seen
    sampler = block_diffusion_steps(model, ids, prefill_one_block_prompt=True, **common)
    for _ in sampler:
        pass
    assert sampler.forward_log[0] == [8, True, None]  # the prompt's prefill, with its next token
    assert not torch.equal(sampler.sequences[0, 8:], sampler.sequences[1, 8:])
    assert sampler.sequences.shape[1] - 8 == 17  # two blocks and their next tokens, after the prefill's token


def test_refusals_say_what_to_fix(model: Qwen2ForCausalLM) -> None:
    ids = torch.tensor(prompt(2, 11))
    common = {"max_new_tokens": 16, "block_length": 8, "mask_id": MASK_ID}
    with pytest.raises(ValueError, match="must divide block_length"):
        block_diffusion_steps(model, ids, sub_block_length=3, **common)
    with pytest.raises(ValueError, match="first row only"):
        block_diffusion_steps(model, ids, sub_block_length=4, temperature=0.7, **common)
    with pytest.raises(ValueError, match="threshold"):
        block_diffusion_steps(model, ids, sub_block_length=4, threshold=0.0, **common)
    with pytest.raises(ValueError, match="vocabulary"):
        block_diffusion_steps(model, ids, sub_block_length=4, **(common | {"mask_id": 256}))


def test_a_causal_model_is_refused(model: Qwen2ForCausalLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model.config, "is_causal", True)
    with pytest.raises(ValueError, match="inside a block but the model's config.is_causal is not False"):
        block_diffusion_steps(model, torch.tensor(prompt(1, 11)), max_new_tokens=8, block_length=8,
                              sub_block_length=4, mask_id=MASK_ID)
