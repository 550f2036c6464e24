"""The packaged judge's conversion and cache, on a tiny GGUF written here as llama.cpp writes one: the converted
checkpoint is the original model (query/key rows put back), and a corrupted cache is detected and rebuilt, never
loaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from workers.quality import judge
from workers.quality.judge import MANIFEST, cache_problems, ensure_judge
from workers.quality.judge_gguf import convert

gguf = pytest.importorskip("gguf")

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf row order for a query or key projection (rotary pairs interleaved)."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(
        weights.shape)


def _tokens() -> list[str]:
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    return SPECIAL + alphabet + [m.replace(" ", "") for m in MERGES]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LlamaForCausalLM]:
    """A tiny random LLaMA (4 query heads, 2 KV heads, tied embeddings) and its GGUF file."""
    tokens = _tokens()
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2, pad_token_id=2)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # norms away from one, so a misplaced tensor would show
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(48)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for name, tensor in model.state_dict().items():
        array = tensor.numpy().astype(np.float32)
        if name == "lm_head.weight":
            continue  # tied: llama.cpp writes no output.weight
        if name == "model.embed_tokens.weight":
            writer.add_tensor("token_embd.weight", array)
        elif name == "model.norm.weight":
            writer.add_tensor("output_norm.weight", array)
        else:
            _, _, layer, *module, _ = name.split(".")
            kind = names[".".join(module)]
            if kind == "attn_q":
                array = _permute(array, 4)
            elif kind == "attn_k":
                array = _permute(array, 2)
            writer.add_tensor(f"blk.{layer}.{kind}.weight", array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, model


def test_the_converted_checkpoint_is_the_original_model(tiny, tmp_path: Path) -> None:
    path, original = tiny
    convert(path, tmp_path)
    loaded = LlamaForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    for name, tensor in original.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    ids = torch.tensor([[5, 70, 80, 90, 7]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, original(ids).logits)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert tokenizer.convert_ids_to_tokens(tokenizer(" the 12")["input_ids"]) == ["Ġthe", "Ġ", "1", "2"]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.decode(tokenizer(" the x")["input_ids"]) == " the x"


def test_a_corrupted_cache_is_detected_and_rebuilt_never_used(tiny, tmp_path: Path, monkeypatch) -> None:
    path, _ = tiny
    monkeypatch.setattr(judge, "GGUF_SHA256", judge.sha256_of(path))  # the tiny file stands in for the pinned one
    folder = ensure_judge(tmp_path, gguf=path)
    assert cache_problems(folder) == []
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    converted = []
    real_convert = judge.write_cache

    def counting(source: Path, target: Path) -> None:
        converted.append(target)
        real_convert(source, target)

    monkeypatch.setattr(judge, "write_cache", counting)
    assert ensure_judge(tmp_path, gguf=path) == folder and converted == []  # a verified cache is reused as is

    corrupted = bytearray(good)
    corrupted[len(corrupted) // 2] ^= 0xFF
    weights.write_bytes(bytes(corrupted))
    assert cache_problems(folder) == ["model.safetensors: checksum differs"]
    assert ensure_judge(tmp_path, gguf=path) == folder and len(converted) == 1
    assert weights.read_bytes() == good and cache_problems(folder) == []

    (folder / "tokenizer.json").unlink()
    assert cache_problems(folder) == ["tokenizer.json: missing"]
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "converter": -1}))
    assert "another source or converter" in cache_problems(folder)[0]
    ensure_judge(tmp_path, gguf=path)
    assert len(converted) == 2 and cache_problems(folder) == []
    assert not list(tmp_path.glob(".converting-*")) and not list(tmp_path.glob(".old-*"))
