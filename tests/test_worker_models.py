"""Synthetic models: fixed-seed weights, exact preset shapes built on meta, bidirectional LLaDA, kernel control."""

from __future__ import annotations

import pytest
import torch

from specs.registry import preset_shape
from specs.schema import Controls, ModelSpec
from tests.worker_fixtures import one_thread  # noqa: F401 (a fixture: usefixtures finds it by name)
from workers.errors import SpecMismatchError
from workers.measure.memory import current_rss_bytes
from workers.models.llada_model import BidirectionalAttention, Float32RotaryEmbedding, is_bidirectional
from workers.models.loading import attention_implementation, load_model

CPU = torch.device("cpu")
pytestmark = pytest.mark.usefixtures("one_thread")
FLOAT32_CPU = Controls(dtype="float32", device="cpu")


def _spec(arch: str, preset: str = "tiny", seed: int = 0) -> ModelSpec:
    return ModelSpec(name=f"{arch}-{preset}", arch=arch, source={"synthetic": preset, "seed": seed})


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_synthetic_weights_are_fixed_by_the_seed(arch: str) -> None:
    a = load_model(_spec(arch, seed=1), FLOAT32_CPU, CPU).model.state_dict()
    b = load_model(_spec(arch, seed=1), FLOAT32_CPU, CPU).model.state_dict()
    c = load_model(_spec(arch, seed=2), FLOAT32_CPU, CPU).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.embed_tokens.weight"], c["model.embed_tokens.weight"])
    assert torch.isfinite(a["lm_head.weight"]).all()


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_synthetic_model_has_the_preset_shape(arch: str) -> None:
    loaded = load_model(_spec(arch), FLOAT32_CPU, CPU)
    shape = preset_shape(arch, "tiny")
    params = sum(p.numel() for p in loaded.model.parameters())
    assert params == shape.parameter_count()
    assert loaded.weights_bytes == params * 4  # float32
    assert loaded.weights == "synthetic" and loaded.dtype == torch.float32
    assert loaded.tokenizer.vocab_size == 30522
    assert loaded.eos_token_ids == (loaded.tokenizer.sep_token_id,)
    assert loaded.mask_token_id == (103 if arch == "llada" else None)  # BERT's [MASK]
    assert not any(p.requires_grad for p in loaded.model.parameters()) and not loaded.model.training


def test_spec_mask_id_overrides_the_tokenizer() -> None:
    spec = _spec("llada").model_copy(update={"mask_token_id": 4})
    assert load_model(spec, FLOAT32_CPU, CPU).mask_token_id == 4


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_exact_8b_shape_builds_on_meta_without_host_memory(arch: str) -> None:
    before = current_rss_bytes()
    loaded = load_model(_spec(arch, "8b"), Controls(dtype="bfloat16", device="cpu"), torch.device("meta"))
    after = current_rss_bytes()
    shape = preset_shape(arch, "8b")
    params = list(loaded.model.parameters())
    assert all(p.device.type == "meta" for p in params)
    assert sum(p.numel() for p in params) == shape.parameter_count()
    assert loaded.weights_bytes == 2 * shape.parameter_count()  # bf16: ~16 GB described, none allocated
    config = loaded.model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_key_value_heads) == (
        shape.hidden_size, shape.num_layers, shape.num_kv_heads,
    )  # fmt: skip
    assert before is None or after - before < 512 * 2**20


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_llada_attends_both_ways_and_llama_only_back(attention: str) -> None:
    controls = Controls(dtype="float32", device="cpu", attention=attention)
    ids = torch.randint(0, 30000, (1, 10), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 30000
    for arch, sees_future in (("llada", True), ("llama", False)):
        model = load_model(_spec(arch), controls, CPU).model
        assert model.config._attn_implementation == attention
        with torch.inference_mode():
            first = model(ids, use_cache=False).logits[0, 0]
            first_changed = model(changed, use_cache=False).logits[0, 0]
        assert (not torch.allclose(first, first_changed)) == sees_future, arch


def test_llada_is_llama_class_with_bidirectional_modules() -> None:
    model = load_model(_spec("llada"), FLOAT32_CPU, CPU).model
    assert type(model).__name__ == "LlamaForCausalLM"
    assert is_bidirectional(model) and model.config.is_causal is False and model.config.use_cache is False
    assert isinstance(model.model.rotary_emb, Float32RotaryEmbedding)
    assert all(isinstance(layer.self_attn, BidirectionalAttention) and not layer.self_attn.is_causal for layer in model.model.layers)
    assert model.model.rotary_emb.inv_freq.dtype == torch.float32


def test_llada_bf16_rotary_tables_stay_float32() -> None:
    model = load_model(_spec("llada"), Controls(dtype="bfloat16", device="cpu"), CPU).model
    x = torch.zeros(1, 4, 8, dtype=torch.bfloat16)
    cos, sin = model.model.rotary_emb(x, torch.arange(4)[None])
    assert cos.dtype == sin.dtype == torch.float32
    assert model.model.embed_tokens.weight.dtype == torch.bfloat16


def test_flash_attention_without_flash_attn_is_a_spec_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecMismatchError, match="CUDA"):
        attention_implementation("flash_attention_2", CPU)
    monkeypatch.setattr("workers.models.loading.is_flash_attn_2_available", lambda: False)
    with pytest.raises(SpecMismatchError, match="pip install flash-attn"):
        attention_implementation("flash_attention_2", torch.device("cuda", 0))
    monkeypatch.setattr("workers.models.loading.is_flash_attn_2_available", lambda: True)
    assert attention_implementation("flash_attention_2", torch.device("cuda", 0)) == "flash_attention_2"
    assert attention_implementation("sdpa", CPU) == "sdpa"


def test_synthetic_vocab_smaller_than_tokenizer_is_refused() -> None:
    shape = preset_shape("llama", "tiny").model_copy(update={"vocab_size": 1000})
    spec = ModelSpec(name="small-vocab", arch="llama", source={"synthetic": shape.model_dump()})
    with pytest.raises(SpecMismatchError, match="vocab_size"):
        load_model(spec, FLOAT32_CPU, CPU)
