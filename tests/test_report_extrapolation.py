"""Extrapolated LLaDA latencies in the report: never averaged with a full measurement of the same point, always
marked, and checked against the full run where the sweep ran both (controls.extrapolation)."""

from __future__ import annotations

import polars as pl
import pytest
from report_fixtures import SMOKE_LIKE, write_sweep

from report.extrapolation import extrapolated_share, extrapolation_checks
from report.sections import extrapolation_blocks
from report.table import full_where_measured, results_table, vanilla_runs
from specs.artifacts import SweepLayout
from specs.results import ExtrapolatedLatency, RunResult

TIMED = 2


def extrapolated_twin(result: RunResult, factor: float) -> RunResult:
    """The same configuration timed from its first TIMED steps, its extrapolated latency `factor` x the full one."""
    assert result.samples is not None and result.config.steps is not None
    config = result.config.model_copy(update={"timed_steps": TIMED})
    latency = [x * factor for x in result.samples.latency_e2e_s]
    samples = result.samples.model_copy(update={
        "latency_e2e_s": latency,
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
    assert "1 LLaDA run(s) timed only their first steps" in blocks[0].text
    assert blocks[1].rows[0][-2:] == ("1.25", f"{len(full.samples.latency_e2e_s)}, {len(full.samples.latency_e2e_s)}")


def test_unchecked_extrapolation_is_said_to_be_unchecked(runs) -> None:
    lone = llada_ok(runs)[0]
    table = results_table([*(r for r in runs if r.run_id != lone.run_id), extrapolated_twin(lone, 1.0)])
    (paragraph,) = extrapolation_blocks(table)
    assert "unchecked" in paragraph.text
    assert extrapolation_checks(table).height == 0


def test_the_table_marks_an_extrapolated_run_without_outputs(runs) -> None:
    """An extrapolated run carries no outputs and no quality: the table builds and marks it."""
    twin = extrapolated_twin(llada_ok(runs)[0], 1.1).model_copy(update={"quality": None, "generations": []})
    table = results_table([*runs, twin])
    row = table.filter(pl.col("run_id") == twin.run_id).row(0, named=True)
    assert row["extrapolated"] is True and row["timed_steps"] == TIMED
