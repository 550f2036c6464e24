"""Energy in the report: joules per generated token per run with the counter's source and scope, extrapolated
energy stated as such (also for artifacts written before the flag), the Findings' energy rows and figure."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from report_fixtures import SMOKE_LIKE, VARIANTS, reseal, write_sweep
from test_report_pairings import read_findings, unpack

from report.analysis.energy import ENERGY_ANCHOR, energy_checks, energy_runs
from report.figures.common import plotted
from report.figures.energy import EXTRAPOLATED_MARK
from report.document.render import render_report
from report.table.flat import results_table
from specs.artifacts import SweepLayout, verify
from specs.results import Energy, RunResult

BOARD = "GPU 0 (the whole board)"
WATTS = 400.0


def add_energy(root: Path) -> Path:
    """Give every successful run of a fixture sweep an NVML reading at a constant 400 W, and re-seal the manifest."""
    layout = SweepLayout(root)
    for path in layout.run_files().values():
        result = RunResult.model_validate_json(path.read_text(encoding="utf-8"))
        if result.samples is not None and result.samples.latency_e2e_s:
            seconds = sum(result.samples.latency_e2e_s)
            tokens = len(result.samples.latency_e2e_s) * result.config.output_tokens
            energy = Energy(source="nvml", scope=BOARD, joules=WATTS * seconds, seconds=seconds,
                            generated_tokens=tokens, joules_per_token=WATTS * seconds / tokens)
            path.write_text(result.model_copy(update={"energy": energy}).model_dump_json(indent=1), encoding="utf-8")
    reseal(root)
    assert not verify(layout)
    return root


def test_a_sweep_without_energy_says_so_and_draws_no_figure(tmp_path: Path) -> None:
    outputs = render_report(write_sweep(tmp_path, SMOKE_LIKE), echo=False)
    md = outputs.markdown.read_text(encoding="utf-8")
    section = md[md.index("## 9. Energy"):md.index("## 10. Environment")]
    assert "No run recorded energy" in section
    assert "energy_per_token" not in {f.stem for f in outputs.figures} | {s.stem for s in outputs.skipped}
    assert "energy per token" not in outputs.findings


@pytest.fixture(scope="module")
def with_quality(tmp_path_factory: pytest.TempPathFactory):
    return render_report(add_energy(write_sweep(tmp_path_factory.mktemp("energy"), VARIANTS)), echo=False)


def test_energy_rows_in_the_findings_sit_at_s_parity(with_quality) -> None:
    found = read_findings(with_quality.sweep_dir)
    parity_steps = {s.steps for p in found.findings for s in p.s_parity if s.steps is not None}
    assert parity_steps and parity_steps <= {16, 32}
    rows = [line for line in with_quality.findings.splitlines() if "energy per token" in line]
    assert rows and all(any(f"at {k} steps = S_parity" in line for k in parity_steps) for line in rows)
    assert {("best pairing" in line) for line in rows} == {True, False}  # both pairings
    # B = 1 and the largest batch, both models, with the counter named.
    assert all("B = 1:" in line and "B = 32:" in line and "LLaMA" in line and "LLaDA" in line and BOARD in line
               for line in rows)
    md = with_quality.markdown.read_text(encoding="utf-8")
    assert f"](#{ENERGY_ANCHOR})" in md and f'<a id="{ENERGY_ANCHOR}"></a>' in md


def test_the_energy_figure_draws_every_model_implementation_and_step_count(with_quality) -> None:
    (figure,) = [f for f in with_quality.figures if f.stem == "energy_per_token"]
    data = plotted(figure.figure)
    labels = {s.label for p in data.panels for s in p.series}
    assert {"llama-8b (LLaMA)", "llama-8b static-compile (LLaMA)", "llada-8b: 16 steps",
            "llada-8b dual-cache: 32 steps"} <= labels
    table = results_table(RunResult.model_validate_json(p.read_text())
                          for p in SweepLayout(with_quality.sweep_dir).run_files().values())
    llama = table.filter((pl.col("arch") == "llama") & (pl.col("impl") == "vanilla")
                         & (pl.col("status") == "ok")).sort("batch_size")
    series = data.panels[0].get("llama-8b (LLaMA)")
    assert series.y == pytest.approx(tuple(llama["joules_per_token"].to_list()))
    assert any(BOARD in note for note in data.notes)


def test_an_extrapolated_energy_record_is_flagged_from_its_own_field(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    path = next(iter(SweepLayout(root).run_files().values()))
    result = RunResult.model_validate_json(path.read_text())
    energy = Energy(source="rapl", scope="CPU package-0", joules=2.0, seconds=1.0, generated_tokens=10,
                    joules_per_token=0.8, extrapolated=True)
    row = results_table([result.model_copy(update={"energy": energy})]).row(0, named=True)
    assert (row["energy_extrapolated"], row["energy_joules_timed"], row["joules_per_token"]) == (True, 2.0, 0.8)
    assert row["energy_power_w"] == pytest.approx(2.0) and row["energy_source"] == "rapl"
    plain = results_table([result]).row(0, named=True)
    assert plain["joules_per_token"] is None and plain["energy_extrapolated"] is None


@pytest.mark.slow
def test_the_h200_campaign_states_its_extrapolated_energy(tmp_path: Path) -> None:
    root = unpack("campaign-h100", tmp_path)
    results = [RunResult.model_validate_json(p.read_text()) for p in SweepLayout(root).run_files().values()]
    # Written before the flag: the record has no `extrapolated`; the samples say the run was extrapolated.
    raw = json.loads(next(iter(SweepLayout(root).run_files().values())).read_text())
    assert "extrapolated" not in raw["energy"]
    table = results_table(results)
    extrapolated = table.filter(pl.col("extrapolated"))
    assert extrapolated.height and extrapolated["energy_extrapolated"].to_list() == [True] * extrapolated.height
    assert table.filter(~pl.col("extrapolated"))["energy_extrapolated"].to_list() == [False] * (
        table.height - extrapolated.height)
    for r in results:  # joules per token = timed joules x the latency's scale / tokens
        if r.samples.extrapolated is not None:
            scale = sum(r.samples.latency_e2e_s) / sum(r.samples.extrapolated.measured_e2e_s)
            assert r.energy.joules_per_token == pytest.approx(r.energy.joules * scale / r.energy.generated_tokens)
    checks = energy_checks(table)
    assert checks.height == 6 and checks["ratio"].is_between(0.5, 1.5).all()
    # The sweep's closing lines set the same energy ratios beside the latency ratios.
    from orchestrator.extrapolation import extrapolation_checks, format_checks

    lines = format_checks(extrapolation_checks(results)).splitlines()[1:]
    assert len(lines) == 6 and all("J/token, ratio" in line for line in lines)
    assert sorted(round(k.energy_ratio, 6) for k in extrapolation_checks(results)) == sorted(
        round(r, 6) for r in checks["ratio"].to_list())
    assert energy_runs(table).height == 36  # 42 runs, the 6 check points read in full
    outputs = render_report(root, echo=False)
    md = outputs.markdown.read_text(encoding="utf-8")
    section = md[md.index("## 9. Energy"):md.index("## 10. Environment")]
    assert "NVML on NVIDIA H200: GPU 0 (the whole board)" in section and "(extrapolated)" in section
    assert "Energy extrapolation check" in section
    rows = [line for line in outputs.findings.splitlines() if "energy per token (vanilla pairing)" in line]
    assert len(rows) == 9 and all("B = 64:" in line for line in rows)  # 3 lengths x 3 steps
    # B = 1 at 256 + 256, 16 steps, failed its extrapolation check: its energy is left out with its speedup.
    (missing,) = [line for line in rows if "B = 1:" not in line]
    assert "at 16 steps" in missing and "B = 8: LLaMA 682 mJ" in missing  # LLaMA's B = 8 at 256 + 256
    (figure,) = [f for f in outputs.figures if f.stem == "energy_per_token"]
    marks = [m for p in plotted(figure.figure).panels for s in p.series for m in s.markers]
    assert marks.count(EXTRAPOLATED_MARK) == energy_runs(table)["energy_extrapolated"].sum()


def test_the_worker_flags_energy_scaled_from_timed_steps() -> None:
    from types import SimpleNamespace

    from specs.results import ExtrapolatedLatency, Samples
    from tests.worker_fixtures import run_config
    from workers.measure.energy import EnergyReading
    from workers.measure.scenario import energy_record

    config = run_config("llada", steps=16, block_length=8, timed_steps=4)
    meter = SimpleNamespace(reading=EnergyReading("nvml", BOARD, joules=40.0, seconds=0.1))
    timed = Samples(timer="perf_counter", latency_e2e_s=[4.0, 4.0], batch_index=[0, 1],
                    extrapolated=ExtrapolatedLatency(timed_steps=4, steps=16, measured_e2e_s=[1.0, 1.0]))
    scaled = energy_record(meter, config, timed)
    tokens = 2 * config.batch_size * config.generation_length
    assert scaled.extrapolated and scaled.joules == 40.0 and scaled.joules_per_token == pytest.approx(160.0 / tokens)
    full = energy_record(meter, config, timed.model_copy(update={"extrapolated": None}))
    assert not full.extrapolated and full.joules_per_token == pytest.approx(40.0 / tokens)
