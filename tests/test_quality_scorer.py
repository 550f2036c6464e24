"""QualityScorer.score_run on tiny synthetic LLaMA and LLaDA with the real loaders, prompts and scorer."""

from __future__ import annotations

import random

import pytest
import torch

from specs.results import Generation
from specs.schema import (
    BertScoreSpec,
    Controls,
    ElboSpec,
    ModelSpec,
    PerplexitySpec,
    Prompts,
    QualitySpec,
    RunConfig,
    SyntheticSource,
)
from workers.models.loading import LoadedModel, load_model
from workers.models.tokenization import decode_generation
from workers.prompts import PromptExample, load_prompt_examples
from workers.quality import QualityOutcome, QualityScorer
from workers.quality.scorer import CALIBRATION_REFERENCE, CALIBRATION_UNRELATED, SYNTHETIC_EVALUATOR_NOTE

PROMPT_LENGTH, GENERATION_LENGTH = 16, 12
PROMPT_IDS = [0, 1, 2]
CONTROLS = Controls(dtype="float32", device="cpu", warmup=0, repetitions=1)
PROMPTS = Prompts(dataset="specs/data/prompts.txt", count=len(PROMPT_IDS))
LLAMA = ModelSpec(name="llama-tiny", arch="llama", source=SyntheticSource(synthetic="tiny"))
LLADA = ModelSpec(name="llada-tiny", arch="llada", source=SyntheticSource(synthetic="tiny"))
QUALITY = QualitySpec(
    bertscore=BertScoreSpec(model="packaged-minilm", num_layers=6),
    perplexity=PerplexitySpec(evaluator="llama-tiny"),
    elbo=ElboSpec(samples=4),
    llama_sampled_temperature=1.0,
)


def run_config(model: ModelSpec, quality: QualitySpec = QUALITY, **axes: object) -> RunConfig:
    return RunConfig(
        model=model,
        batch_size=2,
        prompt_length=PROMPT_LENGTH,
        generation_length=GENERATION_LENGTH,
        controls=CONTROLS,
        prompts=PROMPTS,
        prompt_ids=PROMPT_IDS,
        quality=quality,
        evaluator=LLAMA if quality.perplexity else None,
        **axes,
    )


@pytest.fixture(scope="module")
def models() -> dict[str, LoadedModel]:
    return {spec.name: load_model(spec, CONTROLS, torch.device("cpu")) for spec in (LLAMA, LLADA)}


@pytest.fixture(scope="module")
def examples(models) -> list[PromptExample]:
    return load_prompt_examples(
        PROMPTS, models["llama-tiny"].tokenizer, PROMPT_LENGTH, GENERATION_LENGTH, PROMPT_IDS
    )


@pytest.fixture(scope="module")
def scorer() -> QualityScorer:
    return QualityScorer("cpu")


def fake_generations(
    loaded: LoadedModel, examples: list[PromptExample], seed: int, empty: int | None = None
) -> list[Generation]:
    """Random tokens (no special ones), an EOS tail on one prompt, nothing useful on prompt `empty`."""
    rng = random.Random(seed)
    eos = loaded.eos_token_ids[0]
    generations = []
    for i, ex in enumerate(examples):
        ids = [rng.randrange(1000, 30000) for _ in range(GENERATION_LENGTH)]
        if i == 1:
            ids[8:] = [eos] * 4
        if i == empty:
            ids = [eos] * GENERATION_LENGTH
        text, useful = decode_generation(loaded.tokenizer, ids, loaded.eos_token_ids)
        generations.append(Generation(prompt_id=ex.prompt_id, token_ids=ids, text=text, useful_tokens=useful))
    return generations


def test_llada_run_scores_every_metric_per_prompt(scorer, models, examples) -> None:
    loads: list[str] = []

    def load_evaluator(spec: ModelSpec) -> LoadedModel:
        loads.append(spec.name)
        return models[spec.name]

    config = run_config(LLADA, steps=12, block_length=12, remasking="low_confidence")
    outcome = scorer.score_run(
        config,
        examples,
        fake_generations(models["llada-tiny"], examples, 0, empty=2),
        model=models["llada-tiny"],
        load_evaluator=load_evaluator,
    )
    assert isinstance(outcome, QualityOutcome)
    assert loads == ["llama-tiny"]
    assert [r.prompt_id for r in outcome.quality] == PROMPT_IDS
    full, cut, empty = outcome.quality
    for record in (full, cut):
        assert 0 < record.bertscore_f1 < 1
        assert record.gen_ppl == pytest.approx(torch.tensor(record.nll_per_token).exp().item())
        assert record.elbo_nll_per_token > 0
        # The bound's Monte-Carlo standard error is kept beside it (per token, like the bound).
        assert 0 < record.elbo_nll_per_token_stderr < record.elbo_nll_per_token
        assert record.distinct_1 is not None
    # Nothing before the first EOS: no perplexity or bound to speak of, a zero BERTScore.
    assert empty.gen_ppl is None and empty.elbo_nll_per_token is None and empty.bertscore_f1 == 0
    assert outcome.quality_sampled is None
    assert outcome.note == SYNTHETIC_EVALUATOR_NOTE  # the runner adds the generator's own synthetic note


