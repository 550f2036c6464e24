"""The roofline of every registry family: one forward's FLOPs and bytes worked by hand from each published
config.json, Dream's whole-sequence estimate, the QKV bias, predictions, the CLI and the B* of any pair."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from roofline import cli
from roofline.crossover import predicted_crossover, throughput_ratio
from roofline.dream import dream_sampler_operators, estimate_dream, masked_schedule
from roofline.errors import RooflineInputError
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import get_hardware
from roofline.llada import estimate_llada, step_operators
from roofline.llama import estimate_llama
from roofline.memory import dream_memory, weights_bytes
from roofline.phase import cost_of
from roofline.plotdata import latency_vs_generation_length, operator_points
from roofline.predict import predict, predict_run
from roofline.workload import Workload
from specs.registry import FAMILIES, full_shape

H200 = get_hardware("h200")
EB = 2  # BF16 bytes per element
B, P, N = 2, 8, 8  # batch, prompt and generated tokens of the worked forward
S = P + N


def hand_forward(
    *, d: int, kv: int, f: int, vocab: int, layers: int, heads: int, kv_heads: int, bias: bool, tokens_fed: int,
    causal: bool, head_rows: int,
) -> tuple[int, int]:
    """(FLOPs, bytes) of one forward of B sequences, each feeding `tokens_fed` positions that attend each other
    (causally or not), the LM head over `head_rows` positions per sequence, written out term by term."""
    s = tokens_fed
    t = B * s  # tokens
    hd = d // heads
    g = heads // kv_heads
    hidden_pairs = g * s * (s - 1) // 2 if causal else 0  # (query, key) pairs one KV head's queries cannot see
    flops = bytes_ = 0
    # Embeddings: a gather of t rows from the table, not costed in any family.
    # q, k, v, o projections: W[out, d] @ X[d, t]; the bias adds one per output element and is read once.
    for out in (d, kv, kv):
        flops += 2 * out * d * t + (out * t if bias else 0)
        bytes_ += EB * (out * d + d * t + out * t + (out if bias else 0))
    flops += 2 * d * d * t  # o_proj: never a bias
    bytes_ += EB * (d * d + d * t + d * t)
    # Attention per (KV head, sequence): QK^T [g s, hd] x [hd, s] (scores stay on chip), softmax in registers, PV.
    instances = kv_heads * B
    flops += instances * 2 * (g * s * hd * s - hd * hidden_pairs)  # qk
    bytes_ += instances * EB * (g * s * hd + hd * s)
    flops += instances * 2 * (g * s * s * hd - hd * hidden_pairs)  # pv
    bytes_ += instances * EB * (s * hd + g * s * hd)
    flops += instances * (g * s * s - hidden_pairs)  # softmax: no DRAM traffic
    # RoPE on q and k, two RMSNorms (+ their two parameter vectors each, the study's rule), two residual adds.
    flops += d * t + kv * t
    bytes_ += 2 * EB * (d * t + kv * t)
    flops += 2 * d * t
    bytes_ += 2 * (2 * EB * d * t + 2 * EB * d)
    flops += 2 * d * t
    bytes_ += 2 * 3 * EB * d * t
    # SwiGLU MLP: gate and up [f, d] @ [d, t], silu, gate * up, down [d, f] @ [f, t].
    flops += 2 * (2 * f * d * t) + 2 * d * f * t
    bytes_ += 2 * EB * (f * d + d * t + f * t) + EB * (d * f + f * t + d * t)
    flops += f * t + f * t
    bytes_ += 2 * EB * f * t + 3 * EB * f * t
    flops, bytes_ = layers * flops, layers * bytes_
    # Final norm, then the LM head [V, d] @ [d, B x head_rows] (read once, tied or not).
    flops += d * t
    bytes_ += 2 * EB * d * t + 2 * EB * d
    flops += 2 * vocab * d * B * head_rows
    bytes_ += EB * (vocab * d + d * B * head_rows + vocab * B * head_rows)
    return flops, bytes_


# The published config.json numbers (not read from the registry, so a wrong registry entry fails here).
LLAMA_3_8B = {"d": 4096, "kv": 8 * 128, "f": 14336, "vocab": 128256, "layers": 32, "heads": 32, "kv_heads": 8,
              "bias": False}
LLADA_8B = {"d": 4096, "kv": 32 * 128, "f": 12288, "vocab": 126464, "layers": 32, "heads": 32, "kv_heads": 32,
            "bias": False}
QWEN25_7B = {"d": 3584, "kv": 4 * 128, "f": 18944, "vocab": 152064, "layers": 28, "heads": 28, "kv_heads": 4,
             "bias": True}


def _model_classes(cost) -> tuple[int, int]:
    """FLOPs and bytes of everything but the sampler's work on the logits."""
    classes = ("ffn_linear", "mha_linear", "mha_attention", "nonlinear", "classifier")
    return sum(cost.flops[c] for c in classes), sum(cost.bytes_[c] for c in classes)


