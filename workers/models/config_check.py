"""A checkpoint's config.json against its weights, before the model is given any memory.

The model is built from config.json on the meta device (no storage), and every tensor's shape is read from the
safetensors headers (no data). A config.json that contradicts its weights, such as a vocab_size, hidden size or
layer count that is not the weights', is therefore an error naming the file, the field and the value the
weights hold. Never an allocation of the wrong size, which would run out of memory and be recorded as a finding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from safetensors import safe_open
from transformers import PreTrainedModel

from workers.errors import CheckpointFormatError
from workers.models.checkpoint import CONFIG_FILE, Rename, safetensors_files

ConfigKey = Callable[[dict, str], str]  # (config.json, transformers' field) -> the key config.json sets it by

# The config field behind each dimension of a tensor, by the end of its name (transformers' names), in the order
# they are checked: the embedding first, so a wrong vocabulary or width is named before what follows from it.
_DIMENSIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("embed_tokens.weight", ("vocab_size", "hidden_size")),
    ("lm_head.weight", ("vocab_size", "hidden_size")),
    ("mlp.gate_proj.weight", ("intermediate_size", "hidden_size")),
    ("mlp.up_proj.weight", ("intermediate_size", "hidden_size")),
    ("mlp.down_proj.weight", ("hidden_size", "intermediate_size")),
    ("norm.weight", ("hidden_size",)),  # the final norm and both of each layer's
)
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


def same_key(raw: dict, field: str) -> str:
    """config.json names its fields as transformers does (LLaMA, Qwen2, Dream)."""
    return field


def check_against_weights(model: PreTrainedModel, directory: Path, raw: dict, rename: Rename,
                          config_key: ConfigKey = same_key) -> None:
    """Raise CheckpointFormatError when the meta `model` built from `raw` (config.json) cannot hold the
    checkpoint's tensors: a layer count, or a tensor shape, that is not the weights'."""
    wanted = {name: tuple(t.shape) for name, t in model.state_dict(keep_vars=True).items()}
    stored = _stored_shapes(directory, rename)
    config = directory / CONFIG_FILE

    def contradiction(field: str, weights_value: int, evidence: str) -> CheckpointFormatError:
        key = config_key(raw, field)
        return CheckpointFormatError(
            f"{config}: {key} is {raw.get(key)!r} but the weights hold {weights_value} ({evidence}): config.json "
            f"contradicts the checkpoint; set {key}: {weights_value}, or give the checkpoint's own config.json"
        )

    layers = {int(m.group(1)) for name in stored if (m := _LAYER.match(name))}
    if layers and max(layers) + 1 != model.config.num_hidden_layers:
        raise contradiction("num_hidden_layers", max(layers) + 1, f"layers 0 to {max(layers)}")
    for name, (key, shard, shape) in sorted(stored.items(), key=lambda item: _check_order(item[0])):
        expected = wanted.get(name)
        if expected is None or expected == shape:
            continue  # a tensor with no place in the model: load_safetensors_into names it
        fields = next((f for suffix, f in _DIMENSIONS if name.endswith(suffix)), ())
        for dim, field in enumerate(fields):
            if dim < len(shape) and dim < len(expected) and shape[dim] != expected[dim]:
                raise contradiction(field, shape[dim], f"{shard}: {key} has shape {list(shape)}")
        raise CheckpointFormatError(
            f"{config}: contradicts the weights: {shard}: {key} has shape {list(shape)}, but config.json makes it "
            f"{list(expected)} (its attention heads or head size); give the checkpoint's own config.json"
        )


def _stored_shapes(directory: Path, rename: Rename) -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """The model parameter each stored tensor fills -> (its key, its shard's name, its shape), from the headers."""
    stored = {}
    for shard in safetensors_files(directory):
        with safe_open(str(shard), framework="pt", device="cpu") as reader:
            for key in reader.keys():
                name = rename(key)
                if name is not None:
                    stored[name] = (key, shard.name, tuple(reader.get_slice(key).get_shape()))
    return stored


def _check_order(name: str) -> int:
    return next((i for i, (suffix, _) in enumerate(_DIMENSIONS) if name.endswith(suffix)), len(_DIMENSIONS))
