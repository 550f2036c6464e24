"""The roofline on a measured machine: tensor bytes from the run's dtype, the per-kernel dispatch floor (also
summed in closed form over decode passes), profiles from measured roofs, and the calibration itself."""

from __future__ import annotations

import random

import pytest

from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import get_hardware
from roofline.llama import estimate_llama
from roofline.operators import element_bytes_of
from roofline.phase import cost_of, cost_of_affine_passes, sum_max_lines
from roofline.predict import predict
from roofline.workload import Workload
from specs.registry import preset_shape

A100 = get_hardware("a100-sxm4-80gb")
TINY = preset_shape("llama", "tiny")


def test_tensor_bytes_follow_the_runs_dtype() -> None:
    # The old model charged 2 bytes per element whatever the run's dtype: a float32 CPU run's traffic was halved.
    assert [element_bytes_of(d) for d in ("bfloat16", "float16", "float32", None)] == [2, 2, 4, 2]
    with pytest.raises(ValueError, match="allowed: bfloat16"):
        element_bytes_of("int8")
    fp = ForwardPass(1, 1, 65, "none", 1)
    half = {op.name: op for op in forward_operators(TINY, fp)}
    full = {op.name: op for op in forward_operators(TINY, fp, element_bytes=4)}
    assert full["down_proj"].bytes_ == 2 * half["down_proj"].bytes_ and full["down_proj"].flops == half["down_proj"].flops
    assert full["softmax"].bytes_ == half["softmax"].bytes_ == 0  # fused: no DRAM traffic in either dtype
    bf16 = predict("llama", None, Workload(prompt_len=128, gen_len=64), hardware=A100)
    fp32 = predict("llama", None, Workload(prompt_len=128, gen_len=64, element_bytes=4), hardware=A100)
    assert fp32.bytes_ == 2 * bf16.bytes_ and fp32.weights_bytes == 2 * bf16.weights_bytes
    # Batch-1 decode on the roofs alone is bandwidth-bound (A100's host floor would hide the dtype).
    assert fp32.latency_roofs_s == pytest.approx(2 * bf16.latency_roofs_s, rel=0.02)


def test_the_dispatch_floor_bounds_every_operator_from_below() -> None:
    floor = A100.model_copy(update={"dispatch_s": 10e-6})
    ops = forward_operators(TINY, ForwardPass(1, 1, 65, "none", 1))
    bare, with_floor = cost_of(ops, A100), cost_of(ops, floor)
    launches = sum(op.launches for op in ops)
    # Per layer: 4 projections, 3 FFN matmuls, 2 RoPE, 2 norms, 2 residual adds, SiLU, gate x up, one fused
    # attention kernel; then the final norm and the LM head.
    assert launches == TINY.num_layers * 16 + 2
    assert with_floor.total_time_s >= launches * 10e-6 > bare.total_time_s
    assert with_floor.total_flops == bare.total_flops and with_floor.total_bytes == bare.total_bytes
    by_op = {op.name: op for op in ops}
    assert by_op["pv"].launches == 0 and by_op["softmax"].launches == 0 and by_op["qk"].launches == TINY.num_layers


def test_decode_passes_with_a_floor_sum_in_closed_form() -> None:
    floor = A100.model_copy(update={"dispatch_s": 3e-6})
    passes = 200
    first = forward_operators(TINY, ForwardPass(4, 1, 33, "none", 1))
    last = forward_operators(TINY, ForwardPass(4, 1, 32 + passes, "none", 1))
    closed = cost_of_affine_passes(first, last, passes, floor).total_time_s
    each = sum(cost_of(forward_operators(TINY, ForwardPass(4, 1, 32 + i, "none", 1)), floor).total_time_s
               for i in range(1, passes + 1))
    assert closed == pytest.approx(each, rel=1e-9)
    work = Workload(prompt_len=32, gen_len=passes + 1, batch=4)
    assert estimate_llama(TINY, floor, work).total_s > estimate_llama(TINY, A100, work).total_s


def test_sum_of_the_max_of_lines_matches_the_direct_sum() -> None:
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 40)
        lines = [(rng.uniform(0, 5), rng.uniform(0, 5)) for _ in range(rng.randint(1, 4))]
        direct = sum(max(v0 + (v1 - v0) * j / max(n - 1, 1) for v0, v1 in lines) for j in range(n))
        assert sum_max_lines(lines, n) == pytest.approx(direct, rel=1e-12, abs=1e-12)


def test_a_profile_from_measured_roofs() -> None:
    from report.analysis.predictions import profile_from_roofs
    from specs.results import MeasuredRoofs

    roofs = MeasuredRoofs(device="cpu", dtype="float32", threads=1, matmul_flops_per_s=80e9, vector_ops_per_s=4e9,
                          memory_bandwidth_bytes_per_s=15e9, dispatch_s=2e-6, memory_bytes=1 << 33, method="m",
                          wall_s=1.0)
    profile = profile_from_roofs(roofs)
    assert profile.name == "cpu (measured, float32, 1 threads)" and profile.dispatch_s == 2e-6
    assert profile.ridge_point_flops_per_byte == pytest.approx(80 / 15)


@pytest.mark.slow
def test_calibrate_measures_this_cpu() -> None:
    from workers.measure.calibrate import calibrate, format_roofs, measured_roofs

    roofs = calibrate("cpu", "float32")
    assert roofs.device == "cpu" and roofs.dtype == "float32" and roofs.threads >= 1
    assert roofs.matmul_flops_per_s > 1e8 and roofs.memory_bandwidth_bytes_per_s > 1e8
    assert 0 < roofs.op_dispatch_s <= roofs.dispatch_s < 1e-2  # a model operator costs more than a bare op
    assert roofs.vector_ops_per_s > 0 and roofs.memory_bytes > 0
    assert "dispatch floor" in format_roofs(roofs)
    assert measured_roofs("cpu", "float32") is measured_roofs("cpu", "float32")  # once per process


def test_the_calibration_counts_launches_as_the_roofline_does() -> None:
    # The dispatch floor is a micro model's forward divided by the launches the roofline charges for it.
    from workers.measure.calibrate import LAUNCHES_PER_LAYER, LAUNCHES_PER_PASS, MICRO_LAYERS

    micro = TINY.model_copy(update={"num_layers": MICRO_LAYERS})
    ops = forward_operators(micro, ForwardPass(1, 1, 1, "none", 1))
    assert sum(op.launches for op in ops) == MICRO_LAYERS * LAUNCHES_PER_LAYER + LAUNCHES_PER_PASS
