"""Load a model for a run: synthetic weights of a preset shape, or a real checkpoint, on the target device.

This is the backend (STYLE: optimum-benchmark): it only loads. Every model, of any registry family and
either kind of weights, is built the same way: its layout's transformers class (LlamaForCausalLM or
Qwen2ForCausalLM, workers/models/layouts.py) created on the meta device (no memory), given uninitialised
storage directly on the target device (`to_empty`), then filled there, either from a fixed-seed generator or
by streaming the checkpoint's safetensors. An 8B model therefore never exists as a 16 GB host copy. A
diffusion family is the same class made bidirectional by its sampler's conversion (LLaDA's
workers/models/llada_model.py, Dream's workers/models/dream_model.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import is_flash_attn_2_available

from specs.registry import Family, family, model_type_advice
from specs.results import ModelProvenance
from specs.schema import CheckpointSource, Controls, ModelSpec, SyntheticSource
from specs.shapes import ModelShape
from workers.errors import CheckpointFormatError, SpecMismatchError
from workers.models.attention import make_sync_free
from workers.models.checkpoint import load_safetensors_into, read_config, resolve_checkpoint
from workers.models.config_check import check_against_weights
from workers.models.layouts import (
    DIFFUSION_MODELS,
    LAYOUTS,
    checkpoint_format,
    layout_of,
)
from workers.models.tokenization import checkpoint_tokenizer, eos_token_ids, synthetic_tokenizer

DTYPES: dict[str, torch.dtype] = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
# Standard deviation of synthetic weights: LLaMA's initializer_range, which keeps activations finite in
# any dtype at any depth (the values carry no meaning; only shapes and kernels matter for them).
SYNTHETIC_INIT_STD = 0.02
GENERATION_CONFIG_FILE = "generation_config.json"
TRAINING_LOG_FILE = "training_log.json"  # written by `llada-bench train` (miniature/export.py)


@dataclass
class LoadedModel:
    spec: ModelSpec
    model: PreTrainedModel  # eval(), on device, in dtype
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    mask_token_id: int | None  # LLaDA only
    eos_token_ids: tuple[int, ...]  # EOS / EoT ids, stripped from the end of outputs
    weights: Literal["synthetic", "real"]
    weights_bytes: int
    provenance: ModelProvenance | None = None  # from the checkpoint's training_log.json, when it ships one

    @property
    def attention_kernel(self) -> str:
        """The attention implementation the model actually runs (transformers' name for it)."""
        return str(getattr(self.model.config, "_attn_implementation", None) or "unknown")


def load_model(spec: ModelSpec, controls: Controls, device: torch.device) -> LoadedModel:
    """Build or load `spec` on `device` in the controls' dtype with the controls' attention kernel."""
    dtype = DTYPES[controls.dtype]
    attention = attention_implementation(controls.attention, device)
    if isinstance(spec.source, SyntheticSource):
        return _load_synthetic(spec, spec.source, dtype, attention, device)
    return _load_checkpoint(spec, spec.source, dtype, attention, device)


def attention_implementation(requested: str, device: torch.device) -> str:
    """The transformers attn_implementation for the control; flash-attn that cannot run here is an error."""
    if requested == "flash_attention_2":
        if device.type != "cuda":
            raise SpecMismatchError("controls.attention: 'flash_attention_2' needs a CUDA device; allowed here: sdpa, eager")
        if not is_flash_attn_2_available():
            raise SpecMismatchError(
                "controls.attention: 'flash_attention_2' but flash-attn is not installed or not usable on this "
                "machine (pip install flash-attn); choose sdpa or eager for both models instead"
            )
    return requested


# ---------------------------------------------------------------- building


def shape_of_config(config: PretrainedConfig) -> ModelShape:
    """The inverse of a layout's `config_for_shape`: the shape of a loaded model, recorded in its runs' artifacts
    so the report's roofline costs the model that ran (a checkpoint's shape is unknown before loading)."""
    rope = getattr(config, "rope_parameters", None) or {}
    return ModelShape(
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads or config.num_attention_heads,
        intermediate_size=config.intermediate_size,
        vocab_size=config.vocab_size,
        max_position_embeddings=config.max_position_embeddings,
        rope_theta=float(rope.get("rope_theta", getattr(config, "rope_theta", 500000.0))),
        rms_norm_eps=config.rms_norm_eps,
        tie_word_embeddings=bool(config.tie_word_embeddings),
        # Qwen2's layout always biases q, k and v; LLaMA's never does in this package.
        attention_bias=any(layout.attention_bias and isinstance(config, layout.config_class) for layout in LAYOUTS.values()),
    )


def build_on_meta(config: PretrainedConfig, attention: str, dtype: torch.dtype, entry: Family) -> PreTrainedModel:
    """The family's model structure with no storage: instant and free at any size."""
    config._attn_implementation = attention
    with torch.device("meta"):
        model = layout_of(entry).model_class(config)
    model.to(dtype)
    if entry.is_diffusion:
        DIFFUSION_MODELS[entry.sampler].make_bidirectional(model)
    else:
        make_sync_free(model)
    return model


def materialise(model: PreTrainedModel, device: torch.device, seed: int | None) -> None:
    """Give the meta model real (uninitialised) storage on `device`; fill it from `seed` when given.

    On the meta device itself nothing is allocated, which is how an 8B shape is checked on a laptop.
    """
    model.to_empty(device=device)
    if model.config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight  # to_empty gives each module its own tensor
    _reset_rotary(model, device)
    if seed is None or device.type == "meta":
        return
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():  # a fixed order: same seed, same weights
            if param.ndim == 1 and not name.endswith(".bias"):  # RMSNorm gains start at one, as in training
                param.fill_(1.0)
            else:
                param.normal_(0.0, SYNTHETIC_INIT_STD, generator=generator)


def _reset_rotary(model: PreTrainedModel, device: torch.device) -> None:
    """RoPE frequencies are non-persistent buffers: recompute them (in float32) after `to_empty`."""
    rotary = model.model.rotary_emb
    fresh = type(rotary)(model.config)  # built on the CPU: the caller is outside any meta context
    rotary.inv_freq = fresh.inv_freq.to(device=device, dtype=torch.float32)
    rotary.original_inv_freq = fresh.original_inv_freq.to(device=device, dtype=torch.float32)
    rotary.attention_scaling = fresh.attention_scaling
    others = [name for name, _ in model.named_buffers() if "rotary_emb" not in name]
    assert not others, f"unexpected buffers would stay uninitialised: {others}"


def weights_bytes(model: torch.nn.Module) -> int:
    """Bytes of every parameter and persistent buffer (tied weights once): the model's cost before any input."""
    unique = {id(t): t for t in model.state_dict(keep_vars=True).values()}
    return sum(t.numel() * t.element_size() for t in unique.values())


def _finish(model: PreTrainedModel) -> PreTrainedModel:
    model.eval()
    model.requires_grad_(False)
    return model


def _loaded(
    spec: ModelSpec,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    device: torch.device,
    dtype: torch.dtype,
    mask: int | None,
    eos: tuple[int, ...],
    weights: Literal["synthetic", "real"],
    provenance: ModelProvenance | None = None,
) -> LoadedModel:
    """The model ready for inference, with what a run reads beside it, whichever way its weights came."""
    return LoadedModel(
        spec=spec, model=_finish(model), tokenizer=tokenizer, device=device, dtype=dtype, mask_token_id=mask,
        eos_token_ids=eos, weights=weights, weights_bytes=weights_bytes(model), provenance=provenance,
    )  # fmt: skip


# ---------------------------------------------------------------- synthetic


def _load_synthetic(
    spec: ModelSpec, source: SyntheticSource, dtype: torch.dtype, attention: str, device: torch.device
) -> LoadedModel:
    shape = spec.shape()
    assert shape is not None
    tokenizer = synthetic_tokenizer()
    if shape.vocab_size < len(tokenizer):
        raise SpecMismatchError(
            f"models.{spec.name}.source.synthetic.vocab_size: {shape.vocab_size} is smaller than the synthetic "
            f"tokenizer's {len(tokenizer)} tokens; use at least {len(tokenizer)}"
        )
    entry = family(spec.arch)  # the spec fits the shape's QKV bias to the family's layout (ModelSpec)
    model = build_on_meta(layout_of(entry).config_for_shape(shape), attention, dtype, entry)
    materialise(model, device, seed=source.seed)
    mask = None
    if entry.is_diffusion:
        mask = spec.mask_token_id if spec.mask_token_id is not None else tokenizer.mask_token_id
    return _loaded(spec, model, tokenizer, device, dtype, mask, eos_token_ids(tokenizer), "synthetic")


# ---------------------------------------------------------------- checkpoints


def _load_checkpoint(
    spec: ModelSpec, source: CheckpointSource, dtype: torch.dtype, attention: str, device: torch.device
) -> LoadedModel:
    directory = resolve_checkpoint(source.checkpoint, source.revision, source.trust_remote_code)
    tokenizer_dir = resolve_checkpoint(source.tokenizer, source.revision) if source.tokenizer else directory
    raw = read_config(directory)
    tokenizer = checkpoint_tokenizer(tokenizer_dir, source.trust_remote_code, raw.get("model_type"))
    entry = family(spec.arch)
    if source.trust_remote_code:
        model = _load_remote_code(directory, dtype, device)
    else:
        found = checkpoint_format(entry, raw)
        if found is None:
            raise CheckpointFormatError(f"{directory} {model_type_advice(spec.arch, raw.get('model_type'))}")
        model = build_on_meta(found.config(raw, directory), attention, dtype, entry)
        check_against_weights(model, directory, raw, found.rename, found.config_key)  # before any memory is taken
        materialise(model, device, seed=None)
        load_safetensors_into(model, directory, device, found.rename)
    mask = None
    if entry.is_diffusion:
        mask = DIFFUSION_MODELS[entry.sampler].mask_token_id(raw, tokenizer, spec.mask_token_id)
    eos = eos_token_ids(tokenizer, _config_eos(raw, directory))
    eos = tuple(t for t in eos if t != mask)
    return _loaded(spec, model, tokenizer, device, dtype, mask, eos, "real", read_provenance(directory))


def read_provenance(directory: Path) -> ModelProvenance | None:
    """The training log a checkpoint trained by this package ships, reduced to what a report shows."""
    path = directory / TRAINING_LOG_FILE
    if not path.is_file():
        return None
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
        fields = {name: log[name] for name in ModelProvenance.model_fields if name in log and name != "trained_by"}
        return ModelProvenance(trained_by="llada-bench train", **fields)
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise CheckpointFormatError(f"{path}: not a training log this package wrote ({exc})") from None


def _config_eos(raw: dict, directory: Path) -> list[int]:
    """EOS ids from config.json and generation_config.json (instruct models list their turn end there)."""
    ids: list[int] = []
    sources = [raw]
    generation = directory / GENERATION_CONFIG_FILE
    if generation.is_file():
        try:
            sources.append(json.loads(generation.read_text(encoding="utf-8")))
        except json.JSONDecodeError:
            pass
    for config in sources:
        value = config.get("eos_token_id")
        for token in [value] if isinstance(value, int) else (value or []):
            if isinstance(token, int) and token not in ids:
                ids.append(token)
    return ids


def _load_remote_code(directory: Path, dtype: torch.dtype, device: torch.device) -> PreTrainedModel:
    """The checkpoint's own modeling code: only when the spec opts in with source.trust_remote_code."""
    model = AutoModelForCausalLM.from_pretrained(str(directory), trust_remote_code=True, dtype=dtype)
    return model.to(device)
