"""The faithful model's departures from the study, each checked on a case worked by hand."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.errors import RooflineInputError
from roofline.fidelity import Fidelity
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import get_hardware
from roofline.llada import estimate_llada, step_operators
from roofline.llama import estimate_llama
from roofline.operators import Operator
from roofline.phase import cost_of
from roofline.workload import Workload
from specs.registry import preset_shape
from specs.shapes import ModelShape

STUDY_HW = get_hardware("study-a6000")
LLAMA = preset_shape("llama", "8b")
LLADA = preset_shape("llada", "8b")
TINY = ModelShape(
    hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=16, vocab_size=10
)



def _ops(shape: ModelShape, seq_len: int, fidelity: Fidelity, **settings: Any) -> tuple[Operator, ...]:
    """One LLaDA step over `seq_len` positions (a prompt of that length), the workload's other fields `settings`."""
    return step_operators(shape, Workload(prompt_len=seq_len, gen_len=0, **settings), fidelity, seq_len=seq_len)

def _attention(shape: ModelShape, s: int, mask: str):
    return cost_of(forward_operators(shape, ForwardPass(1, s, s, mask, 1)), STUDY_HW)  # type: ignore[arg-type]


@pytest.mark.parametrize("s", [1, 2, 7, 160, 2048])
def test_exact_causal_flops_are_half_plus_the_diagonal(s: int) -> None:
    """Each head's query j sees j + 1 keys: S(S+1)/2 = S^2/2 + S/2 of the S^2 pairs, in QK and in PV."""
    full = _attention(LLAMA, s, "none")
    causal = _attention(LLAMA, s, "causal")
    heads, layers, hd = LLAMA.num_heads, LLAMA.num_layers, LLAMA.head_dim
    diagonal = layers * heads * 2 * (2 * hd * s)  # QK + PV, 2 FLOPs per MAC, hd MACs per (query, key) pair
    assert 2 * causal.flops["mha_attention"] == full.flops["mha_attention"] + diagonal
    assert causal.flops["mha_attention"] == layers * heads * 2 * 2 * hd * s * (s + 1) // 2
    # Masking changes no bytes: every K and V row is still read.
    assert causal.bytes_["mha_attention"] == full.bytes_["mha_attention"]


def test_exact_causal_softmax_counts_the_visible_pairs() -> None:
    s = 5
    ops = {op.name: op for op in forward_operators(TINY, ForwardPass(1, s, s, "causal", 1))}
    # g = 2 query heads per KV head, each sees 1 + 2 + ... + 5 = 15 keys
    assert ops["softmax"].flops == 2 * 15
    assert ops["qk"].flops == 2 * 4 * 2 * 15


def test_study_causal_correction_keeps_most_of_the_work() -> None:
    """The study's prefill attention at S=2048 does 1.87x the exact causal work."""
    s = 2048
    study = _attention(LLAMA, s, "study-causal").flops["mha_attention"]
    exact = _attention(LLAMA, s, "causal").flops["mha_attention"]
    assert study == 32 * (15360 * s * s - 129024 * s)
    assert exact == 32 * (8192 * s * s + 8192 * s)
    assert study / exact == pytest.approx(1.8664, abs=1e-4)


def test_faithful_llada_step_has_an_lm_head_over_every_position() -> None:
    seq = 640
    faithful = cost_of(
        _ops(LLADA, seq, "faithful", batch=1), STUDY_HW
    )
    study = cost_of(_ops(LLADA, seq, "study", batch=1), STUDY_HW)
    assert faithful.flops["classifier"] == 2 * 126464 * 4096 * 640
    assert study.flops["classifier"] == 0
    # 663 GFLOPs, 6.8% of the step's tensor FLOPs at S = 640 (roofline-model.md says "~10%").
    tensor_flops = sum(faithful.flops[c] for c in ("ffn_linear", "mha_linear", "mha_attention", "classifier"))
    assert faithful.flops["classifier"] / tensor_flops == pytest.approx(0.068, abs=0.001)


def test_faithful_llada_steps_run_over_the_full_length() -> None:
    est = estimate_llada(LLADA, STUDY_HW, Workload(prompt_len=128, gen_len=512, block_length=128, steps=256))
    assert [b.seq_len for b in est.blocks] == [640] * 4
    assert len({b.time_per_step_s for b in est.blocks}) == 1
    assert est.total_s == pytest.approx(256 * est.blocks[0].time_per_step_s)


