"""The flat results table, the statistics behind it, and the derived data the figures plot."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from report_fixtures import A100, H100, SMOKE_LIKE, write_sweep

from report.analysis import stats
from report.analysis.derived import itl_by_context, memory_grid, pareto_front, step_time_by_length
from report.table.flat import QUALITY_METRICS, SCHEMA, results_table
from specs.artifacts import SweepLayout, load_results
from specs.results import RunResult, RunStatus, Samples


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory):
    return load_results(SweepLayout(write_sweep(tmp_path_factory.mktemp("sweep"))))


@pytest.fixture(scope="module")
def table(results) -> pl.DataFrame:
    return results_table(results)


def test_one_row_per_run_with_the_declared_schema(results, table) -> None:
    assert table.height == len(results)
    assert table["run_id"].n_unique() == len(results)
    assert dict(table.schema) == SCHEMA
    assert table["arch"][0] == "llama"  # the baseline first


def test_latency_and_throughput_statistics_come_from_the_raw_samples(results, table) -> None:
    by_id = {r.run_id: r for r in results}
    for row in table.filter(pl.col("status") == "ok").iter_rows(named=True):
        samples = by_id[row["run_id"]].samples.latency_e2e_s
        assert row["latency_e2e_s_samples"] == samples
        assert row["latency_e2e_s_median"] == pytest.approx(float(np.median(samples)))
        assert row["latency_e2e_s_p25"] == pytest.approx(float(np.quantile(samples, 0.25)))
        assert row["latency_e2e_s_interval_low"] <= row["latency_e2e_s_median"] <= row["latency_e2e_s_interval_high"]
        # Five repetitions: the interval is their range, and says so.
        assert row["latency_e2e_s_interval"] == "range"
        assert (row["latency_e2e_s_interval_low"], row["latency_e2e_s_interval_high"]) == (min(samples), max(samples))
        assert row["latency_e2e_s_mean"] == pytest.approx(float(np.mean(samples)))
        assert row["latency_e2e_s_sd"] == pytest.approx(float(np.std(samples, ddof=1)))
        assert row["latency_e2e_s_cv"] == pytest.approx(row["latency_e2e_s_sd"] / row["latency_e2e_s_mean"])
        tokens = [row["batch_size"] * row["generation_length"] / s for s in samples]
        assert row["tokens_per_s_median"] == pytest.approx(float(np.median(tokens)))
        assert row["sequence_length"] == row["prompt_length"] + row["generation_length"]


def test_llama_and_llada_specific_columns(results, table) -> None:
    llama = table.filter((pl.col("arch") == "llama") & (pl.col("status") == "ok")).row(0, named=True)
    run = next(r for r in results if r.run_id == llama["run_id"])
    passes = [float(np.mean(rep)) for rep in run.samples.itl_s]
    assert llama["itl_pass_s_median"] == pytest.approx(float(np.median(passes)))
    flat = [v for rep in run.samples.itl_s for v in rep]
    assert [llama[f"itl_token_s_p{p}"] for p in (50, 90, 99)] == pytest.approx(list(np.percentile(flat, [50, 90, 99])))
    assert llama["decode_s_median"] == pytest.approx(float(np.median([sum(rep) for rep in run.samples.itl_s])))
    assert llama["ttft_s_median"] == pytest.approx(float(np.median(run.samples.ttft_s)))
    assert llama["step_s_median"] is None and llama["steps"] is None
    llada = table.filter((pl.col("arch") == "llada") & (pl.col("status") == "ok")).row(0, named=True)
    assert llada["ttft_s_median"] is None and llada["step_s_median"] > 0
    assert llada["nfe"] == llada["steps"] and llada["num_blocks"] == llada["generation_length"] // llada["block_length"]


def test_ttft_percentiles_beside_its_median(results, table) -> None:
    llama = table.filter((pl.col("arch") == "llama") & (pl.col("status") == "ok")).row(0, named=True)
    ttft = next(r for r in results if r.run_id == llama["run_id"]).samples.ttft_s
    assert [llama[f"ttft_s_p{p}"] for p in (50, 90, 99)] == pytest.approx(list(np.percentile(ttft, [50, 90, 99])))
    assert llama["ttft_s_p50"] == pytest.approx(llama["ttft_s_median"])
    assert llama["ttft_s_interval"] == "range" and llama["ttft_s_n"] == len(ttft)


def test_diffusion_decoding_under_serving_names(results, table) -> None:
    llada = table.filter((pl.col("arch") == "llada") & (pl.col("status") == "ok"))
    for row in llada.iter_rows(named=True):
        run = next(r for r in results if r.run_id == row["run_id"])
        # The fixture's schedule commits B x N_out / steps tokens a step: N_out / steps a sequence.
        assert row["tokens_per_step_mean"] == pytest.approx(row["generation_length"] / row["steps"])
        assert row["steps_per_block_mean"] == pytest.approx(row["steps"] / row["num_blocks"])
        rates = [sum(c) / sum(t) for t, c in zip(run.samples.step_s, run.samples.tokens_committed)]
        assert row["committed_tokens_per_s_median"] == pytest.approx(float(np.median(rates)))
        # Every step is timed here, so it is the end-to-end throughput.
        assert row["committed_tokens_per_s_median"] == pytest.approx(row["tokens_per_s_median"], rel=1e-9)
    llama = table.filter(pl.col("arch") == "llama")
    assert llama["tokens_per_step_mean"].null_count() == llama["committed_tokens_per_s_median"].null_count() \
        == llama.height


def test_sessions_pooled_give_the_decoding_columns_of_every_repetition(table) -> None:
    from report.table.sessions import pool_sessions

    run = table.filter((pl.col("arch") == "llada") & (pl.col("status") == "ok")).head(1)
    slower = [[t * 2 for t in rep] for rep in run["step_s_samples"][0].to_list()]  # a second session at half the speed
    again = run.with_columns(pl.lit(1, pl.Int64).alias("session"), pl.lit("second-session").alias("run_id"),
                             pl.Series("step_s_samples", [slower]))
    pooled = pool_sessions(pl.concat([run, again])).row(0, named=True)
    committed = run["tokens_committed_samples"][0].to_list() * 2
    steps = run["step_s_samples"][0].to_list() + slower
    rates = [sum(c) / sum(t) for t, c in zip(steps, committed)]
    assert pooled["sessions"] == 2
    assert pooled["committed_tokens_per_s_median"] == pytest.approx(float(np.median(rates)))
    assert pooled["committed_tokens_per_s_median"] < run["committed_tokens_per_s_median"][0]
    assert pooled["tokens_per_step_mean"] == pytest.approx(run["tokens_per_step_mean"][0])


def test_a_confidence_rule_takes_fewer_steps_per_block(tmp_path: Path) -> None:
    from report_fixtures import VARIANTS

    table = results_table(load_results(SweepLayout(write_sweep(tmp_path, VARIANTS))))
    rule = table.filter((pl.col("impl") == "prefix-t09") & (pl.col("steps") == 32)).row(0, named=True)
    forwards = rule["forwards_samples"]
    assert rule["steps_per_block_mean"] == pytest.approx(float(np.mean(forwards)) / rule["num_blocks"])
    assert rule["steps_per_block_mean"] < 32 / rule["num_blocks"]
    assert rule["tokens_per_step_mean"] > rule["generation_length"] / 32


def test_failures_are_rows_without_numbers(table) -> None:
    oom = table.filter(pl.col("status") == "oom")
    assert oom.height == 12  # LLaDA at batch 32, N_out 128: 3 steps x 2 blocks x 2 GPUs
    assert oom["latency_e2e_s_median"].null_count() == oom.height
    assert oom["at_failure_allocated_bytes"].null_count() == 0
    crashed = table.filter(pl.col("status") == "crashed")
    assert crashed["hardware"].to_list() == ["unknown", "unknown"]
    assert table.filter(pl.col("status") == "error")["error"].to_list() == ["RuntimeError: boom"] * 2


def test_hardware_memory_and_quality_columns(table) -> None:
    ok = table.filter(pl.col("status") == "ok")
    assert set(ok["hardware"].unique()) == {A100, H100}
    assert set(ok["peak_memory_kind"].unique()) == {"reserved"}
    assert (ok["peak_memory_bytes"] == ok["peak_reserved_bytes"]).all()
    a100 = ok.filter(pl.col("hardware") == A100).row(0, named=True)
    assert a100["bertscore_f1_mean"] == pytest.approx(float(np.mean(a100["bertscore_f1_samples"])))
    assert a100["quality_prompts"] == 8
    h100 = ok.filter(pl.col("hardware") == H100)
    assert h100["bertscore_f1_mean"].null_count() == h100.height
    assert set(h100["quality_note"].unique()) == {"quality disabled on this device"}
    assert {f"{m}_samples" for m in QUALITY_METRICS} <= set(table.columns)


def test_cpu_runs_use_the_tensors_peak_else_the_rss_growth(tmp_path: Path) -> None:
    results = load_results(SweepLayout(write_sweep(tmp_path, SMOKE_LIKE)))
    table = results_table(results)
    assert set(table["hardware"].unique()) == {"cpu"}
    assert set(table["peak_memory_kind"].unique()) == {"tensors"}
    assert (table["peak_memory_bytes"] == table["peak_tensor_bytes"]).all()
    older = results_table([r.model_copy(update={"memory": r.memory.model_copy(update={"peak_tensor_bytes": None})})
                           for r in results])
    assert set(older["peak_memory_kind"].unique()) == {"rss_delta"}
    assert table["peak_reserved_bytes"].null_count() == table.height
    assert set(table["weights"].unique()) == {"synthetic"}


def test_empty_sweep_gives_an_empty_table_with_the_schema() -> None:
    empty = results_table([])
    assert empty.height == 0 and dict(empty.schema) == SCHEMA


def test_the_table_round_trips_through_parquet(table, tmp_path: Path) -> None:
    path = tmp_path / "results.parquet"
    table.write_parquet(path)
    back = pl.read_parquet(path)
    assert back.shape == table.shape
    assert back["itl_s_samples"].to_list() == table["itl_s_samples"].to_list()


# ------------------------------------------------------------------ stats


def test_summary_of_known_samples() -> None:
    summary = stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (summary.n, summary.median, summary.p25, summary.p75) == (5, 3.0, 2.0, 4.0)
    assert (summary.low, summary.high, summary.interval) == (1.0, 100.0, stats.RANGE)
    assert summary.mean == 22.0 and summary.cv == pytest.approx(summary.sd / 22.0)


def test_three_repetitions_give_a_range_never_a_95_percent_ci() -> None:
    # The old rule bootstrapped three values and called the result a 95% CI: it is their min-max, which covers
    # the median of the population only 75% of the time. Below six samples it is a range, and labelled one.
    three = stats.interval([1.0, 1.2, 1.1])
    assert (three.low, three.high, three.kind, three.label) == (1.0, 1.2, stats.RANGE, "range, n=3")
    # From six samples up: a BCa bootstrap CI (scipy), inside the range and labelled with its sample count.
    ten = np.random.default_rng(0).lognormal(0.0, 0.1, 10)
    ci = stats.interval(ten)
    assert ci.kind == stats.CI and ci.label == "95% BCa CI, n=10"
    assert ten.min() <= ci.low <= float(np.median(ten)) <= ci.high <= ten.max()
    assert (ci.low, ci.high) != (ten.min(), ten.max())


def test_interval_is_deterministic_and_degenerate_cases_are_defined() -> None:
    values = [0.3, 0.1, 0.5, 0.2, 0.9, 0.4]
    assert stats.interval(values) == stats.interval(values)
    assert stats.interval([2.5]) == stats.Interval(2.5, 2.5, stats.RANGE, 1)
    assert stats.interval([]).kind is None and stats.interval([]).label == "no samples"
    assert stats.interval([1.0] * 8) == stats.Interval(1.0, 1.0, stats.CI, 8)
    assert stats.summarize(None).median is None
    assert stats.median([float("nan"), 1.0]) == 1.0
    assert stats.percentiles([1.0, 2.0, 3.0]) == {50: 2.0, 90: pytest.approx(2.8), 99: pytest.approx(2.98)}


def test_rank_interval_keeps_worst_ranked_samples() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, np.inf, np.inf])
    spread = stats.rank_interval(values)
    assert spread.kind == stats.PERCENTILE_CI and spread.low in values and spread.high == np.inf


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=1e-6, max_value=1e3, allow_nan=False), min_size=1, max_size=12))
# Two equal largest values: their midpoint, a resample's median, once rounded one step above the maximum.
@example([754.0, 1.0, 1.0, 755.7749875292317, 755.7749875292317, 3.0])
def test_summary_bounds_are_ordered(values: list[float]) -> None:
    s = stats.summarize(values)
    assert min(values) <= s.low <= s.high <= max(values)
    assert s.p25 <= s.median <= s.p75
    assert s.interval == (stats.RANGE if len(values) < stats.MIN_CI_SAMPLES else stats.CI) or (
        s.interval == stats.PERCENTILE_CI)


def test_itl_is_the_studys_definition() -> None:
    # (L_e2e - TTFT) / (N_out - 1): host work between the timed decode passes counts. The old column was the
    # mean of the timed passes alone (here 10 ms, against the study's 12 ms).
    from report_fixtures import FixtureGrid, _configs, _environment, run_id_of

    grid = FixtureGrid(hardware=FixtureGrid().hardware[:1], generation_lengths=(5,), batch_sizes=(1,), steps=())
    config = next(c for c in _configs(grid, grid.hardware[0]) if c.model.arch == "llama")
    passes = [[0.010] * 4] * 3
    result = RunResult(
        run_id=run_id_of(config), sweep="s", config=config, status=RunStatus.OK, weights="real", started_at="t",
        finished_at="t", environment=_environment(grid, grid.hardware[0]),
        samples=Samples(timer="cuda_event", latency_e2e_s=[0.098] * 3, batch_index=[0, 0, 0], ttft_s=[0.05] * 3,
                        itl_s=passes),
    )
    row = results_table([result]).row(0, named=True)
    assert row["itl_s_median"] == pytest.approx((0.098 - 0.05) / 4)
    assert row["itl_pass_s_median"] == pytest.approx(0.010)


def test_goodput_and_tokens_per_forward(table) -> None:
    llada = table.filter((pl.col("arch") == "llada") & (pl.col("status") == "ok")).row(0, named=True)
    assert llada["tokens_per_forward"] == pytest.approx(llada["generation_length"] / llada["steps"])
    assert llada["goodput_tokens_per_s_median"] == pytest.approx(
        llada["tokens_per_s_median"] * llada["useful_fraction"])
    llama = table.filter((pl.col("arch") == "llama") & (pl.col("status") == "ok")).row(0, named=True)
    assert llama["tokens_per_forward"] == 1.0
    # The fixture's continuations are 0-2 tokens short of N_out: never under 90% useful.
    assert not table["low_useful"].drop_nulls().any()


# ------------------------------------------------------------------ derived data


points = st.lists(
    st.tuples(st.floats(0.01, 100.0), st.floats(0.0, 1.0)), min_size=1, max_size=25
)


@settings(max_examples=80, deadline=None)
@given(points, st.booleans())
def test_pareto_front_is_exactly_the_non_dominated_points(pairs, higher) -> None:
    frame = pl.DataFrame({"x": [p[0] for p in pairs], "y": [p[1] for p in pairs], "id": list(range(len(pairs)))})
    front = pareto_front(frame, x="x", y="y", higher_is_better=higher)
    sign = 1 if higher else -1

    def dominates(a, b) -> bool:
        return a[0] <= b[0] and sign * a[1] >= sign * b[1] and (a[0] < b[0] or sign * a[1] > sign * b[1])

    on_front = set(front["id"].to_list())
    for i, p in enumerate(pairs):
        dominated = any(dominates(q, p) for q in pairs)
        if dominated:
            assert i not in on_front
    for q in front.iter_rows(named=True):
        assert not any(dominates(p, (q["x"], q["y"])) for p in pairs)
    assert front["x"].to_list() == sorted(front["x"].to_list())
    # Every point is matched or beaten by some frontier point (ties keep one representative).
    for p in pairs:
        assert any(f["x"] <= p[0] and sign * f["y"] >= sign * p[1] for f in front.iter_rows(named=True))


def test_itl_by_context_follows_the_decode_passes(table) -> None:
    ok = table.filter((pl.col("hardware") == A100) & (pl.col("status") == "ok"))
    itl = itl_by_context(ok)
    batch1 = itl.filter(pl.col("batch_size") == 1)
    assert batch1["generation_length"].unique().to_list() == [128]  # the longest run covers the shorter contexts
    assert batch1["context_length"].to_list() == list(range(64 + 1, 64 + 128))
    assert set(itl["batch_size"].unique()) == {1, 8, 32}


def test_step_time_and_memory_grid(table) -> None:
    a100 = table.filter(pl.col("hardware") == A100)
    steps = step_time_by_length(a100)
    assert steps.filter(pl.col("batch_size") == 32)["sequence_length"].to_list() == [128]  # 192 ran out of memory
    assert steps["runs"].max() == 6  # 3 step counts x 2 block lengths share one (batch, length)
    grid = memory_grid(a100)
    cell = grid.filter((pl.col("arch") == "llada") & (pl.col("batch_size") == 32) & (pl.col("sequence_length") == 192))
    assert cell["state"].to_list() == ["oom"]
    failed = grid.filter((pl.col("arch") == "llama") & (pl.col("batch_size") == 2))
    assert failed["state"].to_list() == ["error"]
    assert not math.isnan(grid.filter(pl.col("state") == "ok")["peak_memory_bytes"].min())
