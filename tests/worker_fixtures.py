"""Helpers for the worker tests: tiny run configs, tiny checkpoints in both naming schemes, and plain-torch
reference forwards of LLaMA (causal) and LLaDA (bidirectional) written from the papers and the official
LLaDA modeling file, independently of transformers."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig

from specs.schema import Controls, DreamSampling, ModelSpec, Prompts, QualitySpec, RunConfig
from workers.hardware import THREADS_ENV
from workers.models.llada_checkpoint import official_llada_config
from workers.models.tokenization import synthetic_tokenizer

# A shape small enough for milliseconds, with a vocab that covers the BERT tokenizer plus the LLaDA
# special tokens the tests add (<|mdm_mask|>, <|eot_id|>, <|endoftext|>).
TINY = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=4, mlp_hidden_size=48, vocab=30528, rope_theta=500000.0, eps=1e-5)
LLADA_SPECIAL_TOKENS = ["<|mdm_mask|>", "<|eot_id|>", "<|endoftext|>"]


def run_config(arch: str = "llama", **overrides: Any) -> RunConfig:
    """A smoke-sized RunConfig (tiny synthetic model, CPU, float32, quality off)."""
    model = overrides.pop("model", None) or ModelSpec(name=f"{arch}-tiny", arch=arch, source={"synthetic": "tiny"})
    controls = overrides.pop("controls", None) or Controls(dtype="float32", device="cpu", warmup=1, repetitions=2)
    values: dict[str, Any] = dict(
        model=model,
        batch_size=2,
        prompt_length=16,
        generation_length=16,
        controls=controls,
        prompts=Prompts(dataset="specs/data/prompts.txt", count=4),
        prompt_ids=[0, 1, 2, 3],
        quality=QualitySpec(),
    )
    if arch == "llada":
        values.update(steps=8, block_length=8, remasking="low_confidence")
    if arch == "dream":
        values.update(steps=8, dream=DreamSampling())
    values.update(overrides)
    return RunConfig(**values)


# ---------------------------------------------------------------- tiny checkpoints


def random_llada_tensors(seed: int = 0, shape: dict[str, Any] = TINY) -> dict[str, torch.Tensor]:
    """Weights in LLaDA's own naming (model.transformer.*), float32, norms away from one."""
    g = torch.Generator().manual_seed(seed)
    d, f, v = shape["d_model"], shape["mlp_hidden_size"], shape["vocab"]
    kv = shape["n_kv_heads"] * (d // shape["n_heads"])

    def w(*size: int, std: float = 0.08) -> torch.Tensor:
        return torch.randn(*size, generator=g) * std

    t = {"model.transformer.wte.weight": w(v, d, std=0.5), "model.transformer.ln_f.weight": 1 + w(d, std=0.2),
         "model.transformer.ff_out.weight": w(v, d)}
    for i in range(shape["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        t.update({
            p + "attn_norm.weight": 1 + w(d, std=0.2), p + "ff_norm.weight": 1 + w(d, std=0.2),
            p + "q_proj.weight": w(d, d), p + "k_proj.weight": w(kv, d), p + "v_proj.weight": w(kv, d),
            p + "attn_out.weight": w(d, d), p + "ff_proj.weight": w(f, d), p + "up_proj.weight": w(f, d),
            p + "ff_out.weight": w(d, f),
        })  # fmt: skip
    return t


def llada_config_json(shape: dict[str, Any] = TINY, mask_token_id: int | None = None, eos_token_id: int | None = None) -> dict[str, Any]:
    """config.json as LLaDA-8B ships it (same keys), with the tiny numbers."""
    config = LlamaConfig(
        vocab_size=shape["vocab"], hidden_size=shape["d_model"], intermediate_size=shape["mlp_hidden_size"],
        num_hidden_layers=shape["n_layers"], num_attention_heads=shape["n_heads"], num_key_value_heads=shape["n_kv_heads"],
        rms_norm_eps=shape["eps"], rope_parameters={"rope_type": "default", "rope_theta": shape["rope_theta"]},
        max_position_embeddings=4096, tie_word_embeddings=False,
    )
    return official_llada_config(config, mask_token_id=mask_token_id, eos_token_id=eos_token_id)


def save_llada_tokenizer(directory: Path) -> dict[str, int]:
    """The BERT tokenizer plus LLaDA's special tokens, saved as the checkpoint's own; returns their ids."""
    tokenizer = synthetic_tokenizer()
    tokenizer = type(tokenizer).from_pretrained(tokenizer.name_or_path)  # a private copy to extend
    tokenizer.add_special_tokens({"additional_special_tokens": LLADA_SPECIAL_TOKENS})
    tokenizer.save_pretrained(str(directory))
    return {name: tokenizer.convert_tokens_to_ids(name) for name in LLADA_SPECIAL_TOKENS}


def write_sharded(directory: Path, tensors: dict[str, torch.Tensor], shards: int, dtype: torch.dtype) -> None:
    """Safetensors shards plus model.safetensors.index.json, the layout of the real 8B checkpoints."""
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted(tensors)
    per = math.ceil(len(names) / shards)
    weight_map = {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        chunk = {n: tensors[n].to(dtype).contiguous() for n in names[k * per : (k + 1) * per]}
        save_file(chunk, str(directory / file), metadata={"format": "pt"})
        weight_map.update({n: file for n in chunk})
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))


