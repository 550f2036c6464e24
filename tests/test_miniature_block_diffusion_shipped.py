"""The shipped block-diffusion member: Fast-dLLM v2's folder format, small, read back as transformers' Qwen2,
and, read block by block, a model of held-out text beyond its token frequencies."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import PreTrainedTokenizerFast

from miniature.block_diffusion_export import load_as_qwen2
from miniature.block_diffusion_train import ARCH, heldout_bound
from specs.results import UNIGRAM_MARGIN_NATS
from workers.models.loading import read_provenance

ROOT = Path(__file__).resolve().parents[1]
MEMBER = ROOT / "models" / "miniature" / ARCH
MAX_BYTES = 20 * 2**20


def test_it_is_the_official_format_in_bf16_under_20_mb() -> None:
    config = json.loads((MEMBER / "config.json").read_text())
    assert config["model_type"] == "Fast_dLLM_Qwen" and config["bd_size"] == 32
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(MEMBER))
    assert config["mask_token_id"] == tokenizer.convert_tokens_to_ids("<|mdm_mask|>")
    assert config["eos_token_id"] == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    weights = MEMBER / "model.safetensors"
    assert weights.stat().st_size < MAX_BYTES
    with safe_open(str(weights), "pt") as reader:
        assert {reader.get_tensor(name).dtype for name in reader.keys()} == {torch.bfloat16}
        bias = reader.get_tensor("model.layers.0.self_attn.q_proj.bias")
    assert float(bias.abs().max()) > 0  # started at zero, trained


def test_its_block_diffusion_bound_on_the_held_out_prompts_is_beyond_token_frequencies() -> None:
    """The evaluation prompts come from pages left out of training (specs/data/README.md)."""
    provenance = read_provenance(MEMBER)
    assert provenance is not None and provenance.arch == ARCH and provenance.learned_beyond_unigram
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(MEMBER))
    passages = (ROOT / "specs" / "data" / "prompts.txt").read_text(encoding="utf-8").split("\n\n")[:8]
    ids = torch.tensor(tokenizer(passages[0] + "".join(" " + p for p in passages[1:]))["input_ids"])
    windows = ids[: ids.numel() // 128 * 128].view(-1, 128)[:8]  # [8, 128]
    bound = heldout_bound(load_as_qwen2(MEMBER), windows, 32, tokenizer.convert_tokens_to_ids("<|mdm_mask|>"))
    assert bound < provenance.unigram_entropy_nats - UNIGRAM_MARGIN_NATS, bound
