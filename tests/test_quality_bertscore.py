"""BERTScore through the real bert-score package and the packaged MiniLM model (offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workers.quality.bertscore import (
    PACKAGED_MINILM,
    QualityError,
    load_bertscorer,
    resolve_scorer_model,
    score_texts,
)

CAT = "The cat sat on the mat and looked out of the window at the rain."
MARKET = "Stock markets fell sharply after the central bank raised interest rates again."


@pytest.fixture(scope="module")
def minilm():
    return load_bertscorer(PACKAGED_MINILM, 6, "cpu")


def test_packaged_model_resolves_to_the_package_directory() -> None:
    path = Path(resolve_scorer_model(PACKAGED_MINILM))
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()
    assert resolve_scorer_model("roberta-large") == "roberta-large"


def test_identical_texts_score_one(minilm) -> None:
    (score,) = score_texts(minilm, [CAT], [CAT])
    assert score.precision == pytest.approx(1.0, abs=1e-5)
    assert score.recall == pytest.approx(1.0, abs=1e-5)
    assert score.f1 == pytest.approx(1.0, abs=1e-5)


def test_unrelated_texts_score_clearly_lower(minilm) -> None:
    same, unrelated, paraphrase = score_texts(
        minilm,
        [CAT, MARKET, "A cat was sitting on the mat, watching the rain through the window."],
        [CAT, CAT, CAT],
    )
    assert unrelated.f1 < 0.5 < same.f1
    assert unrelated.f1 < paraphrase.f1 < same.f1


def test_too_many_layers_is_a_typed_error() -> None:
    with pytest.raises(QualityError, match="num_layers: 17 is outside the 6 layers"):
        load_bertscorer(PACKAGED_MINILM, 17, "cpu")


def test_missing_scorer_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(QualityError, match="cannot load"):
        load_bertscorer(str(tmp_path / "absent"), 6, "cpu")


def test_roberta_tokenizer_keeps_its_prefix_space(tmp_path: Path) -> None:
    """The cluster's roberta-large path: bert-score asks for add_prefix_space; set it at load."""
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for char in bytes_to_unicode().values():
        vocab.setdefault(char, len(vocab))
    vocab["Ġh"] = len(vocab)
    RobertaTokenizer(vocab=vocab, merges=[("Ġ", "h")], model_max_length=512).save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=514,
        pad_token_id=1,
    )
    RobertaModel(config).save_pretrained(tmp_path)

    scorer = load_bertscorer(str(tmp_path), 2, "cpu")
    from bert_score.utils import sent_encode

    assert sent_encode(scorer._tokenizer, "hello") == scorer._tokenizer.encode(" hello")
    assert len(scorer._model.encoder.layer) == 2
    (score,) = score_texts(scorer, ["hello there"], ["hello there"])
    assert score.f1 == pytest.approx(1.0, abs=1e-5)


def test_empty_texts_score_zero_as_bert_score_defines(minilm) -> None:
    scores = score_texts(minilm, ["", CAT, "  "], [CAT, "", CAT])
    assert all((s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0) for s in scores)
    assert score_texts(minilm, [], []) == []


def test_a_short_pair_scores_as_bert_score_and_the_window_path_agrees(minilm) -> None:
    (score,) = score_texts(minilm, [CAT], [MARKET])
    from workers.quality.bertscore import windowed_score

    windowed = windowed_score(minilm, CAT, MARKET)
    assert (windowed.precision, windowed.recall, windowed.f1) == pytest.approx(
        (score.precision, score.recall, score.f1), abs=1e-5)


def test_long_texts_are_scored_whole_not_truncated_at_the_window(minilm) -> None:
    # bert-score alone truncates both texts at 510 subword tokens: at 512+ generated tokens a continuation's tail
    # was never scored. Two candidates that differ only after the window now score differently.
    from workers.quality.bertscore import window_tokens

    width = window_tokens(minilm._tokenizer)
    head = " ".join([CAT] * (width // 14 + 2))  # longer than one window
    reference = head + " " + " ".join([MARKET] * 12)
    same_tail, other_tail = head + " " + " ".join([MARKET] * 12), head + " " + " ".join([CAT] * 12)
    assert len(minilm._tokenizer.encode(head, add_special_tokens=False)) > width
    truncated = minilm.score([same_tail, other_tail], [reference, reference])[2].tolist()
    assert truncated[0] == pytest.approx(truncated[1], abs=1e-6)  # the tails were cut off
    whole_same, whole_other = score_texts(minilm, [same_tail, other_tail], [reference, reference])
    assert whole_same.f1 == pytest.approx(1.0, abs=1e-5)
    assert whole_other.f1 < whole_same.f1 - 0.01
