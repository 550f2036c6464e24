"""The roofline against real GPU runs: the two sweeps measured on an NVIDIA H200 (tests/data/h200, written by the
package at commit 966dbce). The roofs alone must bound every run from below, and with the host floor the
prediction must sit within 1.5x of the measurement for the median run."""

from __future__ import annotations

import math
import re
import tarfile
from pathlib import Path

import polars as pl
import pytest

from report.figures.common import plotted
from report.figures.roofline import measured_vs_predicted
from report.answer.findings import roofline_findings
from report.analysis.predictions import (
    choose_profile,
    measured_roofs_of,
    profile_from_roofs,
    sweep_predictions,
    with_roofline_columns,
)
from report.document.render import SweepLayout, _load, render_report
from report.table.flat import results_table
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import get_hardware
from roofline.phase import cost_of
from specs.artifacts import verify
from specs.paths import PACKAGE_ROOT
from specs.registry import preset_shape

DATA = Path(__file__).parent / "data" / "h200"
SWEEPS = ("campaign-h100", "accel-8b")


def _unpack(name: str, into: Path) -> Path:
    with tarfile.open(DATA / f"{name}.tgz") as archive:
        archive.extractall(into, filter="data")
    return into / name


@pytest.fixture(scope="module", params=SWEEPS)
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep directory with its report, rendered from the artifacts alone."""
    root = _unpack(request.param, tmp_path_factory.mktemp(request.param))
    render_report(root, echo=False)
    return root


def test_the_roofs_bound_every_h200_run_and_the_floor_predicts_the_median_within_1_5x(rendered: Path) -> None:
    ok = pl.read_parquet(rendered / "results.parquet").filter(pl.col("status") == "ok")
    assert ok.height and ok["predicted_latency_roofs_s"].null_count() == 0
    assert ok["roofline_profile"].unique().to_list() == ["NVIDIA H200 (measured, bfloat16)"]
    assert not ok["roofline_violated"].any()
    assert (ok["predicted_latency_roofs_s"] <= ok["predicted_latency_s"]).all()
    assert ok["roofline_efficiency"].max() <= 1 / 0.9
    ratio = (ok["latency_e2e_s_median"] / ok["predicted_latency_s"]).log().abs()
    assert ratio.median() <= math.log(1.5)


def test_the_report_flags_no_violation_and_gives_the_efficiency_per_implementation(rendered: Path) -> None:
    text = (rendered / "report.md").read_text(encoding="utf-8")
    assert "roofline efficiency: llama-8b-synthetic vanilla" in text
    assert "roofline efficiency: llada-8b-synthetic vanilla" in text
    if rendered.name == "accel-8b":
        assert "roofline efficiency: llama-8b-synthetic static-compile" in text
        assert "roofline efficiency: llada-8b-synthetic dual-cache" in text
    assert "roofline violated" in text  # the roofline table's column
    assert not re.search(r"\d VIOLATED", text)  # no latency-table cell flags a run


def test_the_vector_roof_charges_no_byte_and_the_host_floor_comes_from_the_named_profile(tmp_path: Path) -> None:
    """The calibration's elementwise multiply is bandwidth-bound on a GPU (here 65,536 elements, one launch-bound
    kernel; since then 256 MiB streamed): the vector roof is the CUDA cores' datasheet rate, so an elementwise op
    costs its bytes over the bandwidth once, and the softmax fused into attention no bandwidth-bound time."""
    results, _ = _load(SweepLayout(_unpack("campaign-h100", tmp_path)), strict=True)
    roofs = measured_roofs_of(results, "NVIDIA H200")
    assert roofs is not None and roofs.vector_bytes is None and roofs.host_floor_s is None
    assert roofs.vector_ops_per_s < 1e10  # 65,536 elements: one launch-bound kernel
    profile = profile_from_roofs(roofs)
    assert profile.peak_vector_ops_per_s == get_hardware("h200").peak_vector_ops_per_s == 33.5e12
    assert profile.peak_tensor_flops_per_s == roofs.matmul_flops_per_s  # measured where reached: kept
    assert profile.host_floor_s == pytest.approx(0.024) and profile.host_floor_layers == 32
    # A streamed calibration (the current one) is bandwidth-bound too: the same datasheet roof.
    streamed = roofs.model_copy(update={"vector_bytes": 3 << 28, "vector_ops_per_s": 0.7e12, "host_floor_s": 0.03,
                                        "host_floor_layers": 32})
    assert profile_from_roofs(streamed).peak_vector_ops_per_s == 33.5e12
    assert profile_from_roofs(streamed).host_floor_s == 0.03
    # A GPU without a datasheet profile: its matmul peak, never the streamed rate.
    unnamed = streamed.model_copy(update={"device": "NVIDIA Z1"})
    assert profile_from_roofs(unnamed).peak_vector_ops_per_s == roofs.matmul_flops_per_s
    # Every byte once: one LLaDA-8B forward at B = 1, L = 768 (bf16) charges its elementwise ops their bytes over
    # the bandwidth and no more (a unary op was charged 1.5x its bytes, the fused softmax ~1.2 ms of phantom time).
    ops = forward_operators(preset_shape("llada", "8b"), ForwardPass(1, 768, 768, "none", 768))
    profile = profile.model_copy(update={"dispatch_s": 0.0})  # the roofs alone, no launch floor
    vector_ops = [op for op in ops if op.unit == "vector"]
    nonlinear_s = cost_of(vector_ops, profile).time_s["nonlinear"]
    bytes_s = sum(op.count * op.bytes_ for op in vector_ops) / profile.memory_bandwidth_bytes_per_s
    assert bytes_s < nonlinear_s < 1.02 * bytes_s  # the softmax's registers-only work: 18 us
    softmax = next(op for op in ops if op.name == "softmax")
    assert softmax.bytes_ == 0 and cost_of([softmax], profile).total_time_s < 2e-5
    # At the streamed rate the softmax took ~0.9 ms of phantom time and the elementwise ops ~1.5x their bytes.
    streamed_rate = profile.model_copy(update={"peak_vector_ops_per_s": profile.memory_bandwidth_bytes_per_s / 6})
    assert cost_of([softmax], streamed_rate).total_time_s > 8e-4
    assert cost_of(vector_ops, streamed_rate).time_s["nonlinear"] > 1.5 * bytes_s


def test_a_violation_is_flagged_when_a_run_beats_its_roofs(tmp_path: Path) -> None:
    results, _ = _load(SweepLayout(_unpack("accel-8b", tmp_path)), strict=True)
    table = results_table(results)
    choice = choose_profile("NVIDIA H200", measured_roofs_of(results, "NVIDIA H200"))
    assert choice.profile is not None
    # Roofs 10x faster than the device is: nothing is flagged. 10x slower: every run beat its "bound".
    slow = choice.profile.model_copy(update={
        "peak_tensor_flops_per_s": choice.profile.peak_tensor_flops_per_s / 10,
        "memory_bandwidth_bytes_per_s": choice.profile.memory_bandwidth_bytes_per_s / 10,
        "peak_vector_ops_per_s": choice.profile.peak_vector_ops_per_s / 10,
    })
    predictions = sweep_predictions(results, table, {"NVIDIA H200": slow})
    flagged = predictions.filter(pl.col("fidelity") == "faithful")
    assert flagged["roofline_violated"].all()
    assert (flagged["roofline_efficiency"] > 1).all()
    # The measured-vs-predicted figure circles every violating run, and the Findings name them.
    data = plotted(measured_vs_predicted(table, predictions, slow))
    marked = data.panel("faithful").get(f"roofline violated ({flagged.height} runs: faster than 0.9x the roofs alone)")
    assert set(marked.markers) == set(flagged["run_id"].to_list())
    rows = roofline_findings(with_roofline_columns(table, predictions)).filter(pl.col("finding") == "roofline violated")
    assert rows.height == 1 and rows["warning"][0] and f"{flagged.height} run(s)" in rows["value"][0]


@pytest.mark.parametrize("name", SWEEPS)
def test_the_committed_h200_results_verify_and_match_a_report_regenerated_from_the_artifacts(
    name: str, tmp_path: Path
) -> None:
    """results/h200 is what a reader opens first; it must be the artifacts' own report from today's code,
    not a stale copy (`just h200-results` regenerates it)."""
    committed = PACKAGE_ROOT / "results" / "h200" / name
    assert verify(SweepLayout(committed)) == []
    fresh = _unpack(name, tmp_path)
    render_report(fresh, echo=False)
    for document in ("report.md", "findings.json"):
        assert (committed / document).read_text(encoding="utf-8") == (fresh / document).read_text(encoding="utf-8"), (
            f"results/h200/{name}/{document} differs from the report regenerated now: run `just h200-results`"
        )
    committed_figures = sorted(p.name for p in (committed / "figures").iterdir())
    assert committed_figures == sorted(p.name for p in (fresh / "figures").iterdir())
