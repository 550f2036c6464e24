"""Find a checkpoint's files (local directory or the HF cache) and stream its safetensors onto a model.

One loader serves both architectures: the model is built on the meta device, given uninitialised storage
on the target device, and every tensor of every shard is read straight to that device and copied into the
parameter its (possibly renamed) key names. Peak memory is the weights plus one tensor, never a host copy
of the whole model, and no `accelerate` or remote code is needed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import PreTrainedTokenizerBase

from specs.controls import PACKAGED_SMOLLM2
from specs.paths import broken_link, resolve_path
from workers.errors import CheckpointFormatError, ModelNotAvailableError

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
# What a run needs from a hub repo: config, weights, tokenizer; modeling code only when remote code is allowed.
HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.tiktoken", "*.txt"]
REMOTE_CODE_PATTERNS = ["*.py"]

Rename = Callable[[str], "str | None"]  # checkpoint key -> model parameter name (None: not a weight)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _looks_local(checkpoint: str) -> bool:
    return checkpoint.startswith(("/", "./", "../", "~")) or checkpoint.count("/") > 1


def resolve_checkpoint(checkpoint: str, revision: str | None = None, trust_remote_code: bool = False) -> Path:
    """A local directory as given, the packaged judge's converted cache, else the hub id's snapshot in the HF
    cache (downloading unless offline)."""
    if checkpoint == PACKAGED_SMOLLM2:
        from workers.quality.judge import ensure_judge

        return ensure_judge()
    local = resolve_path(Path(checkpoint).expanduser())
    if local.is_dir():
        return local
    broken = broken_link(local)
    if broken:
        raise ModelNotAvailableError(f"checkpoint {checkpoint!r} {broken}; point it at the checkpoint's directory")
    if _looks_local(checkpoint):
        raise ModelNotAvailableError(f"checkpoint {checkpoint!r}: no such directory")
    from huggingface_hub import snapshot_download

    patterns = HUB_PATTERNS + (REMOTE_CODE_PATTERNS if trust_remote_code else [])
    command = f"hf download {checkpoint}" + (f" --revision {revision}" if revision else "")
    try:
        return Path(snapshot_download(checkpoint, revision=revision, local_files_only=True, allow_patterns=patterns))
    except FileNotFoundError:  # LocalEntryNotFoundError: not in the cache
        if _offline():
            raise ModelNotAvailableError(
                f"model {checkpoint!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids "
                f"downloading it; download it first with: {command}"
            ) from None
    try:
        return Path(snapshot_download(checkpoint, revision=revision, allow_patterns=patterns))
    except Exception as exc:  # network, gated repo, unknown id: huggingface_hub raises many types
        raise ModelNotAvailableError(
            f"model {checkpoint!r} could not be downloaded ({exc.__class__.__name__}: {exc}); "
            f"download it with: {command} (gated models need `hf auth login` first)"
        ) from exc


def read_config(directory: Path) -> dict:
    """The checkpoint's config.json as a dict."""
    path = directory / CONFIG_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointFormatError(f"{directory}: no {CONFIG_FILE}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointFormatError(f"{path}: not valid JSON ({exc.msg})") from None


def safetensors_files(directory: Path) -> list[Path]:
    """The shards named by the index (real checkpoints are sharded), else the single model.safetensors."""
    index = directory / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointFormatError(f"{index}: not a safetensors index with a weight_map ({exc})") from None
        files = [directory / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise CheckpointFormatError(f"{directory}: shards named by {INDEX_FILE} are missing: {', '.join(missing)}")
        return files
    single = directory / SINGLE_FILE
    if single.is_file():
        return [single]
    if any(directory.glob("*.bin")):
        raise CheckpointFormatError(
            f"{directory}: only PyTorch .bin weights; this loader reads safetensors (convert the checkpoint)"
        )
    raise CheckpointFormatError(f"{directory}: no {INDEX_FILE} and no {SINGLE_FILE}")


def load_safetensors_into(model: torch.nn.Module, directory: Path, device: torch.device, rename: Rename) -> None:
    """Copy every checkpoint tensor into its parameter (cast to the parameter's dtype); all must be covered.

    The model must already have real storage on `device` (`to_empty`). Tied parameters (an LM head that is
    the embedding) are filled once through whichever key the checkpoint stores.
    """
    state = model.state_dict(keep_vars=True)
    filled: set[int] = set()
    unexpected: list[str] = []
    for shard in safetensors_files(directory):
        with safe_open(str(shard), framework="pt", device=str(device)) as reader:
            for key in reader.keys():
                name = rename(key)
                if name is None:
                    continue
                target = state.get(name)
                if target is None:
                    unexpected.append(key)
                    continue
                tensor = reader.get_tensor(key)
                if tuple(tensor.shape) != tuple(target.shape):
                    raise CheckpointFormatError(
                        f"{shard.name}: {key} has shape {tuple(tensor.shape)} but {name} expects {tuple(target.shape)}"
                    )
                with torch.no_grad():
                    target.copy_(tensor)  # casts to the parameter's dtype in place: no second copy
                filled.add(id(target))
                del tensor
    if unexpected:
        raise CheckpointFormatError(f"{directory}: tensors the model has no place for: {', '.join(sorted(unexpected)[:8])}")
    missing = sorted(name for name, t in state.items() if id(t) not in filled)
    if missing:
        raise CheckpointFormatError(f"{directory}: the checkpoint lacks {', '.join(missing[:8])}")


def mask_token_id(
    config: dict, tokenizer: PreTrainedTokenizerBase | None, override: int | None, *, token_name: str, family: str
) -> int:
    """A diffusion model's [MASK]: the spec's override, else config.json's mask_token_id, else the tokenizer's
    `token_name` (LLaDA's <|mdm_mask|>, Dream's <|mask|>), else the tokenizer's own mask token."""
    if override is not None:
        return override
    if isinstance(config.get("mask_token_id"), int):
        return config["mask_token_id"]
    if tokenizer is not None:
        vocab = tokenizer.get_vocab()
        if token_name in vocab:
            return vocab[token_name]
        if tokenizer.mask_token_id is not None:
            return tokenizer.mask_token_id
    raise CheckpointFormatError(
        f"{family} mask token unknown: config.json has no mask_token_id and the tokenizer has no "
        f"{token_name}; set mask_token_id in the model spec"
    )

