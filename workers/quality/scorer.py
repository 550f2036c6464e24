"""One run's quality per prompt: BERTScore, generative perplexity, LLaDA's ELBO, degeneracy, calibration."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specs.registry import family, is_diffusion
from specs.results import Generation, QualityRecord
from specs.schema import BertScoreSpec, ModelSpec, RunConfig
from workers.models.tokenization import model_input_ids
from workers.quality.bertscore import QualityError, load_bertscorer, score_texts
from workers.quality.degeneracy import degeneracy
from workers.quality.elbo import elbo_nll
from workers.quality.perplexity import TokenNll, continuation_nll, evaluator_pair

if TYPE_CHECKING:
    from workers.models.loading import LoadedModel
    from workers.prompts import PromptExample

SYNTHETIC_EVALUATOR_NOTE = "synthetic evaluator: perplexity not meaningful"
# Calibration texts, scored as if generated: the passage's real continuation, and the real continuation
# of the next prompt of the run (rotated), which is unrelated to this prompt.
CALIBRATION_REFERENCE = "reference"
CALIBRATION_UNRELATED = "unrelated"


@dataclass(frozen=True)
class QualityOutcome:
    """What `score_run` gives the runner to put into the RunResult (every field None when quality is off).

    `note` says what only the scorer knows (a synthetic evaluator); the runner prefixes its own
    "synthetic weights: quality not meaningful" when the generator's weights are synthetic.
    """

    quality: list[QualityRecord] | None
    quality_sampled: list[QualityRecord] | None
    calibration: dict[str, list[QualityRecord]] | None
    note: str | None


@dataclass(frozen=True)
class _Judges:
    """The perplexity evaluators of a run: the judge, and the second one reported beside it."""

    first: LoadedModel | None
    second: LoadedModel | None


@dataclass(frozen=True)
class _Continuation:
    """One text to score as if generated, with its generator-side ids (what the ELBO scores)."""

    example: PromptExample
    text: str
    answer_ids: list[int]


class QualityScorer:
    """Scores runs on one worker; BERTScore models are loaded once per (model, layers) and kept.

    A set of texts is scored once per worker: another run whose texts, prompts, generator, evaluator and
    settings are all the same (the same step count at another batch size, a compiled variant's token-exact
    text, every run's calibration) reuses the records, which the same inputs would reproduce. Calibration (the
    reference continuation and an unrelated passage scored as if generated) is part of every run, so each
    artifact carries its own "good" and "chance" rows.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._bertscorers: dict[tuple[str, int], object] = {}
        self._scored: dict[str, list[QualityRecord]] = {}
        self._nll: dict[tuple[str, str, str], TokenNll] = {}  # (evaluator:dtype, prompt text, text) → NLL

    def bertscorer(self, spec: BertScoreSpec):
        key = (spec.model, spec.num_layers)
        if key not in self._bertscorers:
            self._bertscorers[key] = load_bertscorer(spec.model, spec.num_layers, self.device)
        return self._bertscorers[key]

    def release(self) -> None:
        """Drop the cached scorer models (e.g. before measuring memory of a large run); the records stay."""
        self._bertscorers.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def score_run(
        self,
        config: RunConfig,
        examples: Sequence[PromptExample],
        generations: Sequence[Generation],
        *,
        model: LoadedModel,
        sampled: Sequence[Sequence[Generation]] | None = None,
        load_evaluator: Callable[[ModelSpec], LoadedModel],
    ) -> QualityOutcome:
        """Quality of the run's generations (and of LLaMA's samples, each record with its sample index), in the
        order of `examples`."""
        if not config.quality.enabled:
            return QualityOutcome(None, None, None, None)
        judges = _Judges(self._evaluator(config, load_evaluator), self._evaluator(config, load_evaluator, True))
        quality = self._score(config, self._generated(examples, generations), model, judges)
        quality_sampled = None
        if sampled is not None:
            # The ELBO is LLaDA's own bound; LLaMA's sampled text is scored by the shared metrics only.
            quality_sampled = [
                record.model_copy(update={"sample": index})
                for index, generations_of_sample in enumerate(sampled)
                for record in self._score(config, self._generated(examples, generations_of_sample), model, judges,
                                          elbo=False)
            ]
        calibration = self._calibrate(config, examples, model, judges)
        return QualityOutcome(quality, quality_sampled, calibration, _note(judges.first))

    # ------------------------------------------------------------ pieces

    def _evaluator(
        self, config: RunConfig, load_evaluator: Callable[[ModelSpec], LoadedModel], second: bool = False
    ) -> LoadedModel | None:
        if config.quality.perplexity is None:
            return None
        field = "second_evaluator" if second else "evaluator"
        named = getattr(config.quality.perplexity, field)
        if named is None:
            return None
        spec = getattr(config, field)
        if spec is None:
            raise QualityError(
                f"quality.perplexity.{field}: {named!r} was not resolved to a model (RunConfig.{field} is None); "
                "name packaged-smollm2, a model of the spec, a checkpoint path or hub id"
            )
        evaluator = load_evaluator(spec)
        if is_diffusion(evaluator.spec.arch):
            raise QualityError(
                f"quality.perplexity.{field}: {evaluator.spec.name!r} is a {evaluator.spec.arch} model; "
                "generative perplexity needs a causal LM (an autoregressive arch: llama or qwen2)"
            )
        return evaluator

    def _perplexities(self, evaluator: LoadedModel, continuations: Sequence[_Continuation]) -> list[TokenNll]:
        """The evaluator's NLL of each text given its prompt; a (prompt, text) pair it scored before on this worker
        is not scored again (the calibration texts of both generators, a text two step counts share)."""
        key_of = [(f"{evaluator.spec.name}:{evaluator.dtype}", c.example.prompt_text, c.text) for c in continuations]
        todo = [(key, c) for key, c in zip(key_of, continuations) if key not in self._nll]
        pairs = [evaluator_pair(evaluator.tokenizer, c.example.prompt_text, c.text, chat=evaluator.spec.chat)
                 for _, c in todo]
        positions = getattr(evaluator.model.config, "max_position_embeddings", None)
        for (key, _), nll in zip(todo, continuation_nll(evaluator.model, pairs, max_positions=positions)):
            self._nll[key] = nll
        return [self._nll[key] for key in key_of]

    @staticmethod
    def _generated(
        examples: Sequence[PromptExample], generations: Sequence[Generation]
    ) -> list[_Continuation]:
        by_prompt: dict[int, Generation] = {}
        for generation in generations:  # a batch larger than the prompt set repeats prompts: keep the first
            by_prompt.setdefault(generation.prompt_id, generation)
        missing = [ex.prompt_id for ex in examples if ex.prompt_id not in by_prompt]
        assert not missing, f"no generation for prompt ids {missing}"
        continuations = []
        for ex in examples:
            generation = by_prompt[ex.prompt_id]
            # The ELBO scores the same useful part the text shows: the ids before the first EOS/EoT.
            continuations.append(
                _Continuation(ex, generation.text, generation.token_ids[: generation.useful_tokens])
            )
        return continuations

    def _calibrate(
        self,
        config: RunConfig,
        examples: Sequence[PromptExample],
        model: LoadedModel,
        judges: _Judges,
    ) -> dict[str, list[QualityRecord]]:
        reference = [_Continuation(ex, ex.reference_text, list(ex.reference_ids)) for ex in examples]
        calibration = {CALIBRATION_REFERENCE: self._score(config, reference, model, judges)}
        if len(examples) > 1:  # with one prompt there is no other passage to rotate in
            unrelated = [
                _Continuation(ex, other.reference_text, list(other.reference_ids))
                for ex, other in zip(examples, [*examples[1:], examples[0]])
            ]
            calibration[CALIBRATION_UNRELATED] = self._score(config, unrelated, model, judges)
        return calibration

    def _score(
        self,
        config: RunConfig,
        continuations: Sequence[_Continuation],
        model: LoadedModel,
        judges: _Judges,
        *,
        elbo: bool = True,
    ) -> list[QualityRecord]:
        """The records of these texts, scored now or by an earlier run of this worker with the same inputs."""
        key = _scoring_key(config, continuations, elbo)
        if key not in self._scored:
            self._scored[key] = self._score_now(config, continuations, model, judges, elbo=elbo)
        return self._scored[key]

    def _score_now(
        self,
        config: RunConfig,
        continuations: Sequence[_Continuation],
        model: LoadedModel,
        judges: _Judges,
        *,
        elbo: bool,
    ) -> list[QualityRecord]:
        quality = config.quality
        texts = [c.text for c in continuations]
        columns: dict[str, list[float | None]] = {}
        if quality.bertscore is not None:
            scores = score_texts(
                self.bertscorer(quality.bertscore), texts, [c.example.reference_text for c in continuations]
            )
            columns["bertscore_precision"] = [s.precision for s in scores]
            columns["bertscore_recall"] = [s.recall for s in scores]
            columns["bertscore_f1"] = [s.f1 for s in scores]
        for suffix, evaluator in (("", judges.first), ("_second", judges.second)):
            if evaluator is not None:
                nlls = self._perplexities(evaluator, continuations)
                columns[f"nll_per_token{suffix}"] = [n.nll_per_token for n in nlls]
                columns[f"gen_ppl{suffix}"] = [n.perplexity for n in nlls]
        if elbo and quality.elbo is not None and family(model.spec.arch).sampler == "llada":
            bounds, errors = self._elbo(config, continuations, model)
            columns["elbo_nll_per_token"] = bounds
            columns["elbo_nll_per_token_stderr"] = errors
        figures = [degeneracy(text) for text in texts]
        columns["repeated_bigram_rate"] = [f.repeated_bigram_rate for f in figures]
        columns["distinct_1"] = [f.distinct_1 for f in figures]
        columns["distinct_2"] = [f.distinct_2 for f in figures]
        return [
            QualityRecord(
                prompt_id=c.example.prompt_id, **{name: values[i] for name, values in columns.items()}
            )
            for i, c in enumerate(continuations)
        ]

    @staticmethod
    def _elbo(
        config: RunConfig, continuations: Sequence[_Continuation], model: LoadedModel
    ) -> tuple[list[float | None], list[float | None]]:
        """The ELBO bound per token of each continuation and its Monte-Carlo standard error."""
        assert config.quality.elbo is not None
        if model.mask_token_id is None:
            raise QualityError(
                f"quality.elbo: model {model.spec.name!r} has no [MASK] id; set mask_token_id in its spec"
            )
        values: list[float | None] = []
        errors: list[float | None] = []
        for c in continuations:
            # The prompt as the sampler read it (chat template or BOS around the cut ids).
            prompt = model_input_ids(
                model.tokenizer, [c.example.prompt_ids], model.spec.chat, torch.device("cpu")
            )[0]
            estimate = elbo_nll(
                model.model,
                prompt,
                c.answer_ids,
                model.mask_token_id,
                samples=config.quality.elbo.samples,
                # Same masks for every run of a prompt (common random numbers across step counts).
                seed=config.controls.seed + c.example.prompt_id,
            )
            values.append(estimate.nll_bound_per_token)
            errors.append(estimate.stderr_per_token)
        return values, errors


def _note(evaluator: LoadedModel | None) -> str | None:
    """What only the scorer knows; the runner itself flags a generator with synthetic weights."""
    if evaluator is not None and evaluator.weights == "synthetic":
        return SYNTHETIC_EVALUATOR_NOTE
    return None


def _scoring_key(config: RunConfig, continuations: Sequence[_Continuation], elbo: bool) -> str:
    """Everything a set of records depends on: the generator (tokenisation, ELBO), the evaluator, the settings
    (seed, dtype, attention) and the texts with their prompts and references; never the batch size or steps."""
    payload = {
        "model": config.model.model_dump(mode="json"),
        "quality": config.quality.model_dump(mode="json"),
        "evaluator": None if config.evaluator is None else config.evaluator.model_dump(mode="json"),
        "second_evaluator": None if config.second_evaluator is None else config.second_evaluator.model_dump(mode="json"),
        "controls": config.controls.model_dump(mode="json"),
        "elbo": elbo,
        "texts": [
            [c.example.prompt_id, c.example.prompt_text, list(c.example.prompt_ids), c.example.reference_text, c.text,
             c.answer_ids]
            for c in continuations
        ],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
