"""What a spec's quality section may not say, checked with the spec (no file read): a model named as a packaged
evaluator, one judge named twice, a perplexity judge as BERTScore's model, and settings nothing would read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specs.controls import PACKAGED_MINILM, PACKAGED_SMOLLM2
from specs.registry import family

if TYPE_CHECKING:
    from specs.schema import ExperimentSpec

# The names the spec's quality section gives the evaluators this package ships; a model of the spec named so
# would be taken for the packaged one (or the packaged one for it), and the report would credit the wrong judge.
PACKAGED_EVALUATORS = {
    PACKAGED_SMOLLM2: "perplexity judge SmolLM2-135M-Instruct (quality.perplexity.evaluator)",
    PACKAGED_MINILM: "BERTScore model MiniLM-L6 (quality.bertscore.model)",
}


def quality_problem(spec: ExperimentSpec) -> str | None:
    """The first thing the spec's quality section (or a model name it could mistake) may not say, or None."""
    for check in (_reserved_names, _judge_twice, _bertscore_model, _unread_settings):
        problem = check(spec)
        if problem:
            return problem
    return None


def _reserved_names(spec: ExperimentSpec) -> str | None:
    for index, model in enumerate(spec.models):
        if model.name in PACKAGED_EVALUATORS:
            return (f"models.{index}.name: {model.name!r} is reserved for the packaged "
                    f"{PACKAGED_EVALUATORS[model.name]}; give this model another name")
    return None


def _judge_twice(spec: ExperimentSpec) -> str | None:
    """The second evaluator is reported beside the first as another judge's view: the same model is none."""
    perplexity = spec.quality.perplexity
    if perplexity is None or perplexity.second_evaluator is None:
        return None
    first, second = spec.evaluator_model(), spec.evaluator_model(second=True)
    if first is None or second is None or (first.arch, first.source) != (second.arch, second.source):
        return None
    same = "" if perplexity.second_evaluator == perplexity.evaluator else f" (the same model as {perplexity.evaluator!r})"
    return (f"quality.perplexity.second_evaluator: {perplexity.second_evaluator!r} is the evaluator already{same}, so "
            "its rows would repeat the judge's; name another model, or remove it")


def _bertscore_model(spec: ExperimentSpec) -> str | None:
    bertscore = spec.quality.bertscore
    if bertscore is None or bertscore.model != PACKAGED_SMOLLM2:
        return None
    return (f"quality.bertscore.model: {PACKAGED_SMOLLM2!r} is the packaged perplexity judge, a causal LM, not an "
            f"encoder BERTScore embeds with; allowed: {PACKAGED_MINILM}, a local folder or a hub id such as "
            "roberta-large")


def _unread_settings(spec: ExperimentSpec) -> str | None:
    """A setting that departs from its default where no metric, sampler or model of the spec would read it: it would
    be ignored without a word. (A default written out changes nothing, and a spec dumped and read again keeps its
    defaults, so only a departure is refused.)"""
    quality = spec.quality
    default = type(quality)()
    changed = [f for f in type(quality.parity).model_fields if getattr(quality.parity, f) != getattr(default.parity, f)]
    for field in changed:
        value = getattr(quality.parity, field)
        if quality.perplexity is None and quality.bertscore is None:
            return (f"quality.parity.{field}: {value:g} is given, but neither perplexity nor bertscore is enabled, so no "
                    "parity is decided; enable one of them, or remove it")
        metric = {"perplexity_ratio": "perplexity", "bertscore_f1": "bertscore"}.get(field)
        if metric is not None and getattr(quality, metric) is None:
            return (f"quality.parity.{field}: {value:g} is given, but quality.{metric} is off, so nothing reads it; "
                    f"enable {metric}, or remove it")
    if quality.llama_sampled_samples != default.llama_sampled_samples and quality.llama_sampled_temperature is None:
        return (f"quality.llama_sampled_samples: {quality.llama_sampled_samples} is given, but "
                "quality.llama_sampled_temperature is not, so no sample is drawn; set the temperature, or remove it")
    if quality.llama_sampled_temperature is not None and all(family(m.arch).is_diffusion for m in spec.models):
        return ("quality.llama_sampled_temperature: given, but the spec has no autoregressive model to sample; add "
                "one, or remove it")
    return None
