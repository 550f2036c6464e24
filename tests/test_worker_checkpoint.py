"""Real-checkpoint loading: both naming schemes round-trip onto LlamaForCausalLM and match plain-torch forwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from specs.schema import Controls, ModelSpec
from tests.worker_fixtures import (
    TINY,
    llada_reference_logits,
    llama_reference_logits,
    one_thread,
    write_llada_checkpoint,
    write_sharded,
)
from workers.errors import CheckpointFormatError, ModelNotAvailableError
from workers.models.checkpoint import resolve_checkpoint
from workers.models.llada_checkpoint import llada_to_llama_name, llama_config_from_llada
from workers.models.llada_model import is_bidirectional
from workers.models.loading import load_model
from workers.models.tokenization import synthetic_tokenizer

CPU = torch.device("cpu")
pytestmark = pytest.mark.usefixtures("one_thread")


def _controls(dtype: str = "float32", attention: str = "sdpa") -> Controls:
    return Controls(dtype=dtype, attention=attention, device="cpu")


def _llada_spec(directory: Path, **source: object) -> ModelSpec:
    return ModelSpec(name="llada-ckpt", arch="llada", source={"checkpoint": str(directory), **source})


@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    directory = tmp_path_factory.mktemp("llada")
    return directory, write_llada_checkpoint(directory, seed=3, shards=3, dtype=torch.bfloat16)


def _ids(seed: int = 0, batch: int = 2, seq: int = 12) -> torch.Tensor:
    return torch.randint(0, 30000, (batch, seq), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- LLaDA's own naming


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_llada_checkpoint_matches_official_forward_in_float32(llada_dir: tuple[Path, dict], attention: str) -> None:
    directory, written = llada_dir
    loaded = load_model(_llada_spec(directory), _controls("float32", attention), CPU)
    ids = _ids()
    with torch.inference_mode():
        ours = loaded.model(ids, use_cache=False).logits
    reference = llada_reference_logits({k: v.float() for k, v in written["tensors"].items()}, written["config"], ids)
    torch.testing.assert_close(ours, reference, rtol=1e-4, atol=1e-4)
    assert loaded.weights == "real" and is_bidirectional(loaded.model)
    assert loaded.model.config.is_causal is False


def test_llada_checkpoint_in_bf16_keeps_rope_in_float32(llada_dir: tuple[Path, dict]) -> None:
    """The official code rotates q/k in float32 whatever the dtype; doing it in bf16 moves the logits."""
    directory, written = llada_dir
    loaded = load_model(_llada_spec(directory), _controls("bfloat16"), CPU)
    ids = _ids(seq=64)
    with torch.inference_mode():
        ours = loaded.model(ids, use_cache=False).logits.float()
        official = llada_reference_logits(written["tensors"], written["config"], ids, rope_fp32=True).float()
        bf16_rope = llada_reference_logits(written["tensors"], written["config"], ids, rope_fp32=False).float()
    ours_error = (ours - official).abs().max().item()
    bf16_error = (bf16_rope - official).abs().max().item()
    assert loaded.model.dtype == torch.bfloat16
    assert ours_error <= 0.25 * bf16_error, (ours_error, bf16_error)


def test_llada_special_ids_come_from_config_and_tokenizer(llada_dir: tuple[Path, dict]) -> None:
    directory, written = llada_dir
    loaded = load_model(_llada_spec(directory), _controls(), CPU)
    ids = written["ids"]
    assert loaded.mask_token_id == ids["<|mdm_mask|>"]
    assert ids["<|endoftext|>"] in loaded.eos_token_ids  # config.json eos_token_id
    assert ids["<|eot_id|>"] in loaded.eos_token_ids  # the tokenizer's turn end
    assert loaded.mask_token_id not in loaded.eos_token_ids
    override = load_model(_llada_spec(directory).model_copy(update={"mask_token_id": 5}), _controls(), CPU)
    assert override.mask_token_id == 5


def test_llada_names_map_ff_proj_to_the_gated_projection() -> None:
    """Official LLaDALlamaBlock: act(ff_proj(x)) * up_proj(x), then ff_out; so ff_proj is gate_proj."""
    block = "model.transformer.blocks.7."
    assert llada_to_llama_name(block + "ff_proj.weight") == "model.layers.7.mlp.gate_proj.weight"
    assert llada_to_llama_name(block + "up_proj.weight") == "model.layers.7.mlp.up_proj.weight"
    assert llada_to_llama_name(block + "ff_out.weight") == "model.layers.7.mlp.down_proj.weight"
    assert llada_to_llama_name(block + "attn_out.weight") == "model.layers.7.self_attn.o_proj.weight"
    assert llada_to_llama_name(block + "attn_norm.weight") == "model.layers.7.input_layernorm.weight"
    assert llada_to_llama_name(block + "ff_norm.weight") == "model.layers.7.post_attention_layernorm.weight"
    assert llada_to_llama_name("model.transformer.ff_out.weight") == "lm_head.weight"
    assert llada_to_llama_name("model.transformer.wte.weight") == "model.embed_tokens.weight"
    with pytest.raises(CheckpointFormatError, match="att_proj"):
        llada_to_llama_name(block + "att_proj.weight")


def test_swapping_gate_and_up_would_be_caught(llada_dir: tuple[Path, dict]) -> None:
    """The reference comparison is sensitive to the mapping: a swapped MLP gives other logits."""
    _, written = llada_dir
    tensors = {k: v.float() for k, v in written["tensors"].items()}
    swapped = dict(tensors)
    for i in range(TINY["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        swapped[p + "ff_proj.weight"], swapped[p + "up_proj.weight"] = tensors[p + "up_proj.weight"], tensors[p + "ff_proj.weight"]
    ids = _ids()
    a = llada_reference_logits(tensors, written["config"], ids)
    b = llada_reference_logits(swapped, written["config"], ids)
    assert (a - b).abs().max() > 1e-3


def test_llada_8b_config_maps_to_the_published_shape() -> None:
    config = {
        "model_type": "llada", "d_model": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 32,
        "mlp_hidden_size": 12288, "vocab_size": 126464, "embedding_size": 126464, "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5, "weight_tying": False, "max_sequence_length": 4096, "mask_token_id": 126336,
        "eos_token_id": 126081, "block_type": "llama", "activation_type": "silu", "layer_norm_type": "rms",
    }  # fmt: skip
    llama = llama_config_from_llada(config)
    assert (llama.hidden_size, llama.num_hidden_layers, llama.num_attention_heads, llama.num_key_value_heads) == (4096, 32, 32, 32)
    assert (llama.intermediate_size, llama.vocab_size, llama.rms_norm_eps) == (12288, 126464, 1e-5)
    assert llama.rope_parameters["rope_theta"] == 500000.0 and not llama.tie_word_embeddings
    assert llama.is_causal is False and llama.use_cache is False


def test_llada_config_that_does_not_map_is_refused() -> None:
    config = {"model_type": "llada", "d_model": 8, "n_layers": 1, "n_heads": 2, "vocab_size": 10, "include_bias": True}
    with pytest.raises(CheckpointFormatError, match="include_bias"):
        llama_config_from_llada(config)


def test_missing_shard_is_named(tmp_path: Path) -> None:
    write_llada_checkpoint(tmp_path, shards=2)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointFormatError, match="model-00002-of-00002"):
        load_model(_llada_spec(tmp_path), _controls(), CPU)


def test_checkpoint_lacking_a_tensor_is_refused(tmp_path: Path) -> None:
    written = write_llada_checkpoint(tmp_path, shards=1, dtype=torch.float32)
    tensors = dict(written["tensors"])
    del tensors["model.transformer.blocks.1.up_proj.weight"]
    for f in tmp_path.glob("model-*.safetensors"):
        f.unlink()
    write_sharded(tmp_path, tensors, 1, torch.float32)
    with pytest.raises(CheckpointFormatError, match=r"lacks model\.layers\.1\.mlp\.up_proj\.weight"):
        load_model(_llada_spec(tmp_path), _controls(), CPU)


# ---------------------------------------------------------------- transformers' naming (LLaMA)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    directory = tmp_path_factory.mktemp("llama")
    shape = dict(TINY, n_kv_heads=2)
    config = LlamaConfig(
        vocab_size=shape["vocab"], hidden_size=shape["d_model"], intermediate_size=shape["mlp_hidden_size"],
        num_hidden_layers=shape["n_layers"], num_attention_heads=shape["n_heads"], num_key_value_heads=shape["n_kv_heads"],
        rms_norm_eps=shape["eps"], rope_parameters={"rope_type": "default", "rope_theta": shape["rope_theta"]},
        max_position_embeddings=256, tie_word_embeddings=False, eos_token_id=102,
    )  # fmt: skip
    torch.manual_seed(11)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)  # norms away from one, so a swapped norm would show
    model.save_pretrained(str(directory), max_shard_size="100KB")  # sharded, with an index
    synthetic_tokenizer().save_pretrained(str(directory))
    tensors = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return directory, {"tensors": tensors, "shape": shape}


def test_llama_checkpoint_matches_plain_forward(llama_dir: tuple[Path, dict]) -> None:
    directory, written = llama_dir
    assert (directory / "model.safetensors.index.json").is_file()
    spec = ModelSpec(name="llama-ckpt", arch="llama", source={"checkpoint": str(directory)})
    loaded = load_model(spec, _controls(), CPU)
    ids = _ids()
    with torch.inference_mode():
        ours = loaded.model(ids).logits
    reference = llama_reference_logits(written["tensors"], written["shape"], ids)
    torch.testing.assert_close(ours, reference, rtol=1e-4, atol=1e-4)
    assert not is_bidirectional(loaded.model)
    assert loaded.mask_token_id is None and 102 in loaded.eos_token_ids
    assert loaded.weights_bytes == sum(t.numel() * 4 for t in written["tensors"].values())


def test_llada_in_transformers_naming_loads_bidirectional(llama_dir: tuple[Path, dict]) -> None:
    """A LLaDA converted to Llama naming still runs bidirectionally (arch decides, not the file format)."""
    directory, _ = llama_dir
    spec = ModelSpec(name="llada-hf", arch="llada", source={"checkpoint": str(directory)}, mask_token_id=103)
    loaded = load_model(spec, _controls(), CPU)
    assert is_bidirectional(loaded.model) and loaded.mask_token_id == 103


# ---------------------------------------------------------------- resolution


def test_missing_hub_model_offline_names_id_and_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelNotAvailableError) as raised:
        resolve_checkpoint("GSAI-ML/LLaDA-8B-Instruct")
    message = str(raised.value)
    assert "GSAI-ML/LLaDA-8B-Instruct" in message and "hf download GSAI-ML/LLaDA-8B-Instruct" in message


def test_missing_local_directory_is_named() -> None:
    with pytest.raises(ModelNotAvailableError, match="no such directory"):
        resolve_checkpoint("./no/such/checkpoint")


def test_a_symlink_loop_is_named_as_one_even_where_a_hub_id_could_be(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("loop").symlink_to("loop")
    with pytest.raises(ModelNotAvailableError, match=r"'loop' is a symlink loop \(following it leads back to itself\)"):
        resolve_checkpoint("loop")


def test_bin_only_checkpoint_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    synthetic_tokenizer().save_pretrained(str(tmp_path))
    spec = ModelSpec(name="bin", arch="llama", source={"checkpoint": str(tmp_path)})
    with pytest.raises(CheckpointFormatError, match="safetensors"):
        load_model(spec, _controls(), CPU)


# ---------------------------------------------------------------- remote code


def test_remote_code_runs_only_when_the_spec_opts_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_llada_checkpoint(tmp_path, shards=1)
    marker = tmp_path / "remote-code-ran"
    ran = f"open({str(marker)!r}, 'w').write('ran')\n"
    (tmp_path / "modeling_llada.py").write_text(ran)
    (tmp_path / "configuration_llada.py").write_text(
        "from transformers import PreTrainedConfig\n" + ran
        + "class LLaDAConfig(PreTrainedConfig):\n    model_type = 'llada'\n"
    )  # fmt: skip
    loaded = load_model(_llada_spec(tmp_path), _controls(), CPU)
    assert not marker.exists() and is_bidirectional(loaded.model)

    calls: list[dict] = []

    def fake_from_pretrained(path: str, **kwargs: object) -> LlamaForCausalLM:
        calls.append({"path": path, **kwargs})
        return loaded.model

    monkeypatch.setattr("workers.models.loading.AutoModelForCausalLM.from_pretrained", fake_from_pretrained)
    # LLaDA's own code cannot serve the sampler (no logits_to_keep, no bidirectional config): refused at load.
    with pytest.raises(ValueError, match="trust_remote_code: not supported for llada models"):
        _llada_spec(tmp_path, trust_remote_code=True)
    # A causal model may opt in; then, and only then, the checkpoint's code runs.
    spec = ModelSpec(name="remote", arch="llama", source={"checkpoint": str(tmp_path), "trust_remote_code": True})
    remote = load_model(spec, _controls(), CPU)
    assert calls and calls[0]["trust_remote_code"] is True and calls[0]["path"] == str(tmp_path)
    assert marker.exists()  # the opt-in really runs the checkpoint's code (here through its config)
    assert remote.weights == "real" and remote.mask_token_id is None
