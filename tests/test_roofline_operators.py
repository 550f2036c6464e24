"""Hand-worked cases for each operator rule, and the closed-form decode sum against a pass-by-pass loop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.operators import (
    elementwise,
    exact_causal_masked_positions,
    instance_time_s,
    matmul,
    norm,
    study_causal_masked_macs,
)
from roofline.phase import ALL_CLASSES, cost_of, cost_of_affine_passes, empty_cost
from specs.registry import preset_shape
from specs.shapes import ModelShape

# Round numbers so every time below can be worked by hand.
TOY = HardwareProfile(
    name="toy",
    peak_tensor_flops_per_s=100.0,
    peak_vector_ops_per_s=10.0,
    memory_bandwidth_bytes_per_s=50.0,
    memory_bytes=1000,
    source="test",
)
TINY = ModelShape(
    hidden_size=8, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=16, vocab_size=10
)


def test_matmul_flops_and_bytes() -> None:
    op = matmul("mm", "ffn_linear", 2, 3, 4)
    assert (op.flops, op.bytes_) == (2 * 2 * 3 * 4, 2 * (2 * 3 + 3 * 4 + 2 * 4))  # 48, 52
    # memory-bound on the toy: max(48 / 100, 52 / 50) = 1.04 s
    assert op.time_s(TOY) == pytest.approx(1.04)


def test_matmul_without_output_or_first_operand() -> None:
    assert matmul("qk", "mha_attention", 2, 3, 4, write_output=False).bytes_ == 2 * (6 + 12)
    assert matmul("pv", "mha_attention", 2, 3, 4, load_a=False).bytes_ == 2 * (12 + 8)


def test_matmul_compute_bound_runs_at_the_tensor_peak() -> None:
    op = matmul("mm", "ffn_linear", 10, 10, 10)  # 2000 FLOPs, 600 bytes
    assert op.time_s(TOY) == pytest.approx(2000 / 100)
    assert op.attainable_flops_per_s(TOY) == 100.0


def test_count_multiplies_time() -> None:
    assert matmul("mm", "ffn_linear", 2, 3, 4, count=7).time_s(TOY) == pytest.approx(7 * 1.04)


def test_study_causal_correction_is_one_triangle_of_the_smaller_side() -> None:
    # t = min(m, n) = 4, k * t(t-1)/2 = 4 * 6 MACs
    assert study_causal_masked_macs(8, 4, 4) == 24
    assert study_causal_masked_macs(8, 5, 3) == 5 * 3
    op = matmul(
        "qk", "mha_attention", 8, 4, 4, write_output=False, masked_macs=study_causal_masked_macs(8, 4, 4)
    )
    assert op.flops == 2 * (8 * 4 * 4 - 24)


def test_exact_causal_masks_the_strict_upper_triangle() -> None:
    assert [exact_causal_masked_positions(s) for s in (1, 2, 3, 5)] == [0, 1, 3, 10]


def test_elementwise_rules() -> None:
    unary = elementwise("silu", "nonlinear", 3, 5, bytes_per_element=4)
    binary = elementwise("add", "nonlinear", 3, 5, bytes_per_element=6)
    assert (unary.flops, unary.bytes_) == (15, 60)
    assert (binary.flops, binary.bytes_) == (15, 90)
    # vector unit: max(15 / 10, 60 / 50) = 1.5 s
    assert unary.time_s(TOY) == pytest.approx(1.5)
    assert unary.unit == "vector"


def test_norm_reads_two_parameter_vectors() -> None:
    op = norm("norm", 3, 5)
    assert (op.flops, op.bytes_) == (15, 60 + 4 * 5)


def test_fused_softmax_is_pure_compute() -> None:
    op = elementwise("softmax", "nonlinear", 4, 4, bytes_per_element=0, masked=6)
    assert (op.flops, op.bytes_) == (10, 0)
    assert op.time_s(TOY) == pytest.approx(1.0)
    assert op.arithmetic_intensity == float("inf")


def test_a_tie_is_the_same_time_either_way() -> None:
    assert instance_time_s(100.0, 50.0, 100.0, TOY) == 1.0


def test_study_prefill_attention_matches_the_documented_closed_form() -> None:
    """roofline-model.md: FLOPs/layer = 15360 S^2 - 129024 S, bytes/layer = 20480 S, AI = 0.75 S - 6.3."""
    shape = preset_shape("llama", "8b")
    for s in (160, 2048):
        cost = cost_of(forward_operators(shape, ForwardPass(1, s, s, "study-causal", 1)), TOY)
        layers = shape.num_layers
        assert cost.flops["mha_attention"] == layers * (15360 * s * s - 129024 * s)
        assert cost.bytes_["mha_attention"] == layers * 20480 * s
        assert cost.attention_ai == pytest.approx(0.75 * s - 6.3)


def test_one_tiny_layer_worked_by_hand() -> None:
    """d=8, H=2 heads of 4, 1 KV head (g=2), f=16, V=10; bidirectional pass over S=3 tokens, no LM head."""
    ops = {op.name: op for op in forward_operators(TINY, ForwardPass(1, 3, 3, "none", 0))}
    assert (ops["q_proj"].flops, ops["q_proj"].bytes_) == (2 * 8 * 8 * 3, 2 * (64 + 24 + 24))
    assert (ops["k_proj"].flops, ops["k_proj"].bytes_) == (2 * 4 * 8 * 3, 2 * (32 + 24 + 12))
    # QK = mm(g*S = 6, hd = 4, Lkv = 3, no write); PV = mm(6, 3, 4, no load A)
    assert (ops["qk"].flops, ops["qk"].bytes_) == (2 * 6 * 4 * 3, 2 * (24 + 12))
    assert (ops["pv"].flops, ops["pv"].bytes_) == (2 * 6 * 3 * 4, 2 * (12 + 24))
    assert (ops["softmax"].flops, ops["softmax"].bytes_) == (18, 0)
    assert (ops["rope_q"].flops, ops["rope_k"].flops) == (24, 12)
    assert ops["residual_add"].count == 2
    assert (ops["gate_mul_up"].flops, ops["gate_mul_up"].bytes_) == (48, 6 * 48)
    assert (ops["down_proj"].flops, ops["down_proj"].bytes_) == (2 * 8 * 16 * 3, 2 * (128 + 48 + 24))
    assert "lm_head" not in ops
    assert ops["final_norm"].count == 1


def test_batch_reads_weights_once() -> None:
    one = {op.name: op for op in forward_operators(TINY, ForwardPass(1, 3, 3, "none", 3))}
    four = {op.name: op for op in forward_operators(TINY, ForwardPass(4, 3, 3, "none", 3))}
    weights = 2 * 8 * 8
    assert four["q_proj"].bytes_ - weights == 4 * (one["q_proj"].bytes_ - weights)
    assert four["q_proj"].flops == 4 * one["q_proj"].flops
    assert four["lm_head"].flops == 4 * one["lm_head"].flops
    # attention has no weights: 4x the instances of the same size
    assert (four["qk"].count, four["qk"].bytes_) == (4 * one["qk"].count, one["qk"].bytes_)


def _loop_cost(shape: ModelShape, batch: int, prompt_len: int, passes: int, hardware: HardwareProfile):
    total = empty_cost()
    for i in range(1, passes + 1):
        total = total + cost_of(
            forward_operators(shape, ForwardPass(batch, 1, prompt_len + i, "none", 1)), hardware
        )
    return total


@settings(max_examples=60, deadline=None)
@given(
    prompt_len=st.integers(1, 300),
    passes=st.integers(1, 60),
    batch=st.integers(1, 4),
    bandwidth=st.one_of(st.sampled_from([1.0, 7.0, 5000.0]), st.floats(50.5, 120.0)),
)
def test_closed_form_decode_equals_the_pass_by_pass_sum(
    prompt_len: int, passes: int, batch: int, bandwidth: float
) -> None:
    """On the toy, decode QK does 16 L FLOPs over 16 + 8 L bytes: between 50 and 120 B/s of bandwidth it turns
    from memory- to compute-bound at L = 16 / (0.16 bw - 8), inside the range for many draws."""
    hw = TOY.model_copy(update={"memory_bandwidth_bytes_per_s": bandwidth})
    first = forward_operators(TINY, ForwardPass(batch, 1, prompt_len + 1, "none", 1))
    last = forward_operators(TINY, ForwardPass(batch, 1, prompt_len + passes, "none", 1))
    closed = cost_of_affine_passes(first, last, passes, hw)
    loop = _loop_cost(TINY, batch, prompt_len, passes, hw)
    for c in ALL_CLASSES:
        assert closed.flops[c] == loop.flops[c]
        assert closed.bytes_[c] == loop.bytes_[c]
        assert closed.time_s[c] == pytest.approx(loop.time_s[c], rel=1e-12, abs=1e-12)


def test_closed_form_decode_across_a_crossover() -> None:
    hw = TOY.model_copy(update={"memory_bandwidth_bytes_per_s": 55.0})  # QK crosses at L = 20
    first = forward_operators(TINY, ForwardPass(1, 1, 2, "none", 1))
    last = forward_operators(TINY, ForwardPass(1, 1, 61, "none", 1))
    qk_first, qk_last = first[4], last[4]
    assert qk_first.name == "qk"
    assert qk_first.flops / 100 < qk_first.bytes_ / 55 and qk_last.flops / 100 > qk_last.bytes_ / 55
    closed = cost_of_affine_passes(first, last, 60, hw)
    assert closed.time_s["mha_attention"] == pytest.approx(
        _loop_cost(TINY, 1, 1, 60, hw).time_s["mha_attention"]
    )


def test_closed_form_decode_on_the_8b_study_hardware() -> None:
    from roofline.hardware import get_hardware

    hw, shape = get_hardware("study-a6000"), preset_shape("llama", "8b")
    first = forward_operators(shape, ForwardPass(1, 1, 2049, "none", 1))
    last = forward_operators(shape, ForwardPass(1, 1, 2048 + 37, "none", 1))
    closed = cost_of_affine_passes(first, last, 37, hw)
    loop = _loop_cost(shape, 1, 2048, 37, hw)
    assert closed.total_time_s == pytest.approx(loop.total_time_s, rel=1e-12)
    assert (closed.total_flops, closed.total_bytes) == (loop.total_flops, loop.total_bytes)
