"""The judge's-bias note names the judge of each perplexity row as the calibration records it: it speaks where the
AR model under test judges a row, and never calls an independent judge the model under test."""

from __future__ import annotations

import polars as pl

from report.analysis.quality import QualityData
from report.sections.quality import judge_note


def _quality(evaluator: str, second: str | None) -> QualityData:
    rows = [("gen_ppl", 13.9), *([("gen_ppl_second", 4.36)] if second else [])]
    by_setting = pl.DataFrame({
        "metric": [m for m, _ in rows], "arch": ["llama"] * len(rows), "model": ["llama-mini"] * len(rows),
        "continuation": ["generated"] * len(rows), "temperature": [0.0] * len(rows), "value": [v for _, v in rows],
    })  # fmt: skip
    judges = [("gen_ppl", evaluator, 23.6), *([("gen_ppl_second", second, 54.3)] if second else [])]
    calibration = pl.DataFrame({
        "metric": [m for m, _, _ in judges], "scored_by": [j for _, j, _ in judges],
        "text": ["human continuation"] * len(judges), "value": [v for _, _, v in judges],
    })  # fmt: skip
    empty = pl.DataFrame()
    return QualityData(empty, empty, by_setting, calibration, empty, empty, empty)


def test_an_independent_judge_gets_no_note() -> None:
    assert judge_note(_quality("packaged-smollm2", None)) is None


def test_the_ar_model_judging_the_headline_row_is_named_with_its_levels() -> None:
    note = judge_note(_quality("llama-mini", None))
    assert note is not None and note.startswith("Perplexity is judged by llama-mini, the LLaMA under test")
    assert "median perplexity of 13.9" in note and "the human continuation 23.6" in note


def test_a_self_judged_second_row_is_the_one_named_beside_an_independent_judge() -> None:
    note = judge_note(_quality("packaged-smollm2", "llama-mini"))
    assert note is not None and note.startswith("The second perplexity row is judged by llama-mini")
    assert "4.36" in note and "54.3" in note and "decides nothing" in note
    assert "packaged-smollm2" not in note and "headline" not in note
