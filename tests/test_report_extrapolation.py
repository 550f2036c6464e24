"""Extrapolated LLaDA latencies in the report: never averaged with a full measurement of the same point, always
marked, and checked against the full run where the sweep ran both (controls.extrapolation)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from report_fixtures import SMOKE_LIKE, write_sweep
from test_report_pairings import unpack

from report.analysis.extrapolation import (
    extrapolated_share,
    extrapolation_checks,
    extrapolation_summary,
    split_modes,
    with_extrapolation_check,
)
from report.answer.findings import crossover_table
from report.answer.pairing.build import pairing_table
from report.analysis.parity import PARITY_SCHEMA
from report.document.render import _load
from report.sections import extrapolation_blocks
from report.table.flat import full_where_measured, results_table, vanilla_runs
from specs.artifacts import SweepLayout
from specs.results import ExtrapolatedLatency, RunResult

TIMED = 2


def extrapolated_twin(result: RunResult, factor: float, step_factor: float = 1.0) -> RunResult:
    """The same configuration timed from its first TIMED steps, its extrapolated latency `factor` x the full one and
    its timed steps `step_factor` x the full run's first ones."""
    assert result.samples is not None and result.config.steps is not None and result.samples.step_s
    config = result.config.model_copy(update={"timed_steps": TIMED})
    latency = [x * factor for x in result.samples.latency_e2e_s]
    samples = result.samples.model_copy(update={
        "latency_e2e_s": latency,
        "step_s": [[x * step_factor for x in rep[:TIMED]] for rep in result.samples.step_s],
        "extrapolated": ExtrapolatedLatency(timed_steps=TIMED, steps=result.config.steps,
                                            measured_e2e_s=[x * TIMED / result.config.steps for x in latency]),
    })  # fmt: skip
    return result.model_copy(update={"run_id": result.run_id[:-1] + "x", "config": config, "samples": samples})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[RunResult]:
    layout = SweepLayout(write_sweep(tmp_path_factory.mktemp("sweep"), SMOKE_LIKE))
    return [RunResult.model_validate_json(p.read_text()) for p in layout.run_files().values()]


def llada_ok(runs: list[RunResult]) -> list[RunResult]:
    return sorted((r for r in runs if r.config.model.arch == "llada" and r.samples), key=lambda r: r.run_id)


def test_a_point_timed_both_ways_reads_the_full_measurement(runs) -> None:
    checked, only_extrapolated = llada_ok(runs)[:2]
    twin = extrapolated_twin(checked, 1.1)
    lone = extrapolated_twin(only_extrapolated, 0.9)
    kept = [r for r in runs if r.run_id != only_extrapolated.run_id] + [twin, lone]
    table = full_where_measured(vanilla_runs(results_table(kept)))
    ids = set(table["run_id"])
    assert checked.run_id in ids and twin.run_id not in ids  # the full measurement stands
    assert lone.run_id in ids  # timed only by extrapolation: kept, and marked
    assert table.filter(pl.col("run_id") == lone.run_id)["extrapolated"].item() is True
    assert table.height == len(runs)  # one row per grid point
    assert extrapolated_share(table) == (1, len(runs))


def test_the_check_pairs_the_extrapolation_with_its_full_run(runs) -> None:
    full = llada_ok(runs)[0]
    table = results_table([*runs, extrapolated_twin(full, 1.25)])
    checks = extrapolation_checks(table)
    assert checks.height == 1
    row = checks.row(0, named=True)
    assert (row["steps"], row["timed_steps"], row["batch_size"]) == (full.config.steps, TIMED, full.config.batch_size)
    assert row["ratio"] == pytest.approx(1.25)
    assert row["extrapolated_n"] == row["full_n"] == len(full.samples.latency_e2e_s)


