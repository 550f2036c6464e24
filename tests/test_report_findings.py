"""The Findings on constructed artifacts: a known crossover B*, the roofline's B* for the 8B shapes on an A100,
and S_parity with its speedups at the first step, at a middle step after a noisy early crossing, and never."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from test_quality_analysis import LLAMA_F1, noise, sweep

from report.answer.findings import (
    CROSSOVER_ANCHOR,
    PARITY_ANCHOR,
    crossover_table,
    findings_table,
    findings_text,
)
from report.analysis.intervals import crossing
from report.analysis.parity import parity_table
from report.analysis.quality import quality_long_table
from report.table.flat import results_table
from roofline.crossover import predicted_crossover, throughput_ratio
from roofline.hardware import get_hardware

A100 = get_hardware("a100-sxm4-80gb")


def throughput_table(llama: dict[int, float], llada: dict[int, dict[int, float]]) -> pl.DataFrame:
    """The flat table's columns the crossover reads: median tokens/s per (model, steps, batch), and the one
    latency repetition that gives it (N_out = 64)."""
    rows = [("llama", "llama", None, None, b, t) for b, t in llama.items()]
    rows += [("llada", "llada", k, 32, b, t) for k, by_batch in llada.items() for b, t in by_batch.items()]
    frame = pl.DataFrame(rows, schema={"arch": pl.String, "model": pl.String, "steps": pl.Int64,
                                       "block_length": pl.Int64, "batch_size": pl.Int64,
                                       "tokens_per_s_median": pl.Float64}, orient="row")
    return frame.with_columns(
        pl.concat_list(pl.col("batch_size") * 64 / pl.col("tokens_per_s_median")).alias("latency_e2e_s_samples"),
        pl.lit("ok").alias("status"), pl.lit("cpu").alias("hardware"), pl.lit(32, pl.Int64).alias("prompt_length"),
        pl.lit(64, pl.Int64).alias("generation_length"), pl.lit("low_confidence").alias("remasking"),
        pl.lit(None, pl.Float64).alias("cfg_scale"), pl.lit("float32").alias("dtype"),
    )


def test_a_known_crossover_is_interpolated_between_measured_batches() -> None:
    # LLaMA 100/400/1600 tokens/s at B = 1/4/16; LLaDA at 8 steps 300/600/800: the ratio goes 1/3, 2/3, 2.
    # In log B and log ratio the crossing lies at 4^(1 + ln(3/2) / ln 3) = 6.68.
    table = throughput_table({1: 100, 4: 400, 16: 1600},
                             {8: {1: 300, 4: 600, 16: 800}, 2: {1: 900, 4: 2400, 16: 3000}, 64: {1: 50, 4: 60, 16: 70}})
    rows = {r["steps"]: r for r in crossover_table(table, {}, {}).iter_rows(named=True)}
    assert rows[8]["b_star"] == pytest.approx(4 ** (1 + np.log(1.5) / np.log(3)))
    assert rows[8]["b_star_bound"] == "=" and rows[8]["batch_sizes"] == "1, 4, 16"
    assert rows[8]["b_star_tokens_per_s"] == pytest.approx(100 * rows[8]["b_star"])  # on LLaMA's line
    assert (rows[2]["b_star"], rows[2]["b_star_bound"]) == (16.0, ">")  # LLaDA ahead at every batch
    assert (rows[64]["b_star"], rows[64]["b_star_bound"]) == (1.0, "<=")  # LLaMA ahead already at B = 1
    assert rows[8]["predicted_b_star"] is None and rows[8]["profile"] is None  # no profile given


def test_a_crossover_that_falls_back_is_not_a_crossover() -> None:
    # LLaMA ahead at B = 4 by noise, behind again at 16, ahead from 64 on: B* lies between 16 and 64.
    b_star, bound = crossing([1, 4, 16, 64], [1 / r for r in (0.5, 1.1, 0.8, 2.0)])
    assert bound == "=" and 16 < b_star < 64


def test_the_roofline_predicts_b_star_for_the_8b_shapes_on_an_a100() -> None:
    # 512 + 512 tokens, block 64: LLaDA's steps are compute-bound (time grows with B), LLaMA's batch-1 decode is
    # bandwidth-bound (nearly free to batch): LLaMA overtakes between batch 1 and 8 at 16-64 steps.
    # On the roofs alone (A100's host floor per eager forward set aside; the next assertion puts it back).
    roofs = A100.model_copy(update={"host_floor_s": 0.0})
    shapes = {"llama_shape": None, "llada_shape": None, "prompt_len": 512, "gen_len": 512, "block_length": 64}
    predicted = {k: predicted_crossover(roofs, steps=k, **shapes) for k in (16, 32, 64)}
    assert all(1 < b < 8 for b in predicted.values()), predicted
    assert predicted[16] > predicted[32] > predicted[64]  # more steps, earlier crossover
    below = throughput_ratio(int(predicted[16]), roofs, steps=16, **shapes)
    above = throughput_ratio(int(predicted[16]) + 1, roofs, steps=16, **shapes)
    assert below < 1 <= above
    assert predicted_crossover(roofs, steps=256, **shapes) == 1.0  # LLaMA ahead at batch 1
    # The host floor charges LLaMA per token and LLaDA per step: it holds LLaMA back longer.
    assert predicted_crossover(A100, steps=16, **shapes) > predicted[16]


def test_a_dispatch_floor_moves_the_predicted_crossover() -> None:
    # A small model at small batch is launch-bound: both sides pay per kernel, LLaDA per step, LLaMA per token.
    from specs.registry import preset_shape

    floor = A100.model_copy(update={"dispatch_s": 20e-6, "host_floor_s": 0.0})
    common = {"llama_shape": preset_shape("llama", "tiny"), "llada_shape": preset_shape("llada", "tiny"),
              "prompt_len": 32, "gen_len": 64, "steps": 8, "block_length": 32}
    assert predicted_crossover(floor, **common) != predicted_crossover(A100, **common)


def findings_of(curve: dict[int, np.ndarray]) -> pl.DataFrame:
    results = sweep(curve, batches=(1, 4))
    table = results_table(results)
    parity = parity_table(quality_long_table(results), table)
    return findings_table(parity, crossover_table(table, {}, {}))


def values(findings: pl.DataFrame, prefix: str) -> list[str]:
    return findings.filter(pl.col("finding").str.starts_with(prefix))["value"].to_list()


def test_findings_with_parity_at_the_first_step() -> None:
    findings = findings_of({8: 0.95 + noise(1), 16: 0.97 + noise(2)})
    (f1,) = [v for v in values(findings, "S_parity: llada, BERTScore F1 vs llama greedy")]
    assert f1.startswith("<= 8 steps (replicates over prompts put it at 8 steps (the grid's resolution, not a "
                         "confidence interval); 100% of 2000 bootstrap replicates reach parity)")
    speedups = values(findings, "speedup at S_parity (BERTScore F1)")
    assert [s.split("x")[0] for s in speedups] == [">= 8", ">= 2"]  # LLaMA 2 s; LLaDA 8/32 s x B: lower bounds
    assert findings.filter(pl.col("finding").str.starts_with("speedup"))["source"].unique().to_list() == [PARITY_ANCHOR]


def test_findings_at_a_middle_step_after_a_noisy_early_crossing() -> None:
    findings = findings_of({8: 0.83 + noise(1), 16: 0.6 + noise(2), 32: 0.85 + noise(3), 64: 0.9 + noise(4)})
    (f1,) = values(findings, "S_parity: llada, BERTScore F1")
    assert f1.startswith("32 steps (replicates over prompts put it at ") and "CI" not in f1
    b1, b4 = values(findings, "speedup at S_parity (BERTScore F1)")
    assert b1.startswith("2x [") and b4.startswith("0.5x [")
    assert "S_parity held at 32" in b1 and "goodput 2x" in b1


def test_findings_without_parity() -> None:
    findings = findings_of({8: 0.3 + noise(1), 16: 0.5 + noise(2)})
    (f1,) = values(findings, "S_parity: llada, BERTScore F1")
    assert f1.startswith("none within 8, 16 steps (0% of 2000 bootstrap replicates reach parity)")
    assert values(findings, "speedup at S_parity (BERTScore F1)") == ["no S_parity: no speedup"] * 2


def test_findings_name_the_headline_reference_and_the_repetition_beside_perplexity() -> None:
    findings = findings_of({8: 0.5 + noise(1), 16: 0.7 + noise(2), 32: 0.83 + noise(3), 64: 0.9 + noise(4)})
    (ppl,) = values(findings, "S_parity: llada, perplexity vs llama greedy")  # the timed text heads perplexity
    assert ppl.startswith("16 steps") and "repeated-bigram rate 0.1 at S_parity vs 0.1 for the reference" in ppl
    assert "within 10% (|Δ log ppl| ≤ log 1.1) by a two one-sided test at 0.05" in ppl
    crossings = findings.filter(pl.col("finding").str.starts_with("B*"))
    assert crossings.height == 4 and crossings["source"].unique().to_list() == [CROSSOVER_ANCHOR]
    text = findings_text(findings)
    assert text.splitlines()[0] == "Findings" and "N_out = 64 (prompt 32)" in text


def test_a_warning_opens_the_findings() -> None:
    results = sweep({8: LLAMA_F1 + 0.1})
    table = results_table(results)
    findings = findings_table(parity_table(quality_long_table(results), table), crossover_table(table, {}, {}),
                              ["WARNING: llada has not learned beyond unigram statistics"])
    assert findings.row(0, named=True)["finding"] == "WARNING" and findings["warning"][0]