def test_calibration_rows_show_good_and_chance(scorer, models, examples) -> None:
    config = run_config(LLAMA)
    outcome = scorer.score_run(
        config,
        examples,
        fake_generations(models["llama-tiny"], examples, 1),
        model=models["llama-tiny"],
        sampled=[fake_generations(models["llama-tiny"], examples, 2)],
        load_evaluator=lambda spec: models[spec.name],
    )
    reference, unrelated = (
        outcome.calibration[CALIBRATION_REFERENCE],
        outcome.calibration[CALIBRATION_UNRELATED],
    )
    assert [r.prompt_id for r in reference] == [r.prompt_id for r in unrelated] == PROMPT_IDS
    for good, chance in zip(reference, unrelated):
        assert good.bertscore_f1 == pytest.approx(1.0, abs=1e-5)
        assert chance.bertscore_f1 < 0.9
        assert good.gen_ppl is not None and chance.gen_ppl is not None
        assert good.elbo_nll_per_token is None  # LLaMA has no ELBO
    assert [r.prompt_id for r in outcome.quality_sampled] == PROMPT_IDS
    assert all(r.elbo_nll_per_token is None for r in outcome.quality + outcome.quality_sampled)
    # The same generator, prompts and settings: calibration is computed once per worker and reused.
    again = scorer.score_run(
        config,
        examples,
        fake_generations(models["llama-tiny"], examples, 3),
        model=models["llama-tiny"],
        load_evaluator=lambda spec: models[spec.name],
    )
    assert all(again.calibration[kind] is records for kind, records in outcome.calibration.items())


def test_quality_off_gives_nothing(scorer, models, examples) -> None:
    config = run_config(LLAMA, quality=QualitySpec())
    outcome = scorer.score_run(
        config,
        examples,
        fake_generations(models["llama-tiny"], examples, 0),
        model=models["llama-tiny"],
        load_evaluator=lambda spec: pytest.fail("no evaluator when quality is off"),
    )
    assert outcome == QualityOutcome(None, None, None, None)


def test_bertscore_only_needs_no_evaluator_and_scorers_are_cached(scorer, models, examples) -> None:
    quality = QualitySpec(bertscore=BertScoreSpec())
    config = run_config(LLAMA, quality=quality)
    outcome = scorer.score_run(
        config,
        examples,
        fake_generations(models["llama-tiny"], examples, 0),
        model=models["llama-tiny"],
        load_evaluator=lambda spec: pytest.fail("no evaluator without perplexity"),
    )
    assert all(r.gen_ppl is None and r.bertscore_f1 is not None for r in outcome.quality)
    assert scorer.bertscorer(BertScoreSpec()) is scorer.bertscorer(
        BertScoreSpec(model="packaged-minilm", num_layers=6)
    )


def test_single_prompt_has_no_unrelated_passage(models, examples) -> None:
    config = run_config(LLAMA, quality=QualitySpec(bertscore=BertScoreSpec())).model_copy(
        update={"prompt_ids": [0]}
    )
    outcome = QualityScorer("cpu").score_run(
        config,
        examples[:1],
        fake_generations(models["llama-tiny"], examples[:1], 0),
        model=models["llama-tiny"],
        load_evaluator=lambda spec: models[spec.name],
    )
    assert set(outcome.calibration) == {CALIBRATION_REFERENCE}


def test_the_same_texts_are_scored_once_per_worker(models, examples, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step count's text at another batch size (or a compiled variant's token-exact text) reuses the records the
    same inputs gave; a different text, or another step count's, is scored anew."""
    from workers.quality import scorer as scoring

    calls: list[int] = []
    real = scoring.score_texts
    monkeypatch.setattr(scoring, "score_texts", lambda bert, texts, refs: calls.append(len(texts)) or real(bert, texts, refs))
    fresh = QualityScorer("cpu")

    def score(seed: int, batch_size: int) -> QualityOutcome:
        config = run_config(LLADA, steps=12, block_length=12, remasking="low_confidence").model_copy(
            update={"batch_size": batch_size})
        return fresh.score_run(config, examples, fake_generations(models["llada-tiny"], examples, seed),
                               model=models["llada-tiny"], load_evaluator=lambda spec: models[spec.name])

    first = score(0, batch_size=1)
    assert len(calls) == 3  # the texts, the reference and the unrelated calibration
    again = score(0, batch_size=3)
    assert again.quality == first.quality and again.calibration == first.calibration and len(calls) == 3
    other = score(5, batch_size=1)
    assert len(calls) == 4 and other.quality != first.quality  # new texts: scored; calibration: reused