def test_truncated_faithful_steps_are_the_study_steps_plus_head_and_sampler() -> None:
    work = Workload(prompt_len=128, gen_len=512, block_length=128, steps=256)
    study = estimate_llada(LLADA, STUDY_HW, work, fidelity="study")
    cut = estimate_llada(LLADA, STUDY_HW, replace(work, truncate_blocks=True))
    assert [b.seq_len for b in cut.blocks] == [b.seq_len for b in study.blocks] == [256, 384, 512, 640]
    for s_block, f_block in zip(study.blocks, cut.blocks, strict=True):
        ops = _ops(LLADA, f_block.seq_len, "faithful", batch=1)
        extra = cost_of([op for op in ops if op.op_class in ("classifier", "sampler")], STUDY_HW).total_time_s
        assert f_block.time_per_step_s == pytest.approx(s_block.time_per_step_s + extra, rel=1e-12)


def test_study_llada_ignores_truncate_blocks() -> None:
    work = Workload(prompt_len=128, gen_len=64, block_length=32, steps=8)
    assert estimate_llada(LLADA, STUDY_HW, work, "study") == estimate_llada(
        LLADA, STUDY_HW, replace(work, truncate_blocks=True), "study"
    ).model_copy(update={"truncate_blocks": True})


def test_faithful_llama_runs_one_decode_pass_fewer() -> None:
    """G tokens: the prefill yields the first, then G - 1 passes attend P+1 .. P+G-1."""
    faithful = estimate_llama(LLAMA, STUDY_HW, Workload(prompt_len=128, gen_len=10))
    study = estimate_llama(LLAMA, STUDY_HW, Workload(prompt_len=128, gen_len=9), fidelity="study")
    assert (faithful.decode_passes, study.decode_passes) == (9, 9)
    assert faithful.decode is not None and study.decode is not None
    assert faithful.decode.flops == study.decode.flops
    assert faithful.decode.total_s == pytest.approx(study.decode.total_s)
    assert estimate_llama(LLAMA, STUDY_HW, Workload(prompt_len=128, gen_len=1)).decode is None


def test_batch_scales_activations_and_reads_weights_once() -> None:
    one = cost_of(_ops(LLADA, 640, "faithful", batch=1), STUDY_HW)
    four = cost_of(_ops(LLADA, 640, "faithful", batch=4), STUDY_HW)
    d, f, v, layers = 4096, 12288, 126464, 32
    # Weights read per step: q, k, v, o (d x d each, 32 KV heads), gate, up, down, the norms' parameter
    # vectors (the study's rule: 2 per norm), and the LM head.
    weights_read = 2 * layers * (4 * d * d + 3 * d * f) + layers * 2 * 4 * d + 4 * d + 2 * v * d
    assert four.total_flops == 4 * one.total_flops
    assert four.total_bytes - weights_read == 4 * (one.total_bytes - weights_read)


def test_cfg_doubles_the_model_batch_and_adds_the_guidance_ops() -> None:
    plain = cost_of(_ops(LLADA, 640, "faithful", batch=2), STUDY_HW)
    cfg = cost_of(_ops(LLADA, 640, "faithful", batch=2, cfg_scale=1.5), STUDY_HW)
    doubled = cost_of(
        _ops(LLADA, 640, "faithful", batch=4), STUDY_HW
    )
    for c in ("ffn_linear", "mha_linear", "mha_attention", "nonlinear", "classifier"):
        assert cfg.flops[c] == doubled.flops[c]
    # sub, scale, add over the [2, 640, V] guided logits, then the same argmax and softmax as without CFG
    assert cfg.flops["sampler"] - plain.flops["sampler"] == 3 * 2 * 640 * 126464


def test_sampler_work_by_hand() -> None:
    ops = {op.name: op for op in _ops(TINY, 3, "faithful", batch=1)}
    assert (ops["argmax"].flops, ops["argmax"].bytes_) == (30, 60)  # read BF16 logits
    assert ops["softmax_cast"].bytes_ == 30 * (2 + 8)  # read BF16, write float64
    assert ops["softmax_float64"].bytes_ == 30 * 16
    random = _ops(TINY, 3, "faithful", batch=1, remasking="random")
    assert [op.name for op in random if op.op_class == "sampler"] == ["argmax"]
    hot = _ops(TINY, 3, "faithful", batch=1, temperature=0.7)
    assert sum(op.name.startswith("gumbel") for op in hot) == 7


