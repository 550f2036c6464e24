"""LLaDA's ELBO estimator on a mask predictor whose exact likelihood is known by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from workers.quality.elbo import elbo_nll, masked_counts

VOCAB, MASK_ID = 11, 10


class FixedPredictor(nn.Module):
    """Ignores its input and predicts the same distribution at each position: logits[pos] of a fixed table."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table, requires_grad=False)  # [S, V]

    def forward(self, input_ids: torch.Tensor, logits_to_keep: int = 0, **_: object) -> SimpleNamespace:
        logits = self.table[: input_ids.shape[1]].expand(input_ids.shape[0], -1, -1)  # [B, S, V]
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


def exact_nll(table: torch.Tensor, prompt_length: int, answer: list[int]) -> float:
    """Σ_i -log softmax(table[P + i])[answer_i], by hand in float64."""
    total = 0.0
    for i, token in enumerate(answer):
        row = table[prompt_length + i].double().tolist()
        log_z = math.log(sum(math.exp(v) for v in row))
        total -= row[token] - log_z
    return total


PROMPT = [1, 2, 3, 4]
ANSWER = [5, 0, 9, 9, 3, 7, 2]


@pytest.fixture(scope="module")
def predictor() -> FixedPredictor:
    generator = torch.Generator().manual_seed(0)
    return FixedPredictor(3.0 * torch.randn(len(PROMPT) + len(ANSWER), VOCAB, generator=generator))


def test_masked_counts_cover_one_to_length_evenly() -> None:
    counts = masked_counts(7, 7000, torch.Generator().manual_seed(1))
    assert counts.min() == 1 and counts.max() == 7
    assert np.bincount(counts.numpy())[1:].tolist() == [1000] * 7


def test_equal_per_token_nll_gives_the_exact_value_from_one_sample() -> None:
    # Every position predicts the same distribution and the answer repeats one token: each sample's
    # (L/l) * Σ_masked is l * c * L / l = L * c exactly, whatever was masked.
    table = torch.randn(1, VOCAB).expand(12, -1).clone()
    answer = [4] * 8
    estimate = elbo_nll(FixedPredictor(table), PROMPT, answer, MASK_ID, samples=1, seed=3)
    assert estimate.nll_bound == pytest.approx(exact_nll(table, len(PROMPT), answer), rel=1e-6)
    assert estimate.nll_bound_per_token == pytest.approx(estimate.nll_bound / 8)


def test_bound_converges_to_the_exact_nll(predictor) -> None:
    exact = exact_nll(predictor.table.data, len(PROMPT), ANSWER)
    errors = {}
    for samples in (4, 64, 1024):
        runs = [
            elbo_nll(
                predictor, PROMPT, ANSWER, MASK_ID, samples=samples, seed=seed, batch_size=1024
            ).nll_bound
            for seed in range(20)
        ]
        errors[samples] = float(np.sqrt(np.mean((np.array(runs) - exact) ** 2)))
    assert errors[1024] < errors[64] < errors[4]
    big = elbo_nll(predictor, PROMPT, ANSWER, MASK_ID, samples=8192, seed=0, batch_size=4096)
    assert big.nll_bound == pytest.approx(exact, rel=0.01)
    assert abs(big.nll_bound - exact) < 4 * big.stderr


def test_seed_fixes_the_estimate_and_batching_does_not_change_it(predictor) -> None:
    a = elbo_nll(predictor, PROMPT, ANSWER, MASK_ID, samples=16, seed=5, batch_size=16)
    b = elbo_nll(predictor, PROMPT, ANSWER, MASK_ID, samples=16, seed=5, batch_size=16)
    c = elbo_nll(predictor, PROMPT, ANSWER, MASK_ID, samples=16, seed=5, batch_size=3)
    assert a == b
    assert c.nll_bound == pytest.approx(a.nll_bound, rel=1e-12)
    assert elbo_nll(predictor, PROMPT, ANSWER, MASK_ID, samples=16, seed=6).nll_bound != a.nll_bound


def test_masks_touch_only_the_answer() -> None:
    seen: list[torch.Tensor] = []

    class Recorder(FixedPredictor):
        def forward(
            self, input_ids: torch.Tensor, logits_to_keep: int = 0, **kwargs: object
        ) -> SimpleNamespace:
            seen.append(input_ids.clone())
            return super().forward(input_ids, logits_to_keep, **kwargs)

    recorder = Recorder(torch.zeros(len(PROMPT) + len(ANSWER), VOCAB))
    elbo_nll(recorder, PROMPT, ANSWER, MASK_ID, samples=10, seed=0, batch_size=4)
    noisy = torch.cat(seen)
    assert noisy.shape == (10, len(PROMPT) + len(ANSWER))
    assert (noisy[:, : len(PROMPT)] == torch.tensor(PROMPT)).all()
    masked = noisy[:, len(PROMPT) :] == MASK_ID
    assert (masked.sum(-1) >= 1).all()
    assert (noisy[:, len(PROMPT) :][~masked] == torch.tensor(ANSWER).expand(10, -1)[~masked]).all()


def test_empty_answer_has_no_bound(predictor) -> None:
    estimate = elbo_nll(predictor, PROMPT, [], MASK_ID, samples=4)
    assert estimate.tokens == 0 and estimate.nll_bound_per_token is None


def test_runs_on_a_bidirectional_llama() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        is_causal=False,
    )
    model = LlamaForCausalLM(config).eval()
    estimate = elbo_nll(model, PROMPT, ANSWER, MASK_ID, samples=8, seed=0, batch_size=3)
    assert estimate.tokens == len(ANSWER) and estimate.nll_bound > 0 and estimate.stderr is not None