@pytest.mark.parametrize(("arch", "config"), [("llama", LLAMA_3_8B), ("qwen2", QWEN25_7B)])
def test_autoregressive_prefill_of_the_full_shape_by_hand(arch: str, config: dict) -> None:
    """A generation of one token is its prefill alone: P causal positions, logits at the last one."""
    est = estimate_llama(full_shape(arch), H200, Workload(prompt_len=P, gen_len=1, batch=B))
    assert est.decode is None
    assert (est.flops, est.bytes_) == hand_forward(**config, tokens_fed=P, causal=True, head_rows=1)


def test_llada_step_of_the_full_shape_by_hand() -> None:
    """One step over prompt + generation, bidirectional, logits over the block (the workers' sampler)."""
    work = Workload(prompt_len=P, gen_len=N, block_length=N, steps=1, batch=B, logits_positions=N)
    est = estimate_llada(full_shape("llada"), H200, work)
    step = cost_of(step_operators(full_shape("llada"), work, "faithful", seq_len=S), H200)
    assert (est.flops, est.bytes_) == (step.total_flops, step.total_bytes)
    assert _model_classes(step) == hand_forward(**LLADA_8B, tokens_fed=S, causal=False, head_rows=N)


def test_dream_step_of_the_full_shape_by_hand() -> None:
    """One step of Dream-7B: Qwen2.5-7B's layers over prompt + generation, bidirectional, logits over the N
    positions that predict the generation; then the sampler over the N masked positions (entropy, temperature 0):
    gather (read + write), softmax (read + write), max (read), probs + eps, log (read + write each), the product
    (two reads, one write) and the sum (read): 7 ops and 13 element-bytes per logit."""
    est = estimate_dream(full_shape("dream"), H200, Workload(prompt_len=P, gen_len=N, steps=1, batch=B))
    flops, bytes_ = hand_forward(**QWEN25_7B, tokens_fed=S, causal=False, head_rows=N)
    logits = B * N * 152064
    assert (est.flops, est.bytes_) == (flops + 7 * logits, bytes_ + 13 * EB * logits)
    assert est.masked_positions == N and est.logits_positions == N and est.forwards == 1


def test_the_tiny_presets_by_hand_too() -> None:
    """The CPU presets follow the same arithmetic (Qwen2 tiny: d 112, 7 heads of 16, 1 KV head, f 592)."""
    tiny = {"d": 112, "kv": 16, "f": 592, "vocab": 30522, "layers": 2, "heads": 7, "kv_heads": 1, "bias": True}
    ops = forward_operators(FAMILIES["qwen2"].preset("tiny"), ForwardPass(B, S, S, "causal", 1))
    cost = cost_of(ops, H200)
    assert (cost.total_flops, cost.total_bytes) == hand_forward(**tiny, tokens_fed=S, causal=True, head_rows=1)


def test_qwen2_differs_from_the_llama_layout_by_the_bias_alone() -> None:
    """Qwen2.5-7B without its bias is a LLaMA-layout model of the same numbers: the bias adds B*S*(d + 2 kv) adds
    and d + 2 kv parameters read per layer, on q, k and v only."""
    qwen = full_shape("qwen2")
    no_bias = qwen.model_copy(update={"attention_bias": False})
    fp = ForwardPass(B, S, S, "causal", 1)
    with_ops = {op.name: op for op in forward_operators(qwen, fp)}
    without_ops = {op.name: op for op in forward_operators(no_bias, fp)}
    assert with_ops.keys() == without_ops.keys()
    changed = {name for name in with_ops if with_ops[name] != without_ops[name]}
    assert changed == {"q_proj", "k_proj", "v_proj"}
    with_cost, without_cost = cost_of(with_ops.values(), H200), cost_of(without_ops.values(), H200)
    assert with_cost.total_flops - without_cost.total_flops == 28 * B * S * (3584 + 2 * 512)
    assert with_cost.total_bytes - without_cost.total_bytes == 28 * EB * (3584 + 2 * 512)
    assert weights_bytes(qwen) - weights_bytes(no_bias) == 28 * EB * (3584 + 2 * 512)


