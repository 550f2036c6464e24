"""The tiny Dream-format checkpoint loaded the project's way, and the golden outputs of Dream's official code.

Loading goes through exactly what a run uses: config.json mapped to a Qwen2Config, the model made Dream's
mask predictor, the safetensors streamed in with Dream's key mapping. No remote code is involved.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import torch
from transformers import Qwen2ForCausalLM

from tests.dream_golden.tiny_checkpoint import write_tiny_dream_checkpoint
from workers.models.checkpoint import load_safetensors_into, read_config
from workers.models.dream_checkpoint import dream_to_qwen2_name, qwen2_config_from_dream
from workers.models.dream_model import make_dream_bidirectional

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "dream_golden"


@cache
def golden() -> dict:
    """golden.json: the official `diffusion_generate` cases and the official forward's logits cases."""
    return json.loads((GOLDEN_DIR / "golden.json").read_text())


def load_dream(directory: Path, *, bidirectional: bool = True) -> Qwen2ForCausalLM:
    """A Dream checkpoint as Qwen2ForCausalLM, float32 on the CPU, sdpa attention (the official kernel).
    `bidirectional=False` leaves Qwen2's causal attention: the tests' proof that a wrong model is caught."""
    config = qwen2_config_from_dream(read_config(directory))
    config._attn_implementation = "sdpa"
    model = Qwen2ForCausalLM(config)
    if bidirectional:
        make_dream_bidirectional(model)
    load_safetensors_into(model, directory, torch.device("cpu"), dream_to_qwen2_name)
    return model.eval()


def golden_checkpoint(directory: Path) -> Path:
    """The checkpoint the golden data was recorded on (its recorded seed)."""
    return write_tiny_dream_checkpoint(directory, seed=golden()["checkpoint"]["seed"])
