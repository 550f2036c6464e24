"""Memory footprint worked by hand, and predictions for run configs (the real schema and a stand-in)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from roofline.errors import RooflineInputError
from roofline.hardware import get_hardware
from roofline.llada import estimate_llada
from roofline.llama import estimate_llama
from roofline.memory import kv_cache_bytes, llada_memory, llama_memory, weights_bytes
from roofline.predict import Prediction, predict, predict_run
from roofline.workload import Workload
from specs.registry import preset_shape

A100 = get_hardware("a100-sxm4-80gb")
LLAMA = preset_shape("llama", "8b")
LLADA = preset_shape("llada", "8b")


def test_weights_are_the_parameters_in_bf16() -> None:
    assert weights_bytes(LLAMA) == 2 * 8_030_261_248  # Meta-Llama-3-8B's parameter count
    assert weights_bytes(LLADA) == 2 * LLADA.parameter_count()


def test_llama_kv_cache_by_hand() -> None:
    # K and V x 32 layers x 8 KV heads x 128 x 2 bytes = 131072 bytes per position per sequence
    assert kv_cache_bytes(LLAMA, batch=1, positions=1) == 131072
    memory = llama_memory(LLAMA, Workload(prompt_len=128, gen_len=512, batch=4))
    assert memory.kv_cache_bytes == 4 * (128 + 511) * 131072  # the last token is never fed back
    assert memory.peak_bytes >= memory.weights_bytes + memory.kv_cache_bytes


def test_llada_logits_dominate_its_activations() -> None:
    memory = llada_memory(LLADA, Workload(prompt_len=128, gen_len=512))
    # BF16 logits + float64 copy + float64 softmax over [1, 640, 126464]
    assert memory.logits_bytes == 640 * 126464 * (2 + 8 + 8)
    assert memory.activation_bytes == 640 * (2 * 4096 + 3 * 12288) * 2
    assert memory.kv_cache_bytes == 0
    assert memory.peak_bytes == memory.weights_bytes + memory.logits_bytes


def test_llada_cfg_doubles_the_model_logits() -> None:
    plain = llada_memory(LLADA, Workload(prompt_len=64, gen_len=64, batch=2))
    cfg = llada_memory(LLADA, Workload(prompt_len=64, gen_len=64, batch=2, cfg_scale=1.0))
    per_sequence = 128 * 126464
    assert cfg.logits_bytes - plain.logits_bytes == per_sequence * (
        2 * 2 + 2 * 2
    )  # 2 more sequences + combined
    assert cfg.activation_bytes == 2 * plain.activation_bytes


def test_fits_predicts_the_memory_wall() -> None:
    work = Workload(prompt_len=128, gen_len=512, steps=512, block_length=32)
    small = predict("llada", None, work, hardware=get_hardware("rtx-4090"))
    large = predict("llada", None, replace(work, batch=8), hardware=get_hardware("rtx-4090"))
    assert small.fits and not large.fits
    assert large.peak_memory_bytes > 24 * 2**30


def test_predict_llama_fields() -> None:
    work = Workload(prompt_len=128, gen_len=64, batch=2)
    p = predict("llama", None, work, hardware=A100)
    est = estimate_llama(LLAMA, A100, work)
    assert isinstance(p, Prediction)
    assert p.latency_roofs_s == est.total_s
    # A100's host floor (24 ms per 32-layer eager forward) binds every pass of this small decode.
    assert p.host_floor_s == pytest.approx(0.024)
    assert p.ttft_s == max(est.prefill.total_s, 0.024)
    assert p.itl_s == pytest.approx(0.024) and (est.total_s - est.prefill.total_s) / 63 < 0.024
    assert p.latency_s == pytest.approx(p.ttft_s + 63 * 0.024)
    roofs = predict("llama", None, work, hardware=A100.model_copy(update={"host_floor_s": 0.0}))
    assert roofs.latency_s == roofs.latency_roofs_s == est.total_s and roofs.host_floor_s == 0.0
    compiled = predict("llama", None, replace(work, compiled_decode=True), hardware=A100)
    assert compiled.itl_s < 0.024  # a compiled decode pass skips the eager host path
    assert p.step_s is None
    assert p.tokens_per_s == pytest.approx(2 * 64 / p.latency_s)
    assert p.weights_bytes == weights_bytes(LLAMA)


def test_predict_llada_fields() -> None:
    work = Workload(prompt_len=128, gen_len=512, steps=256, block_length=32)
    p = predict("llada", None, work, hardware=A100)
    est = estimate_llada(LLADA, A100, work)
    assert p.latency_s == p.latency_roofs_s == est.total_s  # every step is above the host floor
    assert p.step_s == pytest.approx(est.total_s / 256)
    assert p.ttft_s is None and p.itl_s is None


def test_predict_rejects_llada_knobs_for_llama() -> None:
    with pytest.raises(RooflineInputError):
        predict("llama", None, Workload(prompt_len=8, gen_len=8, steps=8), hardware=A100)
    with pytest.raises(RooflineInputError):
        predict("llada", None, Workload(prompt_len=8, gen_len=8), hardware=A100)


def _stand_in(arch: str, shape=None, **fields):
    model = SimpleNamespace(arch=arch, shape=lambda: shape)
    base = {
        "batch_size": 1,
        "prompt_length": 128,
        "generation_length": 64,
        "steps": None,
        "block_length": None,
        "cfg_scale": 0.0,
    }
    return SimpleNamespace(model=model, **{**base, **fields})


def test_predict_run_with_a_stand_in_config() -> None:
    tiny = preset_shape("llada", "tiny")
    p = predict_run(_stand_in("llada", tiny, steps=64, block_length=32), A100)
    # predict_run costs the workers' sampler: logits over the current block only
    assert p == predict(
        "llada", tiny, Workload(prompt_len=128, gen_len=64, steps=64, block_length=32, logits_positions=32),
        hardware=A100,
    )
    # a checkpoint (shape unknown until loaded) falls back to the 8B preset
    assert predict_run(_stand_in("llama"), A100).weights_bytes == weights_bytes(LLAMA)


def test_predict_run_with_the_real_run_config() -> None:
    schema = pytest.importorskip("specs.schema")
    llada = schema.ModelSpec(name="llada-8b", arch="llada", source={"synthetic": "8b"})
    checkpoint = schema.ModelSpec(
        name="llama", arch="llama", source={"checkpoint": "meta-llama/Meta-Llama-3-8B"}
    )
    common = {
        "controls": schema.Controls(),
        "prompts": schema.Prompts(),
        "prompt_ids": [0],
        "quality": schema.QualitySpec(),
    }
    run = schema.RunConfig(
        model=llada,
        batch_size=2,
        prompt_length=128,
        generation_length=512,
        steps=256,
        block_length=32,
        remasking="low_confidence",
        cfg_scale=0.5,
        **common,
    )
    p = predict_run(run, A100)
    assert p == predict(
        "llada",
        LLADA,
        Workload(prompt_len=128, gen_len=512, batch=2, steps=256, block_length=32, cfg_scale=0.5, logits_positions=32),
        hardware=A100,
    )
    ar = schema.RunConfig(model=checkpoint, batch_size=1, prompt_length=128, generation_length=64, **common)
    assert (
        predict_run(ar, A100, fidelity="study").latency_roofs_s
        == estimate_llama(LLAMA, A100, Workload(prompt_len=128, gen_len=64), fidelity="study").total_s
    )
