"""Report-time quality analysis on constructed artifacts: long table, quality vs steps, S_parity, speedup."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from report.quality_analysis import (
    LONG_SCHEMA,
    NO_PARITY,
    PARITY_SCHEMA,
    VS_STEPS_SCHEMA,
    first_parity,
    parity_table,
    quality_long_table,
    quality_vs_steps,
)
from specs.results import Environment, Generation, QualityRecord, RunResult, RunStatus, Samples
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

N_PROMPTS = 24
PROMPT_IDS = list(range(N_PROMPTS))
STEPS = (8, 16, 32, 64)
LLAMA = ModelSpec(name="llama", arch="llama", source=SyntheticSource(synthetic="tiny"))
LLADA = ModelSpec(name="llada", arch="llada", source=SyntheticSource(synthetic="tiny"))
QUALITY = QualitySpec(
    bertscore=BertScoreSpec(),
    perplexity=PerplexitySpec(evaluator="llama"),
    elbo=ElboSpec(samples=4),
    llama_sampled_temperature=1.0,
)
ENV = Environment(hostname="h", platform="p", python="3.11", device="NVIDIA A100-SXM4-80GB")


def noise(seed: int, scale: float = 0.01) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, scale, N_PROMPTS)


def records(f1: np.ndarray, ppl: np.ndarray | None = None, elbo: bool = False) -> list[QualityRecord]:
    ppl = 10.0 - 5.0 * f1 if ppl is None else ppl
    return [
        QualityRecord(
            prompt_id=p,
            bertscore_precision=float(f),
            bertscore_recall=float(f),
            bertscore_f1=float(f),
            nll_per_token=float(np.log(q)),
            gen_ppl=float(q),
            elbo_nll_per_token=3.0 if elbo else None,
            repeated_bigram_rate=0.1,
            distinct_1=0.8,
            distinct_2=0.9,
        )
        for p, f, q in zip(PROMPT_IDS, f1, ppl)
    ]


def result(
    model: ModelSpec,
    f1: np.ndarray,
    latency: list[float],
    *,
    batch: int = 1,
    steps: int | None = None,
    sampled: np.ndarray | None = None,
    calibration: bool = True,
    weights: str = "real",
) -> RunResult:
    config = RunConfig(
        model=model,
        batch_size=batch,
        prompt_length=32,
        generation_length=64,
        steps=steps,
        block_length=32 if steps else None,
        remasking="low_confidence" if steps else None,
        controls=Controls(),
        prompts=Prompts(count=N_PROMPTS),
        prompt_ids=PROMPT_IDS,
        quality=QUALITY,
        evaluator=LLAMA,
    )
    return RunResult(
        run_id=f"{model.name}-{batch}-{steps}",
        sweep="s",
        config=config,
        status=RunStatus.OK,
        weights=weights,
        started_at="t0",
        finished_at="t1",
        environment=ENV,
        samples=Samples(timer="cuda_event", latency_e2e_s=latency, batch_index=[0] * len(latency)),
        generations=[
            Generation(prompt_id=p, token_ids=[1] * 64, text="x", useful_tokens=60) for p in PROMPT_IDS
        ],
        quality=records(f1, elbo=model.arch == "llada"),
        quality_sampled=None if sampled is None else records(sampled),
        calibration={"reference": records(np.ones(N_PROMPTS)), "unrelated": records(np.full(N_PROMPTS, 0.1))}
        if calibration
        else None,
        quality_note="synthetic weights: quality not meaningful; synthetic weights: quality not meaningful"
        if weights == "synthetic"
        else None,
    )


LLAMA_F1 = 0.8 + noise(0)
LLAMA_LATENCY = [2.0, 2.1, 1.9]


def sweep(
    curve: dict[int, np.ndarray], *, batches: tuple[int, ...] = (1,), weights: str = "real"
) -> list[RunResult]:
    """A LLaMA run and one LLaDA run per step count at each batch size; LLaDA latency = steps / 32 s."""
    out = []
    for batch in batches:
        out.append(
            result(LLAMA, LLAMA_F1, LLAMA_LATENCY, batch=batch, sampled=LLAMA_F1 - 0.2, weights=weights)
        )
        for k, f1 in curve.items():
            latency = [k / 32 * batch, k / 32 * batch * 1.05, k / 32 * batch * 0.95]
            out.append(result(LLADA, f1, latency, batch=batch, steps=k, weights=weights))
    return out


def parity_rows(
    results: list[RunResult], metric: str = "bertscore_f1", reference: str = "llama greedy"
) -> pl.DataFrame:
    table = parity_table(quality_long_table(results))
    assert table.schema == pl.Schema(PARITY_SCHEMA)
    return table.filter(
        (pl.col("row_kind") == "parity") & (pl.col("metric") == metric) & (pl.col("reference") == reference)
    )


def assert_ci_brackets(row: dict) -> None:
    assert row["s_parity_ci_low_steps"] <= row["s_parity_steps"] <= row["s_parity_ci_high_steps"]
    if row["speedup"] is not None:
        assert row["speedup_ci_low"] <= row["speedup"] <= row["speedup_ci_high"]


# ---------------------------------------------------------------- long table and curves


def test_long_table_has_a_row_per_run_continuation_prompt_and_metric() -> None:
    results = sweep({8: 0.5 + noise(1), 16: 0.9 + noise(2)})
    long = quality_long_table(results)
    assert long.schema == pl.Schema(LONG_SCHEMA)
    # LLaMA: generated + sampled + 2 calibrations, 8 metrics (no ELBO); LLaDA: generated with 9 metrics + 2
    # calibrations with 8.
    expected = N_PROMPTS * (4 * 8 + 2 * (9 + 2 * 8))
    assert long.height == expected
    llama = long.filter((pl.col("arch") == "llama") & (pl.col("continuation") == "generated"))
    assert llama["latency_e2e_median_s"].unique().to_list() == [2.0]
    assert llama["useful_tokens"].unique().to_list() == [60]
    assert long.filter(pl.col("continuation") == "sampled")["temperature"].unique().to_list() == [1.0]
    assert long.filter(pl.col("metric") == "elbo_nll_per_token")["arch"].unique().to_list() == ["llada"]


def test_failed_runs_and_runs_without_quality_are_left_out() -> None:
    ok = result(LLAMA, LLAMA_F1, LLAMA_LATENCY)
    failed = ok.model_copy(update={"status": RunStatus.OOM, "run_id": "oom"})
    unscored = ok.model_copy(update={"quality": None, "run_id": "none"})
    assert set(quality_long_table([ok, failed, unscored])["run_id"].unique()) == {ok.run_id}
    assert quality_long_table([]).schema == pl.Schema(LONG_SCHEMA)


def test_quality_vs_steps_gives_median_and_ci_over_prompts() -> None:
    curve = {8: 0.5 + noise(1), 16: 0.7 + noise(2), 32: 0.9 + noise(3)}
    table = quality_vs_steps(quality_long_table(sweep(curve)))
    assert table.schema == pl.Schema(VS_STEPS_SCHEMA)
    f1 = table.filter((pl.col("metric") == "bertscore_f1") & (pl.col("continuation") == "generated"))
    llada = f1.filter(pl.col("arch") == "llada").sort("steps")
    assert llada["steps"].to_list() == [8, 16, 32]
    for row, values in zip(llada.iter_rows(named=True), curve.values()):
        assert row["value_median"] == pytest.approx(float(np.median(values)))
        assert row["value_ci_low"] <= row["value_median"] <= row["value_ci_high"]
        assert row["n_prompts"] == N_PROMPTS and row["runs"] == 1
    assert f1.filter(pl.col("arch") == "llama")["steps"].to_list() == [None]
    assert set(table["continuation"].unique()) == {"generated", "sampled", "reference", "unrelated"}
    assert table.filter(pl.col("metric") == "elbo_nll_per_token")["metric_label"][0].endswith(
        "upper bound (nats/token)"
    )


# ---------------------------------------------------------------- S_parity


def test_parity_at_the_first_step() -> None:
    (row,) = parity_rows(sweep({8: 0.95 + noise(1), 16: 0.97 + noise(2)})).iter_rows(named=True)
    assert row["s_parity_steps"] == 8 and row["parity_fraction"] == 1.0
    assert (row["s_parity_ci_low_steps"], row["s_parity_ci_high_steps"]) == (8, 8)
    assert_ci_brackets(row)
    assert row["speedup"] == pytest.approx(2.0 / 0.25)
    assert row["statement"].startswith("parity at 8 steps")


def test_parity_in_the_middle_with_its_ci() -> None:
    curve = {8: 0.5 + noise(1), 16: 0.7 + noise(2), 32: 0.83 + noise(3), 64: 0.9 + noise(4)}
    (row,) = parity_rows(sweep(curve)).iter_rows(named=True)
    assert row["s_parity_steps"] == 32
    assert_ci_brackets(row)
    assert row["llada_value_at_parity"] == pytest.approx(float(np.median(curve[32])))
    assert row["reference_value"] == pytest.approx(float(np.median(LLAMA_F1)))
    assert row["speedup"] == pytest.approx(2.0 / 1.0)
    assert row["steps_swept"] == "8, 16, 32, 64" and row["n_prompts"] == N_PROMPTS


def test_no_parity_within_the_swept_steps() -> None:
    (row,) = parity_rows(sweep({8: 0.3 + noise(1), 16: 0.5 + noise(2)})).iter_rows(named=True)
    assert row["s_parity_steps"] is None and row["speedup"] is None
    assert row["s_parity_ci_low_steps"] is None and row["s_parity_ci_high_steps"] is None
    assert row["parity_fraction"] == 0.0
    assert row["statement"].startswith(NO_PARITY)
    assert row["llada_value_at_max_steps"] == pytest.approx(float(np.median(0.5 + noise(2))))


def test_borderline_parity_says_the_upper_bound_lies_beyond_the_sweep() -> None:
    # At 64 steps LLaDA is level with LLaMA up to noise: about half the replicates reach parity.
    curve = {16: 0.5 + noise(1), 32: 0.6 + noise(2), 64: 0.8 + noise(7)}
    (row,) = parity_rows(sweep(curve)).iter_rows(named=True)
    assert 0.025 < row["parity_fraction"] < 0.975
    assert row["s_parity_ci_high_steps"] is None
    if row["s_parity_steps"] is None:
        assert row["statement"].startswith(NO_PARITY)
    else:
        assert row["s_parity_ci_low_steps"] <= row["s_parity_steps"] and ">64" in row["statement"]
        assert row["speedup_ci_low"] <= row["speedup"] <= row["speedup_ci_high"]


def test_a_tie_counts_as_parity() -> None:
    # At 16 steps LLaDA equals LLaMA on every prompt: the medians tie in every (paired) bootstrap replicate.
    (row,) = parity_rows(sweep({8: LLAMA_F1 - 0.3, 16: LLAMA_F1.copy(), 32: LLAMA_F1 + 0.01})).iter_rows(
        named=True
    )
    assert row["s_parity_steps"] == 16
    assert (row["s_parity_ci_low_steps"], row["s_parity_ci_high_steps"]) == (16, 16)
    assert_ci_brackets(row)


def test_lower_is_better_metrics_reach_parity_from_above() -> None:
    curve = {8: 0.5 + noise(1), 16: 0.7 + noise(2), 32: 0.83 + noise(3), 64: 0.9 + noise(4)}
    (row,) = parity_rows(sweep(curve), metric="gen_ppl").iter_rows(named=True)
    assert row["higher_is_better"] is False
    assert row["s_parity_steps"] == 32  # ppl = 10 - 5 F1 falls below LLaMA's at the same step
    assert_ci_brackets(row)


def test_sampled_llama_is_a_second_reference() -> None:
    # LLaMA sampled is 0.2 worse: LLaDA reaches it sooner.
    curve = {8: 0.5 + noise(1), 16: 0.7 + noise(2), 32: 0.83 + noise(3), 64: 0.9 + noise(4)}
    (row,) = parity_rows(sweep(curve), reference="llama sampled").iter_rows(named=True)
    assert row["s_parity_steps"] == 16 and row["reference_temperature"] == 1.0
    assert_ci_brackets(row)


def test_a_row_and_a_speedup_at_every_batch_size() -> None:
    curve = {8: 0.5 + noise(1), 16: 0.7 + noise(2), 32: 0.83 + noise(3), 64: 0.9 + noise(4)}
    rows = parity_rows(sweep(curve, batches=(1, 4))).sort("batch_size")
    assert rows["batch_size"].to_list() == [1, 4]
    assert rows["speedup"].to_list() == pytest.approx([2.0, 0.5])  # LLaDA latency grows with the batch here
    for row in rows.iter_rows(named=True):
        assert_ci_brackets(row)


def test_elbo_has_no_parity_and_calibration_rows_show_good_and_chance() -> None:
    table = parity_table(quality_long_table(sweep({8: 0.5 + noise(1), 16: 0.9 + noise(2)})))
    assert "elbo_nll_per_token" not in table.filter(pl.col("row_kind") == "parity")["metric"].to_list()
    calibration = table.filter((pl.col("row_kind") == "calibration") & (pl.col("metric") == "bertscore_f1"))
    assert set(zip(calibration["reference_model"], calibration["reference"])) == {
        (model, label)
        for model in ("llama", "llada")
        for label in ("reference continuation (calibration)", "unrelated passage (calibration)")
    }
    good = calibration.filter(pl.col("reference").str.starts_with("reference"))["reference_value"].to_list()
    chance = calibration.filter(pl.col("reference").str.starts_with("unrelated"))["reference_value"].to_list()
    assert good == pytest.approx([1.0, 1.0]) and chance == pytest.approx([0.1, 0.1])
    assert table["row_kind"].to_list()[0] == "parity"


def test_synthetic_runs_are_flagged_once() -> None:
    table = parity_table(quality_long_table(sweep({8: 0.5 + noise(1)}, weights="synthetic")))
    assert table["quality_note"].unique().to_list() == ["synthetic weights: quality not meaningful"]


def test_fixed_seed_gives_the_same_table() -> None:
    results = sweep({8: 0.5 + noise(1), 16: 0.8 + noise(2), 32: 0.9 + noise(3)})
    assert parity_table(quality_long_table(results)).equals(parity_table(quality_long_table(results)))


def test_first_parity_is_vectorised() -> None:
    curve = np.array([[0.1, 0.5, 0.9], [0.9, 0.9, 0.9], [0.1, 0.1, 0.1]])
    assert first_parity(curve, np.array([0.5, 0.5, 0.5]), True).tolist() == [1, 0, -1]
    assert first_parity(curve, np.array([0.1, 0.1, 0.05]), False).tolist() == [0, -1, -1]


def test_empty_inputs_give_empty_tables_with_their_schemas() -> None:
    long = quality_long_table([])
    assert quality_vs_steps(long).schema == pl.Schema(VS_STEPS_SCHEMA)
    assert parity_table(long).schema == pl.Schema(PARITY_SCHEMA)
    # LLaDA without any LLaMA run: curves, but no parity rows.
    only_llada = [result(LLADA, 0.5 + noise(1), [1.0], steps=8, calibration=False)]
    assert parity_table(quality_long_table(only_llada)).height == 0
    assert quality_vs_steps(quality_long_table(only_llada)).height > 0