def test_the_latency_section_says_which_latencies_are_extrapolated(runs) -> None:
    full = llada_ok(runs)[0]
    assert extrapolation_blocks(results_table(runs)) == []  # nothing extrapolated: nothing said
    blocks = extrapolation_blocks(results_table([*runs, extrapolated_twin(full, 1.25)]))
    assert blocks[0].text.startswith(f"1 of {len(llada_ok(runs)) + 1} LLaDA runs timed only their first {TIMED} steps and "
                                     "were scaled up to")
    assert "1 was checked against a full run at their batch and shape" in blocks[0].text
    assert blocks[1].rows[0][-2:] == ("1.25", f"{len(full.samples.latency_e2e_s)}, {len(full.samples.latency_e2e_s)}")


def test_unchecked_extrapolation_is_said_to_be_unchecked(runs) -> None:
    """No full run at its shape (at any step count): nothing checks it."""
    lone = llada_ok(runs)[0]

    def shape(r: RunResult) -> tuple:
        return r.config.model.name, r.config.batch_size, r.config.prompt_length, r.config.generation_length

    table = results_table([*(r for r in runs if shape(r) != shape(lone)), extrapolated_twin(lone, 1.0)])
    (paragraph,) = extrapolation_blocks(table)
    assert "unchecked" in paragraph.text
    assert extrapolation_checks(table).height == 0


def test_the_table_marks_an_extrapolated_run_without_outputs(runs) -> None:
    """An extrapolated run carries no outputs and no quality: the table builds and marks it."""
    twin = extrapolated_twin(llada_ok(runs)[0], 1.1).model_copy(update={"quality": None, "generations": []})
    table = results_table([*runs, twin])
    row = table.filter(pl.col("run_id") == twin.run_id).row(0, named=True)
    assert row["extrapolated"] is True and row["timed_steps"] == TIMED


def test_a_slow_extrapolation_is_suspect_at_any_step_count_and_left_out_of_speedups_and_b_star(runs) -> None:
    """A vanilla step costs the same whatever the step count, so a run extrapolated from slow steps is caught by the
    full runs at its shape even where no full run has its step count (the H200 campaign's 16-step point)."""
    llada = [r for r in llada_ok(runs) if r.config.batch_size == 1]
    steps = sorted({r.config.steps for r in llada})
    slow = next(r for r in llada if r.config.steps == steps[0])
    fair = next(r for r in llada if r.config.steps == steps[-1])
    kept = [r for r in runs if r.run_id not in {slow.run_id, fair.run_id}]
    table = with_extrapolation_check(results_table(
        [*kept, extrapolated_twin(slow, 1.4, step_factor=1.4), extrapolated_twin(fair, 1.05, step_factor=1.05)]))
    flags = {row["steps"]: (row["extrapolation_step_ratio"], row["extrapolation_suspect"])
             for row in table.filter(pl.col("extrapolated")).iter_rows(named=True)}
    assert flags[steps[0]][0] == pytest.approx(1.4, rel=0.05) and flags[steps[0]][1] is True
    assert flags[steps[-1]][0] == pytest.approx(1.05, rel=0.05) and flags[steps[-1]][1] is False
    assert table.filter(~pl.col("extrapolated"))["extrapolation_suspect"].null_count() == table.filter(
        ~pl.col("extrapolated")).height  # nothing to check on a full run
    checks = extrapolation_checks(table)
    assert checks.filter(pl.col("suspect"))["steps"].to_list() == [steps[0]]
    assert checks.filter(pl.col("steps") == steps[0])["ratio"].item() is None  # no full run of 16 steps to pair
    base = full_where_measured(vanilla_runs(table))
    gen = slow.config.generation_length
    crossing = crossover_table(base, {}, {}).filter((pl.col("steps") == steps[0])
                                                    & (pl.col("generation_length") == gen))
    assert crossing["batch_sizes"].to_list() == [", ".join(map(str, sorted({r.config.batch_size for r in runs} - {1})))]
    results = [*kept, extrapolated_twin(slow, 1.4, 1.4), extrapolated_twin(fair, 1.05, 1.05)]
    pairings = pairing_table(table, results, pl.DataFrame(schema=PARITY_SCHEMA), crossover_table(base, {}, {}), {})
    at = {p.steps: [s.batch_size for s in p.speedups] for p in pairings if p.generation_length == gen}
    assert 1 not in at[steps[0]] and 1 in at[steps[-1]]  # the suspect point is left out; the fair one stands
    (warning,) = [b for b in extrapolation_blocks(table) if "left out" in getattr(b, "text", "") and b.warning]
    assert f"{steps[0]} steps" in warning.text and "left out of the speedups and B*" in warning.text