def test_weights_count_the_published_parameters_and_a_tied_table_once() -> None:
    qwen = full_shape("qwen2")
    # Qwen2.5-7B's model card: 7.61B parameters, 6.53B without the embedding table and the (untied) head (rounded
    # there; the layout's exact count is 7,615,616,512).
    assert qwen.parameter_count() == 7_615_616_512
    assert qwen.parameter_count() == pytest.approx(7.61e9, abs=0.01e9)
    assert qwen.parameter_count() - 2 * 152064 * 3584 == pytest.approx(6.53e9, abs=0.01e9)
    tied = qwen.model_copy(update={"tie_word_embeddings": True})
    assert weights_bytes(qwen) - weights_bytes(tied) == EB * 152064 * 3584
    assert full_shape("dream") == qwen  # Dream-v0-7B was initialised from Qwen2.5-7B: the same numbers


def test_dream_schedule_commits_as_the_official_sampler() -> None:
    """steps == N: t_i = 1 - i (1 - eps) / N; step 0 commits int(N (1 - t_1)) = int(0.999) = 0 positions, step 1
    int(8 x 0.1427) = 1, ..., the last step every masked one left."""
    assert masked_schedule(8, 8) == (8, 8, 7, 6, 5, 4, 3, 2)
    assert masked_schedule(8, 1) == (8,)
    # origin reveals each masked position with probability 1 - s/t: N t_i expected.
    assert masked_schedule(8, 2, "origin") == pytest.approx((8.0, 8 * (1 - 0.999 / 2)))


def test_dream_at_n_steps_is_n_whole_sequence_forwards() -> None:
    """N steps: N identical forwards over P + N (no cache, no blocks), plus the sampler over the schedule's masked
    positions (7 ops and 13 element-bytes per logit, as in the one-step case)."""
    shape = full_shape("dream")
    n = 64
    est = estimate_dream(shape, H200, Workload(prompt_len=128, gen_len=n, steps=n, batch=4))
    forward = cost_of(forward_operators(shape, ForwardPass(4, 128 + n, 128 + n, "none", n)), H200)
    for c in ("ffn_linear", "mha_linear", "mha_attention", "nonlinear", "classifier"):
        assert est.breakdown_s[c] == pytest.approx(n * forward.time_s[c], rel=1e-12)
    assert est.forward_s == pytest.approx(forward.total_time_s)
    sampled_logits = 4 * sum(masked_schedule(n, n)) * 152064
    assert est.flops == n * forward.total_flops + 7 * sampled_logits
    assert est.bytes_ == n * forward.total_bytes + 13 * EB * sampled_logits
    assert (est.forwards, est.masked_positions) == (n, sum(masked_schedule(n, n)))


def test_dream_sampler_follows_the_alg_and_the_temperature() -> None:
    shape = full_shape("dream")
    rows = {"masked_rows": 10, "sampled_rows": 10}

    def names_of(rows: dict[str, int], **settings: Any) -> list[str]:
        work = Workload(prompt_len=1, gen_len=10, **settings)
        return [op.name for op in dream_sampler_operators(shape, work, **rows)]

    names = {alg: names_of(rows, alg=alg) for alg in ("entropy", "maskgit_plus", "topk_margin")}
    assert names["entropy"] == ["gather_masked", "softmax", "max", "entropy_add_eps", "entropy_log", "entropy_mul",
                                "entropy_sum"]
    assert names["maskgit_plus"] == names["topk_margin"] == ["gather_masked", "softmax", "max"]
    hot = names_of(rows, alg="maskgit_plus", temperature=0.5)
    assert hot == ["gather_masked", "temperature_div", "softmax", "categorical"]
    origin = names_of({"masked_rows": 10, "sampled_rows": 2}, alg="origin")
    assert origin == ["gather_masked", "gather_committed", "softmax", "max"]


