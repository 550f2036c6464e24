"""The verdict's quality sentence names the judge, the reference, the margins and the test once, however many
sampler settings it speaks of; each metric's result carries the test's power and the step counts whose text is
degenerate; a test with too few prompts says it cannot decide."""

from __future__ import annotations

from report.answer.pairing.build import VANILLA_PAIRING, Pairing, SParity
from report.answer.pairing.pairs import sides_of
from report.answer.verdict.quality import quality_sentence
from tests.test_report_verdict import PPL, pairing, point

GUARDED = PPL.model_copy(update={"power": 0.08, "prompts_for_power": 1760, "coverage": 0.936,
                                 "degenerate_steps": [1, 2], "human_diversity": 1.0})


def at_setting(setting: str, steps: int, s: SParity) -> Pairing:
    p = pairing(steps, [point(1, 2.0, 1.8, 2.2)], 4.0, s_parity=(s,))
    return p.model_copy(update={"sampler_setting": setting, "pairing": VANILLA_PAIRING})


def sentence(group: list[Pairing]) -> str:
    return quality_sentence(group, sides_of([group[0].pair]))


def test_the_judge_reference_margin_and_test_are_named_once_across_settings() -> None:
    text = sentence([at_setting(f"threshold {t}", 4, GUARDED) for t in (0.5, 0.7, 0.9)])
    for named in ("judged by packaged-smollm2", "against llama-mini greedy", "within 10%",
                  "two one-sided test at 5% over 24 paired prompts"):
        assert text.count(named) == 1, named
    assert text.count("(power 8%; 80% needs 1760 prompts)") == 3  # each setting's own test
    assert "degenerate at 1, 2 steps" in text


def test_a_curve_degenerate_everywhere_says_its_perplexity_says_nothing() -> None:
    everywhere = GUARDED.model_copy(update={"degenerate_steps": [4], "steps": None, "bound": None})
    text = sentence([pairing(4, [point(1, 2.0, 1.8, 2.2)], 4.0, s_parity=(everywhere,))])
    assert "perplexity: no parity up to 4 steps" in text
    assert "its text degenerate at every step count swept, so its perplexity says nothing of its quality" in text


def test_too_few_prompts_cannot_decide() -> None:
    few = PPL.model_copy(update={"decides": False, "steps": None, "n_prompts": 3,
                                 "gate": "cannot decide: 3 paired prompts, and a two one-sided test at 0.05 needs at least 5"})
    text = sentence([pairing(4, [point(1, 2.0, 1.8, 2.2)], 4.0, s_parity=(few,))])
    assert "perplexity decides no parity: cannot decide: 3 paired prompts" in text
    assert "no parity up to" not in text


def test_each_metric_names_its_own_reference_where_they_differ() -> None:
    human = GUARDED.model_copy(update={"reference": "human continuation"})
    bert = GUARDED.model_copy(update={"metric": "bertscore_f1", "reference": "llama-mini sampled (T = 1)", "judge": None})
    text = sentence([pairing(4, [point(1, 2.0, 1.8, 2.2)], 4.0, s_parity=(bert, human))])
    assert "against llama-mini sampled (T = 1) for BERTScore F1 and human continuation for perplexity" in text