def test_the_h200_campaigns_slow_first_runs_are_flagged(tmp_path: Path) -> None:
    """results/h200/campaign-h100 at 256 + 256, B = 1: the campaign's first two LLaDA runs timed 31 ms steps where
    the full 64-step run's median step took 21.5 ms and the 256-step run's 21.3 ms. Both are flagged (median against
    median: 1.47 and 1.42), the 256-step one is not, and the speedups and B* leave the flagged ones out."""
    results, _ = _load(SweepLayout(unpack("campaign-h100", tmp_path)), strict=True)
    table = with_extrapolation_check(results_table(results))
    suspect = table.filter(pl.col("extrapolation_suspect").fill_null(False))
    assert sorted(suspect.select("prompt_length", "batch_size", "steps").iter_rows()) == [(256, 1, 16), (256, 1, 64)]
    assert suspect["extrapolation_step_ratio"].to_list() == pytest.approx([1.47, 1.42], abs=0.01)
    ratios = table.filter(pl.col("extrapolated") & ~pl.col("extrapolation_suspect"))["extrapolation_step_ratio"]
    assert ratios.is_between(0.96, 1.02).all() and ratios.len() == 16  # the rest agree within 4%
    base = full_where_measured(vanilla_runs(table))
    crossovers = crossover_table(base, {}, {})
    point = crossovers.filter((pl.col("prompt_length") == 256) & (pl.col("steps") == 16)).row(0, named=True)
    assert point["batch_sizes"] == "8, 64" and point["b_star"] == pytest.approx(27.7, abs=0.05)
    pairings = pairing_table(table, results, pl.DataFrame(schema=PARITY_SCHEMA), crossovers, {})
    (sixteen,) = [p for p in pairings if p.prompt_length == 256 and p.steps == 16]
    assert [s.batch_size for s in sixteen.speedups] == [8, 64]


def test_repetitions_that_split_into_two_clean_clusters_are_modes_and_nothing_else_is() -> None:
    """Two modes need a gap wider than the tolerance and than either cluster's own spread, two repetitions a side."""
    modes = split_modes([0.0216, 0.0219, 0.0233, 0.0208, 0.0310, 0.0315, 0.0307, 0.0318])
    assert modes is not None and (modes.fast_repetitions, modes.slow_repetitions) == (4, 4)
    assert modes.fast_s == pytest.approx(0.02175, rel=0.01) and modes.slow_s == pytest.approx(0.03125, rel=0.01)
    assert split_modes([0.0652, 0.0653, 0.0674, 0.0674, 0.069, 0.0701, 0.0709]) is None  # within 10%
    assert split_modes([0.020, 0.021, 0.0205, 0.031]) is None  # one stray is no mode
    assert split_modes([0.020, 0.030]) is None


def test_the_summary_counts_what_was_extrapolated_checked_and_left_unchecked(runs) -> None:
    full, lone = llada_ok(runs)[:2]
    table = results_table([*(r for r in runs if r.run_id != lone.run_id), extrapolated_twin(full, 1.0),
                           extrapolated_twin(lone, 1.0)])
    text = extrapolation_summary(table)
    assert text.startswith(f"2 of {len(llada_ok(runs)) + 1} LLaDA runs timed only their first {TIMED} steps")
    assert extrapolation_summary(results_table(runs)) is None