def test_dream_memory_has_no_cache_and_its_logits_over_the_generation() -> None:
    memory = dream_memory(full_shape("dream"), Workload(prompt_len=512, gen_len=256, batch=2))
    assert memory.kv_cache_bytes == 0
    # logits [2, 256, V], gathered masked logits, probabilities, log-probabilities and their product: 5 x BF16
    assert memory.logits_bytes == 2 * 256 * 152064 * 5 * EB
    assert memory.activation_bytes == 2 * 768 * (2 * 3584 + 3 * 18944) * EB


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_predict_falls_back_to_the_published_shape(arch: str) -> None:
    keywords = {"llada": {"steps": 8, "block_length": 8}, "dream": {"steps": 8},
                "fast_dllm_v2": {"block_length": 8, "sub_block_length": 4}}.get(arch, {})
    p = predict(arch, None, Workload(prompt_len=16, gen_len=8, **keywords), hardware=H200)
    assert p.arch == arch
    assert p.weights_bytes == weights_bytes(full_shape(arch))


def test_a_dream_prediction_fills_steps_and_forwards() -> None:
    work = Workload(prompt_len=512, gen_len=256, steps=64, batch=2)
    p = predict("dream", None, work, hardware=H200)
    est = estimate_dream(full_shape("dream"), H200.model_copy(update={"dispatch_s": 0.0}), work)
    floor_s = H200.host_floor_of(28)
    assert (p.forwards, p.forwards_source, p.ttft_s, p.itl_s) == (64, "schedule", None, None)
    assert p.latency_roofs_s == pytest.approx(est.total_s)
    assert p.latency_s == pytest.approx(64 * max(est.mean_step_s, floor_s))
    assert p.step_s == pytest.approx(p.latency_s / 64)


def test_predict_refuses_another_samplers_settings() -> None:
    with pytest.raises(RooflineInputError, match="block_length"):
        predict("dream", None, Workload(prompt_len=8, gen_len=8, steps=8, block_length=8), hardware=H200)
    with pytest.raises(RooflineInputError, match="steps"):
        predict("qwen2", None, Workload(prompt_len=8, gen_len=8, steps=8), hardware=H200)
    with pytest.raises(RooflineInputError, match="alg"):
        predict("llada", None, Workload(prompt_len=8, gen_len=8, steps=8, block_length=8, alg="entropy"),
                hardware=H200)
    with pytest.raises(RooflineInputError, match="needs steps"):
        predict("dream", None, Workload(prompt_len=8, gen_len=8), hardware=H200)
    with pytest.raises(RooflineInputError, match="unknown arch"):
        predict("gpt2", None, Workload(prompt_len=8, gen_len=8), hardware=H200)  # type: ignore[arg-type]


def test_predict_run_of_a_dream_run_config() -> None:
    schema = pytest.importorskip("specs.schema")
    run = schema.RunConfig(
        model=schema.ModelSpec(name="dream-7b", arch="dream", source={"synthetic": "7b"}),
        batch_size=2, prompt_length=64, generation_length=32, steps=16,
        dream=schema.DreamSampling(alg="maskgit_plus", top_k=50),
        controls=schema.Controls(), prompts=schema.Prompts(), prompt_ids=[0], quality=schema.QualitySpec(),
    )
    p = predict_run(run, H200)
    work = Workload(prompt_len=64, gen_len=32, batch=2, steps=16, alg="maskgit_plus", top_k=50)
    assert p == predict("dream", full_shape("dream"), work, hardware=H200)
    assert p.forwards == 16 and p.step_s is not None
    stand_in = SimpleNamespace(
        model=SimpleNamespace(arch="qwen2", shape=lambda: None), batch_size=1, prompt_length=64,
        generation_length=32, steps=None, block_length=None, cfg_scale=0.0,
    )
    assert predict_run(stand_in, H200).weights_bytes == weights_bytes(full_shape("qwen2"))


def test_a_graph_replayed_dream_variant_has_no_host_floor() -> None:
    def run(impl: object) -> SimpleNamespace:
        return SimpleNamespace(
            model=SimpleNamespace(arch="dream", shape=lambda: None), batch_size=1, prompt_length=64,
            generation_length=32, steps=32, dream=SimpleNamespace(alg="entropy", top_p=None, top_k=None),
            dream_impl=impl,
        )

    eager, graphs = predict_run(run(None), H200), predict_run(run(SimpleNamespace(graph=True)), H200)
    assert eager.host_floor_s == H200.host_floor_of(28) and graphs.host_floor_s == 0.0
    assert graphs.latency_s == graphs.latency_roofs_s < eager.latency_s