def write_llada_checkpoint(directory: Path, seed: int = 0, shards: int = 3, dtype: torch.dtype = torch.bfloat16) -> dict[str, Any]:
    """A tiny LLaDA checkpoint in its own naming, sharded with an index, stored in `dtype`."""
    ids = save_llada_tokenizer(directory)
    tensors = random_llada_tensors(seed)
    write_sharded(directory, tensors, shards, dtype)
    config = llada_config_json(mask_token_id=ids["<|mdm_mask|>"], eos_token_id=ids["<|endoftext|>"])
    (directory / "config.json").write_text(json.dumps(config))
    return {"tensors": {k: v.to(dtype) for k, v in tensors.items()}, "ids": ids, "config": config}


# ---------------------------------------------------------------- reference forwards (plain torch)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as LLaDA's RMSLayerNorm and LLaMA compute it: statistics in float32, gain in the input dtype."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def _rope(t: torch.Tensor, theta: float, fp32: bool) -> torch.Tensor:
    """Rotary embedding over halves of the head dim (RoFormer; LLaDA's RotaryEmbedding.rotate_half)."""
    _, _, seq, dim = t.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    freqs = torch.einsum("i,j->ij", torch.arange(seq, dtype=torch.float), inv_freq)
    angles = torch.cat((freqs, freqs), dim=-1)[None, None]  # [1, 1, S, D]
    x = t.float() if fp32 else t
    sin, cos = angles.sin().to(x.dtype), angles.cos().to(x.dtype)
    x1, x2 = x[..., : dim // 2], x[..., dim // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    return (x * cos + rotated * sin).to(t.dtype)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def llada_reference_logits(tensors: dict[str, torch.Tensor], config: dict[str, Any], ids: torch.Tensor, rope_fp32: bool = True) -> torch.Tensor:
    """LLaDA's forward read off the official modeling file (LLaDALlamaBlock), on weights in its own naming."""
    t = {k.removeprefix("model.transformer."): v for k, v in tensors.items()}
    d, heads, kv_heads = config["d_model"], config["n_heads"], config["n_kv_heads"]
    eps, theta = config["rms_norm_eps"], config["rope_theta"]
    hd = d // heads
    x = F.embedding(ids, t["wte.weight"])
    batch, seq = ids.shape
    for i in range(config["n_layers"]):
        p = f"blocks.{i}."
        h = _rms_norm(x, t[p + "attn_norm.weight"], eps)
        q = (h @ t[p + "q_proj.weight"].T).view(batch, seq, heads, hd).transpose(1, 2)
        k = (h @ t[p + "k_proj.weight"].T).view(batch, seq, kv_heads, hd).transpose(1, 2)
        v = (h @ t[p + "v_proj.weight"].T).view(batch, seq, kv_heads, hd).transpose(1, 2)
        q, k = _rope(q, theta, rope_fp32), _rope(k, theta, rope_fp32)
        att = _attention(q, k, v, causal=False).transpose(1, 2).reshape(batch, seq, d)
        x = x + att @ t[p + "attn_out.weight"].T
        h = _rms_norm(x, t[p + "ff_norm.weight"], eps)
        gated, up = h @ t[p + "ff_proj.weight"].T, h @ t[p + "up_proj.weight"].T
        x = x + (F.silu(gated) * up) @ t[p + "ff_out.weight"].T
    x = _rms_norm(x, t["ln_f.weight"], eps)
    return x @ t["ff_out.weight"].T


def llama_reference_logits(tensors: dict[str, torch.Tensor], shape: dict[str, Any], ids: torch.Tensor) -> torch.Tensor:
    """Causal LLaMA (Touvron et al. 2023) on weights in transformers' naming, GQA included."""
    t = tensors
    d, heads, kv_heads = shape["d_model"], shape["n_heads"], shape["n_kv_heads"]
    hd = d // heads
    batch, seq = ids.shape
    x = F.embedding(ids, t["model.embed_tokens.weight"])
    for i in range(shape["n_layers"]):
        p = f"model.layers.{i}."
        h = _rms_norm(x, t[p + "input_layernorm.weight"], shape["eps"])
        q = (h @ t[p + "self_attn.q_proj.weight"].T).view(batch, seq, heads, hd).transpose(1, 2)
        k = (h @ t[p + "self_attn.k_proj.weight"].T).view(batch, seq, kv_heads, hd).transpose(1, 2)
        v = (h @ t[p + "self_attn.v_proj.weight"].T).view(batch, seq, kv_heads, hd).transpose(1, 2)
        q, k = _rope(q, shape["rope_theta"], True), _rope(k, shape["rope_theta"], True)
        att = _attention(q, k, v, causal=True).transpose(1, 2).reshape(batch, seq, d)
        x = x + att @ t[p + "self_attn.o_proj.weight"].T
        h = _rms_norm(x, t[p + "post_attention_layernorm.weight"], shape["eps"])
        x = x + (F.silu(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
    x = _rms_norm(x, t["model.norm.weight"], shape["eps"])
    return x @ t["lm_head.weight"].T


@pytest.fixture()
def one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run tiny models on one thread: op overheads dominate them, and on a shared 2-core machine a second
    OpenMP thread spin-waits on a busy core (5x slower). Restores the thread count afterwards."""
    before = torch.get_num_threads()
    monkeypatch.setenv(THREADS_ENV, "1")
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
