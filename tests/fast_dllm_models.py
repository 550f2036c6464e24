"""The tiny Fast-dLLM-format checkpoint loaded the project's way, and the golden outputs of the official `generate`.

Loading goes through exactly what a run uses: config.json mapped to a Qwen2Config, the model made bidirectional,
the safetensors streamed in under their own (Qwen2) names. No remote code is involved.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2ForCausalLM

from tests.fast_dllm_golden.tiny_checkpoint import write_tiny_fast_dllm_checkpoint
from workers.models.checkpoint import load_safetensors_into, read_config
from workers.models.dream_model import make_dream_bidirectional
from workers.models.fast_dllm_checkpoint import qwen2_config_from_fast_dllm
from workers.models.layouts import keep_name
from workers.samplers.block_diffusion.sampler import BlockDiffusionSampler, block_diffusion_steps

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "fast_dllm_golden"


@cache
def golden() -> dict:
    """golden.json: the official `generate` cases (tests/fast_dllm_golden/cases.py), their tokens and forwards."""
    return json.loads((GOLDEN_DIR / "golden.json").read_text())


def load_fast_dllm(directory: Path, attention: str = "sdpa") -> Qwen2ForCausalLM:
    """A Fast-dLLM v2 checkpoint as a bidirectional Qwen2ForCausalLM, float32 on the CPU."""
    config = qwen2_config_from_fast_dllm(read_config(directory))
    config._attn_implementation = attention
    model = Qwen2ForCausalLM(config)
    make_dream_bidirectional(model)
    load_safetensors_into(model, directory, torch.device("cpu"), keep_name)
    return model.eval()


def golden_checkpoint(directory: Path) -> Path:
    """The checkpoint the golden data was recorded on (its recorded seed)."""
    return write_tiny_fast_dllm_checkpoint(directory, seed=golden()["checkpoint"]["seed"])


def settings(case: dict[str, Any]) -> dict[str, Any]:
    """A golden case's official kwargs as the sampler's arguments, its generator seeded as the official global RNG."""
    k = case["kwargs"]
    return {
        "max_new_tokens": k["max_new_tokens"], "block_length": k["block_size"], "sub_block_length": k["small_block_size"],
        "mask_id": k["mask_id"], "threshold": k["threshold"], "stop_token_id": k["stop_token"],
        "temperature": k["temperature"], "top_p": k["top_p"], "sub_block_cache": k["use_block_cache"],
        "generator": torch.Generator().manual_seed(case["seed"]),
    }  # fmt: skip


def run_golden_case(model: torch.nn.Module, case: dict[str, Any], **overrides: Any) -> BlockDiffusionSampler:
    """The sampler run to its end on a golden case's prompt and settings (`overrides` replace some)."""
    sampler = block_diffusion_steps(model, torch.tensor(case["input_ids"]), **(settings(case) | overrides))
    for _ in sampler:
        pass
    return sampler
