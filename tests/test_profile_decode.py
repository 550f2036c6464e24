"""tests/gpu/profile_decode.py's roof, checked here without a GPU: a decode step's memory roof is the bytes the
roofline charges (every weight once but the embedding table, the live keys and values once), and what the
kernel reads past the live keys (its bucket, or the whole static cache) is counted apart."""

from __future__ import annotations

import pytest

from roofline.hardware import get_hardware
from roofline.llama import decode_pass_bytes, estimate_llama, mean_decode_pass_bytes
from roofline.workload import Workload
from specs.registry import preset_shape
from tests.gpu.profile_decode import kernel_extra_kv_bytes, roof_bytes

LLAMA = preset_shape("llama", "8b")
KV_PER_POSITION = 2 * 32 * 8 * 128 * 2  # keys and values, 32 layers, 8 KV heads of 128, bf16, one sequence


def test_the_roof_charges_every_weight_once_but_the_embedding_table_and_the_live_kv() -> None:
    roof = roof_bytes(LLAMA, batch=1, kv_lens=[768], element_bytes=2)
    embedding = LLAMA.vocab_size * LLAMA.hidden_size * 2
    weights = 2 * LLAMA.parameter_count()
    # The old roof read every parameter, the 1.05 GB embedding table included; the roofline reads its B rows.
    assert weights - embedding + 768 * KV_PER_POSITION < roof < weights - embedding + 768 * KV_PER_POSITION + 50e6
    # At batch 64 the weights are read once, the keys and values per sequence (and the activations grow).
    wide = roof_bytes(LLAMA, batch=64, kv_lens=[768], element_bytes=2)
    assert 63 * 768 * KV_PER_POSITION < wide - roof < 1.2 * 63 * 768 * KV_PER_POSITION


def test_the_roof_is_the_roofline_s_decode_bytes() -> None:
    """A generation's mean pass is what the report's estimate charges its decode passes, pass for pass."""
    work = Workload(prompt_len=512, gen_len=256, batch=8)
    estimate = estimate_llama(LLAMA, get_hardware("h200"), work)
    assert estimate.decode is not None
    mean = mean_decode_pass_bytes(LLAMA, work)
    assert mean * estimate.decode_passes == pytest.approx(estimate.decode.bytes_, rel=1e-9)
    lens = list(range(513, 513 + estimate.decode_passes))
    assert roof_bytes(LLAMA, batch=8, kv_lens=lens, element_bytes=2) == pytest.approx(mean, rel=1e-9)
    assert decode_pass_bytes(LLAMA, batch=8, kv_len=513) < mean


def test_the_kernel_s_extra_reads_are_its_bucket_or_the_static_cache() -> None:
    lens = [1005, 1006]
    live = kernel_extra_kv_bytes(LLAMA, attention="live", batch=2, kv_lens=lens, capacity=2048, element_bytes=2)
    static = kernel_extra_kv_bytes(LLAMA, attention="static", batch=2, kv_lens=lens, capacity=2048, element_bytes=2)
    assert live == pytest.approx(2 * KV_PER_POSITION * (1024 - 1005.5))  # the 256-position bucket ends at 1024
    assert static == pytest.approx(2 * KV_PER_POSITION * (2048 - 1005.5))
