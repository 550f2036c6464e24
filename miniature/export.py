"""Write a trained member as a checkpoint the benchmark loads like a published one.

The AR model is saved in transformers' Llama format (config.json with model_type llama, model.safetensors).
The LLaDA model is saved in the official LLaDA-8B on-disk format: config.json with `model_type: llada` and
LLaDA's own field names, parameters named `model.transformer.blocks.{i}...`, so every default sweep reads it
through the same loader that reads GSAI-ML/LLaDA-8B. Both are stored in bfloat16 with the shared tokenizer,
the training log and a SHA256SUMS file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

from workers.models.llada_checkpoint import llama_to_llada_name, official_llada_config

TRAINING_LOG_FILE = "training_log.json"
CHECKSUMS_FILE = "SHA256SUMS"
STORED_DTYPE = torch.bfloat16


def _bf16_state(model: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().to(STORED_DTYPE).contiguous() for name, tensor in model.state_dict().items()
            if "rotary_emb" not in name}


def save_llama(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
    """transformers' Llama layout: its own config.json and parameter names."""
    directory.mkdir(parents=True, exist_ok=True)
    config = model.config.to_dict()
    config.update({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16", "dtype": "bfloat16"})
    config.pop("_attn_implementation_autoset", None)
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    save_file(_bf16_state(model), str(directory / "model.safetensors"), metadata={"format": "pt"})
    _readable(directory / "model.safetensors")
    tokenizer.save_pretrained(str(directory))


def save_llada(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerBase, directory: Path, mask_token_id: int, eos_token_id: int) -> None:
    """LLaDA-8B's own layout: OLMo-style names and config keys."""
    directory.mkdir(parents=True, exist_ok=True)
    config = official_llada_config(model.config, mask_token_id=mask_token_id, eos_token_id=eos_token_id)
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tensors = {llama_to_llada_name(name): tensor for name, tensor in _bf16_state(model).items()}
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    _readable(directory / "model.safetensors")
    tokenizer.save_pretrained(str(directory))


def _readable(path: Path) -> None:
    """safetensors creates files 0600; a shipped checkpoint is read by other users of a shared filesystem."""
    path.chmod(0o644)


def write_training_log(directory: Path, log: dict) -> None:
    (directory / TRAINING_LOG_FILE).write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")


def write_checksums(directory: Path) -> dict[str, str]:
    """SHA256SUMS over every file below `directory` (sha256sum -c format), itself excluded."""
    sums = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != CHECKSUMS_FILE):
        sums[path.relative_to(directory).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    lines = [f"{digest}  {name}" for name, digest in sums.items()]
    (directory / CHECKSUMS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sums


def verify_checksums(directory: Path) -> list[str]:
    """Files whose sha256 no longer matches SHA256SUMS, or that it names but are missing."""
    listed = directory / CHECKSUMS_FILE
    if not listed.is_file():
        return [f"{listed}: missing"]
    problems = []
    for line in listed.read_text(encoding="utf-8").splitlines():
        digest, name = line.split(maxsplit=1)
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name}: checksum differs")
    return problems
