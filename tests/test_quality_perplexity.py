"""Generative perplexity: the evaluator's NLL of a continuation equals a hand computation from its logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from workers.models.tokenization import synthetic_tokenizer
from workers.quality.perplexity import TokenNll, continuation_nll, evaluator_pair

VOCAB = 97


@pytest.fixture(scope="module", params=["eager", "sdpa"])
def tiny_lm(request) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=0.2,
        attn_implementation=request.param,
    )
    return LlamaForCausalLM(config).eval()


def hand_nll(model: LlamaForCausalLM, context: list[int], continuation: list[int]) -> float:
    """-Σ log softmax(logits[t-1])[x_t] over the continuation, from one unpadded forward, in float64."""
    sequence = context + continuation
    with torch.no_grad():
        logits = model(torch.tensor([sequence])).logits[0].double().numpy()  # [S, V]
    total = 0.0
    for t in range(len(context), len(sequence)):
        row = logits[t - 1]
        log_z = row.max() + math.log(np.exp(row - row.max()).sum())
        total -= row[sequence[t]] - log_z
    return total


def test_single_sequence_equals_hand_computation(tiny_lm) -> None:
    context, continuation = [5, 17, 33, 2], [40, 41, 7, 90, 12]
    (result,) = continuation_nll(tiny_lm, [(context, continuation)])
    assert result.tokens == 5
    assert result.nll_sum == pytest.approx(hand_nll(tiny_lm, context, continuation), rel=1e-5)
    assert result.perplexity == pytest.approx(math.exp(result.nll_sum / 5), rel=1e-9)


def test_left_padded_batch_equals_each_sequence_alone(tiny_lm) -> None:
    pairs = [([5, 17, 33, 2], [40, 41, 7]), ([8], [9, 10, 11, 12, 13, 14]), ([1, 2, 3, 4, 5, 6, 7, 8], [60])]
    batched = continuation_nll(tiny_lm, pairs, batch_size=3)
    for (context, continuation), result in zip(pairs, batched):
        assert result.tokens == len(continuation)
        assert result.nll_sum == pytest.approx(hand_nll(tiny_lm, context, continuation), rel=1e-4, abs=1e-5)


def test_empty_context_leaves_the_first_token_unscored(tiny_lm) -> None:
    (result,) = continuation_nll(tiny_lm, [([], [3, 4, 5])])
    assert result.tokens == 2
    assert result.nll_sum == pytest.approx(hand_nll(tiny_lm, [3], [4, 5]), rel=1e-5)


def test_empty_continuation_has_no_perplexity(tiny_lm) -> None:
    (result,) = continuation_nll(tiny_lm, [([1, 2], [])])
    assert result == TokenNll(0.0, 0) and result.perplexity is None


def test_long_context_is_cut_from_the_left(tiny_lm) -> None:
    context, continuation = list(range(1, 80)), [3, 4]
    (result,) = continuation_nll(tiny_lm, [(context, continuation)], max_positions=64)
    assert result.nll_sum == pytest.approx(hand_nll(tiny_lm, context[-62:], continuation), rel=1e-5)


def test_evaluator_pair_moves_trailing_space_to_the_continuation() -> None:
    tokenizer = synthetic_tokenizer()
    context, continuation = evaluator_pair(tokenizer, "the cat sat ", "on the mat")
    assert tokenizer.decode(context) == "the cat sat"
    assert tokenizer.decode(continuation) == "on the mat"
    assert tokenizer.cls_token_id not in context + continuation  # BERT has no BOS to prepend
