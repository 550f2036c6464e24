"""The registry's families as the workers build them: Qwen2.5 loads without remote code and decodes token-exact
with transformers' generate(); every family's synthetic shape is the preset's; a spec that gives a model a
sampler or axes of another family is refused in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from specs.loader import SpecError
from specs.registry import ARCHS, FAMILIES, family
from specs.schema import Controls, ModelSpec
from tests.spec_fixtures import mutated, spec_from
from workers.models.dream_model import is_dream_bidirectional
from workers.models.loading import load_model, shape_of_config
from workers.models.tokenization import synthetic_tokenizer
from workers.samplers import ar_generate

CPU = torch.device("cpu")
CONTROLS = Controls(dtype="float32", attention="sdpa", device="cpu")


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Qwen2ForCausalLM]:
    """A Qwen2 checkpoint as transformers saves one (biases non-zero, norms away from one)."""
    directory = tmp_path_factory.mktemp("qwen2")
    config = Qwen2Config(
        vocab_size=30522, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        rms_norm_eps=1e-6, tie_word_embeddings=False, eos_token_id=102, use_sliding_window=False,
    )  # fmt: skip
    torch.manual_seed(5)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)  # a dropped bias or a swapped norm would show
    model.save_pretrained(str(directory))
    synthetic_tokenizer().save_pretrained(str(directory))
    return directory, model.eval()


def _ids(batch: int = 2, seq: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(1000, 30000, (batch, seq), generator=torch.Generator().manual_seed(seed))


def test_a_qwen2_checkpoint_loads_without_remote_code_with_transformers_logits(qwen2_dir) -> None:
    directory, reference = qwen2_dir
    loaded = load_model(ModelSpec(name="q", arch="qwen2", source={"checkpoint": str(directory)}), CONTROLS, CPU)
    assert type(loaded.model).__name__ == "Qwen2ForCausalLM" and loaded.mask_token_id is None
    ids = _ids()
    with torch.inference_mode():
        torch.testing.assert_close(loaded.model(ids).logits, reference(ids).logits, rtol=1e-5, atol=1e-5)
    shape = shape_of_config(loaded.model.config)
    assert shape.attention_bias and shape.num_kv_heads == 2 and shape.parameter_count() == sum(
        p.numel() for p in reference.parameters()
    )


def test_the_autoregressive_loop_on_qwen2_equals_generate(qwen2_dir) -> None:
    directory, reference = qwen2_dir
    loaded = load_model(ModelSpec(name="q", arch="qwen2", source={"checkpoint": str(directory)}), CONTROLS, CPU)
    ids = _ids(batch=3, seq=7, seed=1)
    with torch.inference_mode():
        ours = ar_generate(loaded.model, ids, None, n_new=12)
        theirs = reference.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False, eos_token_id=None
        )
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("arch", ARCHS)
def test_each_family_builds_its_tiny_preset_with_its_layout(arch: str) -> None:
    entry = family(arch)
    loaded = load_model(ModelSpec(name="m", arch=arch, source={"synthetic": "tiny"}), CONTROLS, CPU)
    assert shape_of_config(loaded.model.config) == entry.preset("tiny")
    assert type(loaded.model).__name__ == {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[entry.layout]
    assert (loaded.mask_token_id is not None) == entry.is_diffusion
    # Dream's bidirectional Qwen2 attention serves block diffusion too (its block masks are the sampler's).
    assert is_dream_bidirectional(loaded.model) == (entry.sampler in ("dream", "block_diffusion"))
    q_proj = loaded.model.model.layers[0].self_attn.q_proj
    assert (q_proj.bias is not None) == entry.preset("tiny").attention_bias
    if q_proj.bias is not None:
        assert q_proj.bias.abs().sum() > 0  # synthetic biases are drawn, not left at one like a norm


@pytest.mark.parametrize("arch", ARCHS)
def test_each_family_builds_its_published_shape_on_the_meta_device(arch: str) -> None:
    entry = family(arch)
    spec = ModelSpec(name="m", arch=arch, source={"synthetic": entry.full_size})
    loaded = load_model(spec, CONTROLS, torch.device("meta"))
    assert sum(p.numel() for p in loaded.model.parameters()) == entry.full_shape.parameter_count()


def test_dream_and_qwen2_share_qwen2_7b_shape() -> None:
    assert family("dream").full_shape == family("qwen2").full_shape
    assert family("qwen2").full_shape.parameter_count() == 7_615_616_512  # Qwen2.5-7B's published 7.61B
    assert family("dream").peer == "qwen2" and family("llada").peer == "llama"


def _with_dream(d: dict) -> dict:
    d["models"].append({"name": "dream-tiny", "arch": "dream", "source": {"synthetic": "tiny"}})
    d["grid"]["dream"] = {"steps": [8, 16]}
    return d


CASES = [
    ("llada sampler for dream", lambda d: _with_dream(d)["models"][2].update(sampler="llada"),
     "models.2.sampler: 'llada' does not fit dream models (Dream is diffusion); allowed: dream"),
    ("dream sampler for llama", lambda d: d["models"][0].update(sampler="dream"),
     "models.0.sampler: 'dream' does not fit llama models (LLaMA is autoregressive); allowed: autoregressive"),
    ("llada axes on dream", lambda d: _with_dream(d)["models"][2].update(llada={"steps": [8], "block_lengths": [32]}),
     "models.2.llada: llada sampler axes given for a dream model, which generates with the dream sampler"),
    ("dream axes on llada", lambda d: d["models"][1].update(dream={"steps": [8]}),
     "models.1.dream: dream sampler axes given for a llada model, which generates with the llada sampler"),
    ("grid.dream without dream", lambda d: d["grid"].update(dream={"steps": [8]}),
     "grid.dream: given but no model generates with the dream sampler"),
    ("dream without axes", lambda d: _with_dream(d)["grid"].pop("dream"),
     "grid.dream: model 'dream-tiny' generates with the dream sampler but neither grid.dream nor models.2.dream"),
    ("8b is not a dream preset", lambda d: _with_dream(d)["models"][2]["source"].update(synthetic="8b"),
     "models.2.source.synthetic: '8b' is not a preset of dream; allowed: tiny, small, 7b"),
    ("alg_temp with origin", lambda d: _with_dream(d)["grid"]["dream"].update(algs=["origin"], alg_temp=0.5),
     "grid.dream.alg_temp: orders the confidence algs"),
    ("unknown alg", lambda d: _with_dream(d)["grid"]["dream"].update(algs=["greedy"]),
     "grid.dream.algs.0: allowed: 'origin', 'maskgit_plus', 'topk_margin' or 'entropy'"),
    ("dream steps over the generation", lambda d: _with_dream(d)["grid"]["dream"].update(steps=[128]),
     "grid.dream.steps: 128 steps exceed generation length"),
    ("dream shape without the QKV bias",
     lambda d: _with_dream(d)["models"][2]["source"].update(synthetic=family("dream").preset("tiny").model_dump()
                                                             | {"attention_bias": False}),
     "models.2.source.synthetic.attention_bias: dream models have the qwen2 layout, whose q, k and v projections "
     "always carry a bias; allowed: true"),
    ("dream evaluator", lambda d: (_with_dream(d), d["quality"]["perplexity"].update(evaluator="dream-tiny")),
     "quality.perplexity.evaluator: 'dream-tiny' is a dream model"),
]


@pytest.mark.parametrize("mutate, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_sampler_that_does_not_fit_is_refused_naming_the_field(mutate, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from(mutated(mutate))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_naming_the_fitting_sampler_is_accepted_and_each_family_has_one() -> None:
    spec = spec_from(mutated(lambda d: _with_dream(d)["models"][2].update(sampler="dream")))
    assert spec.models[2].sampler == "dream"
    assert {f.sampler for f in FAMILIES.values()} == {"llada", "dream", "block_diffusion", "autoregressive"}


def test_a_dream_run_is_described_by_its_alg_and_variant_not_a_block() -> None:
    from orchestrator.cli import format_plan
    from orchestrator.plan import plan_runs
    from specs.loader import load_spec
    from specs.paths import PACKAGE_ROOT

    planned = plan_runs(load_spec(PACKAGE_ROOT / "specs" / "dream-qwen.yaml"))
    dream = [run for run in planned if run.config.model.arch == "dream"]
    assert {run.config.commit_rule for run in dream} == {"entropy", "maskgit_plus"}
    assert {run.config.impl_name for run in dream} == {"vanilla", "graph"}
    table = format_plan(dream).splitlines()
    assert all("maskgit_plus" in line or "entropy" in line for line in table[1:])
    graph = next(run for run in dream if run.config.dream_impl is not None)
    with_alg_temp = graph.config.model_copy(update={"dream": graph.config.dream.model_copy(update={"alg_temp": 0.5})})
    assert with_alg_temp.commit_rule == f"{graph.config.dream.alg}@0.5"