def test_cli_has_a_subcommand_per_family_with_its_full_size_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    for name, fam in FAMILIES.items():
        base = ["--prompt-len", "8", "--gen-len", "8"]
        extra = {"llada": ["--steps", "8", "--block-length", "8"], "dream": ["--steps", "8"]}.get(fam.sampler, [])
        assert parser.parse_args([name, *base, *extra]).preset == fam.full_size
    assert cli.main(["dream", "--prompt-len", "512", "--gen-len", "256", "--steps", "64", "--hardware", "h200"]) == 0
    text = capsys.readouterr().out
    assert "Dream Theoretical Performance Analysis" in text and "SeqLen: 768 every step" in text
    assert "Sampler: alg entropy" in text
    assert cli.main(["qwen2", "--prompt-len", "512", "--gen-len", "256", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decode_passes"] == 255 and doc["memory"]["weights_bytes"] == weights_bytes(full_shape("qwen2"))
    assert cli.main(["dream", "--prompt-len", "8", "--gen-len", "8", "--steps", "8", "--json", "--alg", "origin"]) == 0
    assert json.loads(capsys.readouterr().out)["alg"] == "origin"
    assert cli.main(["dream", "--prompt-len", "8", "--gen-len", "8", "--steps", "8", "--preset", "8b"]) == 2
    assert "allowed: tiny, small, 7b" in capsys.readouterr().err


def test_crossover_of_any_pair_and_the_old_call_form() -> None:
    lengths = {"prompt_len": 512, "gen_len": 256, "steps": 64}
    old = throughput_ratio(4, H200, **lengths, block_length=32, llama_shape=None, llada_shape=full_shape("llada"))
    new = throughput_ratio(4, H200, **lengths, block_length=32, ar="llama", diffusion="llada",
                           ar_shape=full_shape("llama"))
    assert old == new
    dream = throughput_ratio(4, H200, **lengths, ar="qwen2", diffusion="dream")
    qwen = predict("qwen2", None, Workload(prompt_len=512, gen_len=256, batch=4), hardware=H200)
    diffusion = predict("dream", None, Workload(prompt_len=512, gen_len=256, batch=4, steps=64), hardware=H200)
    assert dream == qwen.tokens_per_s / diffusion.tokens_per_s
    b_star = predicted_crossover(H200, ar="qwen2", diffusion="dream", **lengths)
    assert b_star is not None and 1.0 < b_star < 64
    assert throughput_ratio(int(b_star) + 1, H200, ar="qwen2", diffusion="dream", **lengths) >= 1.0
    with pytest.raises(RooflineInputError, match="not autoregressive"):
        throughput_ratio(1, H200, **lengths, ar="dream", diffusion="llada", block_length=32)
    with pytest.raises(RooflineInputError, match="block_length"):
        throughput_ratio(1, H200, **lengths, ar="qwen2", diffusion="dream", block_length=32)


def test_plot_data_for_the_dream_qwen_pair() -> None:
    points = operator_points(H200, prompt_len=64, gen_len=32, batch=2, ar="qwen2", diffusion="dream")
    assert {(p.phase, p.stage) for p in points} == {("qwen2 prefill", "prefill"), ("qwen2 decode", "decode"),
                                                    ("dream step", "step")}
    step_head = next(p for p in points if p.phase == "dream step" and p.name == "lm_head")
    assert step_head.flops == 2 * 152064 * 3584 * 2 * 32  # logits over the generation's 32 positions
    curves = latency_vs_generation_length(H200, [32, 64], ar="qwen2", diffusion="dream", fidelities=["faithful"])
    assert [(p.arch, p.steps) for p in curves] == [("qwen2", None), ("dream", 32), ("qwen2", None), ("dream", 64)]
    dream_64 = estimate_dream(full_shape("dream"), H200, Workload(prompt_len=128, gen_len=64, steps=64))
    assert curves[-1].latency_s == dream_64.total_s
    with pytest.raises(RooflineInputError):
        operator_points(H200, prompt_len=8, gen_len=8, ar="llada", diffusion="dream")