def test_study_fidelity_refuses_batches_and_cfg() -> None:
    with pytest.raises(RooflineInputError, match="faithful"):
        estimate_llama(LLAMA, STUDY_HW, Workload(prompt_len=8, gen_len=8, batch=2), fidelity="study")
    with pytest.raises(RooflineInputError, match="faithful"):
        estimate_llada(
            LLADA, STUDY_HW, Workload(prompt_len=8, gen_len=8, block_length=8, steps=8, cfg_scale=1.0), "study"
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gen_len": 100, "block_length": 32, "steps": 4}, "multiple of block_length"),
        ({"gen_len": 128, "block_length": 32, "steps": 6}, "multiple of the number of blocks"),
        ({"gen_len": 128, "block_length": 32, "steps": 0}, ">= 1"),
    ],
)
def test_llada_schedule_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(RooflineInputError, match=message):
        estimate_llada(LLADA, STUDY_HW, Workload(prompt_len=16, **kwargs))


# docs/roofline.md quotes these (LLaDA-8B, 128 + 512 tokens, 256 steps, block 32, batch 1).
README_FIGURES_MS = {
    ("study-a6000", "study"): 7633.4187,
    ("study-a6000", "faithful"): 12742.8743,
    ("a100-sxm4-80gb", "study"): 5050.8971,
    ("a100-sxm4-80gb", "faithful"): 8958.1617,
}


@pytest.mark.parametrize(("hardware", "fidelity"), list(README_FIGURES_MS))
def test_readme_figures(hardware: str, fidelity: str) -> None:
    est = estimate_llada(
        LLADA,
        get_hardware(hardware),
        Workload(prompt_len=128, gen_len=512, block_length=32, steps=256),
        fidelity=fidelity,  # type: ignore[arg-type]
    )
    assert round(est.total_s * 1e3, 4) == README_FIGURES_MS[(hardware, fidelity)]


@settings(max_examples=40, deadline=None)
@given(
    prompt_len=st.integers(1, 512),
    blocks=st.integers(1, 8),
    block_length=st.sampled_from([1, 4, 32]),
    steps_per_block=st.integers(1, 4),
    hardware=st.sampled_from(["study-a6000", "a100-sxm4-80gb", "rtx-4090"]),
)
def test_faithful_llada_never_costs_less_than_the_study(
    prompt_len: int, blocks: int, block_length: int, steps_per_block: int, hardware: str
) -> None:
    """Full-length steps, an LM head and a sampler only add work to the study's step."""
    work = Workload(
        prompt_len=prompt_len, gen_len=blocks * block_length, block_length=block_length, steps=blocks * steps_per_block
    )
    hw = get_hardware(hardware)
    study = estimate_llada(LLADA, hw, work, fidelity="study")
    truncated = estimate_llada(LLADA, hw, replace(work, truncate_blocks=True))
    full = estimate_llada(LLADA, hw, work)
    assert study.total_s < truncated.total_s <= full.total_s
    assert study.flops < truncated.flops <= full.flops


@settings(max_examples=40, deadline=None)
@given(prompt_len=st.integers(2, 4096), gen_len=st.integers(0, 2048))
def test_faithful_llama_never_costs_more_than_the_study(prompt_len: int, gen_len: int) -> None:
    """Exact causal masking and one decode pass fewer only remove work (from 2 prompt tokens: with one, the
    study's PV correction masks t(t-1)/2 MACs of a product that has nothing to mask)."""
    work = Workload(prompt_len=prompt_len, gen_len=gen_len)
    study = estimate_llama(LLAMA, STUDY_HW, work, fidelity="study")
    faithful = estimate_llama(LLAMA, STUDY_HW, work)
    assert faithful.total_s <= study.total_s
    assert faithful.flops <= study.flops


def test_logits_over_the_block_only_remove_the_rest_of_the_lm_head() -> None:
    """The project's sampler projects only the block it fills: LM-head FLOPs scale with the block, not the
    sequence, and the rest of the step is unchanged."""
    from roofline.hardware import get_hardware
    from roofline.llada import estimate_llada
    from specs.registry import preset_shape

    shape, hardware = preset_shape("llada", "8b"), get_hardware("a100-sxm4-80gb")
    work = Workload(prompt_len=128, gen_len=512, block_length=32, steps=256)
    full = estimate_llada(shape, hardware, work)
    window = estimate_llada(shape, hardware, replace(work, logits_positions=32))
    head_flops_per_position = 2 * shape.vocab_size * shape.hidden_size
    removed_positions = (128 + 512) - 32
    assert full.flops - window.flops >= 256 * removed_positions * head_flops_per_position
    assert window.total_s < full.total_s
    assert window.breakdown_s["ffn_linear"] == full.breakdown_s["ffn_linear"]
