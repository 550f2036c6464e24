"""Parity that degenerate text cannot win, and a test that says when it cannot decide: repeated text is caught and
human text passes; a degenerate setting holds no parity and a degenerate reference decides none; too few prompts
cannot decide; a margin wider than the gap to an unrelated passage is blamed, not the metric; NaN is never parity;
absurd margins are refused at plan time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from report.analysis.diversity import Floor, median_diversity
from report.analysis.equivalence import MARGIN_TOO_WIDE, TOO_FEW, Margin, min_prompts, worse_by
from report.analysis.parity import margin_of, parity_table
from report.analysis.parity_text import DEGENERATE_REFERENCE
from report.analysis.quality import quality_by_setting, quality_long_table
from report.table.flat import results_table
from specs.controls import ParitySpec
from specs.loader import SpecError
from tests.spec_fixtures import mutated, spec_from
from tests.test_quality_analysis import LLAMA_F1, noise, sweep
from workers.quality.degeneracy import degeneracy, words

PROMPTS = Path(__file__).resolve().parents[1] / "specs" / "data" / "prompts.txt"
PPL = Margin("log", math.log(1.1), "within 10%")


def passages(count: int = 24) -> list[list[str]]:
    return [words(p) for p in PROMPTS.read_text().split("\n\n") if p.strip()][:count]


def distinct_2_median(texts: list[str]) -> float:
    return float(np.median([degeneracy(t).distinct_2 for t in texts]))


def test_repeated_text_is_caught_and_human_text_passes() -> None:
    # The human continuations (words 40-80 of each shipped passage) set the floor; held to it: other human text
    # passes, and text that loops over a few words, as one-step LLaDA writes, is caught.
    texts = passages()
    human = distinct_2_median([" ".join(w[40:80]) for w in texts])
    floor = Floor(human, ParitySpec().diversity_margin)
    other_human = distinct_2_median([" ".join(w[120:160]) for w in texts])
    looping = distinct_2_median([" ".join((w[40:46] * 7)[:40]) for w in texts])
    # A long loop, a sentence said twice: half of its bigrams repeat.
    said_twice = distinct_2_median([" ".join(w[40:60] * 2) for w in texts])
    assert human > 0.9 and not floor.degenerate(human) and not floor.degenerate(other_human)
    assert floor.degenerate(looping) and floor.degenerate(said_twice)


def with_diversity(results: list, value: float, *, model: str, steps: int | None = None, text: str = "quality") -> list:
    """The runs, with `value` as the distinct-2 of one model's (and step count's) texts of one kind."""
    out = []
    for run in results:
        if run.config.model.name == model and (steps is None or run.config.steps == steps):
            texts = [r.model_copy(update={"distinct_2": value, "repeated_bigram_rate": 1 - value})
                     for r in getattr(run, text)]
            run = run.model_copy(update={text: texts})
        out.append(run)
    return out


def rows(results: list, metric: str = "bertscore_f1", settings: ParitySpec = ParitySpec(), **kinds: object) -> pl.DataFrame:
    table = parity_table(quality_long_table(results), results_table(results), settings)
    return table.filter(pl.col("metric") == metric).filter(
        pl.all_horizontal(pl.col(k) == v for k, v in kinds.items()) if kinds else pl.lit(True))


def test_a_degenerate_setting_holds_no_parity() -> None:
    # LLaDA matches LLaMA at every step count, but its 8-step text repeats: parity from 16 steps, not 8.
    equal = {k: LLAMA_F1 + noise(k, 0.001) for k in (8, 16, 32)}
    plain = rows(sweep(equal), reference="llama greedy").row(0, named=True)
    assert plain["s_parity_steps"] == 8 and plain["degenerate_steps"] == []
    results = with_diversity(sweep(equal), 0.4, model="llada", steps=8)
    row = rows(results, reference="llama greedy").row(0, named=True)
    assert row["s_parity_steps"] == 16 and row["degenerate_steps"] == [8]
    assert row["human_diversity"] == pytest.approx(0.9) and row["diversity_margin"] == pytest.approx(0.1)
    assert "degenerate at 8 steps" in row["statement"]
    assert 8 not in row["replicate_steps"]  # no bootstrap replicate may find parity on degenerate text
    by_setting = quality_by_setting(quality_long_table(results), 0.1).filter(
        (pl.col("metric") == "gen_ppl") & (pl.col("model") == "llada"))
    flagged = dict(zip(by_setting["steps"].to_list(), by_setting["degenerate"].to_list()))
    assert flagged == {8: True, 16: False, 32: False}


def test_a_degenerate_reference_decides_nothing_and_never_heads_the_report() -> None:
    results = with_diversity(sweep({8: LLAMA_F1, 16: LLAMA_F1}), 0.5, model="llama")
    greedy = rows(results, reference="llama greedy").row(0, named=True)
    assert greedy["reference_degenerate"] and not greedy["decides"] and not greedy["headline"]
    assert greedy["gate"].startswith(DEGENERATE_REFERENCE) and "distinct-2 0.50" in greedy["gate"]
    sampled = rows(results, reference="llama sampled").row(0, named=True)
    assert sampled["headline"] and sampled["decides"] and not sampled["reference_degenerate"]


def test_with_fewer_prompts_than_the_test_needs_it_cannot_decide() -> None:
    assert min_prompts(0.05) == 5 and min_prompts(0.01) == 7
    results = sweep({8: LLAMA_F1, 16: LLAMA_F1})
    long = quality_long_table(results).filter(pl.col("prompt_id") < 3)
    table = parity_table(long, results_table(results)).filter(pl.col("metric") == "gen_ppl")
    assert table.height and not table["decides"].any()
    assert table["statement"][0].startswith(f"{TOO_FEW}: 3 paired prompts, and a two one-sided test at 0.05 needs "
                                            "at least 5")


def test_a_margin_wider_than_the_gap_to_an_unrelated_passage_is_blamed() -> None:
    # The unrelated passage's perplexity (9.5) is surely worse than the reference's (5), by a ratio of 1.9: a margin
    # of 2 cannot tell them apart, and the words say the margin is too wide, not that the metric is at chance.
    row = rows(sweep({8: LLAMA_F1, 16: LLAMA_F1}), "gen_ppl", ParitySpec(perplexity_ratio=2.0)).row(0, named=True)
    assert not row["decides"] and row["gate"].startswith(MARGIN_TOO_WIDE)
    assert "chance" not in row["statement"]


def test_a_missing_score_is_never_parity() -> None:
    d = worse_by(np.array([math.nan, 10.0, math.inf]), np.array([10.0, math.nan, math.inf]), PPL)
    assert d[0] == math.inf and d[1] == math.inf and d[2] == 0.0


def test_a_small_margin_prints_with_its_digits() -> None:
    assert margin_of("gen_ppl", ParitySpec(perplexity_ratio=1.004)).text.startswith("within 0.4% (")
    assert margin_of("gen_ppl", ParitySpec(perplexity_ratio=1.1)).text.startswith("within 10% (")


@pytest.mark.parametrize("field, value", [("perplexity_ratio", 1e6), ("perplexity_ratio", 1e300),
                                          ("bertscore_f1", 0.5)])
def test_absurd_margins_are_refused_at_plan_time_in_one_line(field: str, value: float) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from(mutated(lambda d: d["quality"].setdefault("parity", {}).update({field: value})))
    message = str(caught.value)
    assert f": quality.parity.{field}: " in message and "\n" not in message and "at most" in message


def test_median_diversity_takes_each_prompts_median_over_its_samples() -> None:
    rows_ = pl.DataFrame({"run_id": ["a"] * 6, "prompt_id": [0, 0, 0, 1, 1, 1], "metric": ["distinct_2"] * 6,
                          "value": [0.1, 0.9, 0.8, 0.5, 0.6, 0.7]})
    assert median_diversity(rows_) == pytest.approx(0.7)  # medians 0.8 and 0.6
