"""render_report: the table, figures, self-contained HTML and Markdown from artifacts alone, for two
hardware kinds and for a smoke-like CPU sweep."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from report_fixtures import A100, H100, SMOKE_LIKE, write_sweep

from report.document.render import render_report
from specs.artifacts import SweepLayout

SECTION_ORDER = ["Findings", "Setup and controls", "Latency", "Throughput", "Memory", "Quality vs computation",
                 "Accelerated variants", "Roofline", "Energy", "Environment and provenance"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory):
    root = write_sweep(tmp_path_factory.mktemp("artifacts"))
    return render_report(root, echo=False)


def test_outputs_are_written_beside_the_artifacts(rendered) -> None:
    root = rendered.sweep_dir
    table = pl.read_parquet(root / "results.parquet")
    assert table.height == len(SweepLayout(root).run_files())
    assert rendered.html == root / "report.html" and rendered.markdown == root / "report.md"
    for figure in rendered.figures:
        assert figure.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert figure.svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
        assert figure.png.parent == root / "figures"
    assert not list(root.rglob("*.tmp"))


def test_two_hardware_kinds_get_their_own_figures(rendered) -> None:
    stems = {f.png.stem for f in rendered.figures}
    for hw in ("nvidia-a100-sxm4-80gb", "nvidia-h100-80gb-hbm3"):
        assert f"latency_vs_generation_length--{hw}" in stems
        assert f"memory_heatmap--{hw}" in stems
        assert f"roofline--{hw}" in stems and f"measured_vs_predicted--{hw}" in stems
    assert "pareto_frontier_bertscore_f1--nvidia-a100-sxm4-80gb" in stems
    skipped = {(s.stem, s.hardware): s.reason for s in rendered.skipped}
    assert "no quality values" in skipped[("pareto_frontier", H100)]
    assert "quality disabled on this device" in skipped[("quality_vs_steps", H100)]
    assert all(f.hardware in (A100, H100) for f in rendered.figures)


def test_html_is_self_contained_in_the_study_order(rendered) -> None:
    html = rendered.html.read_text(encoding="utf-8")
    positions = [html.index(f"<h2>{i}. {title}</h2>") for i, title in enumerate(SECTION_ORDER, start=1)]
    assert positions == sorted(positions)
    assert "<script" not in html.lower()
    assert "<link" not in html.lower() and "@import" not in html
    for attribute in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html):
        assert attribute.startswith(("data:image/png;base64,", "#")), attribute
    assert not re.search(r"url\(\s*['\"]?(?!data:)", html)
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", html, re.IGNORECASE)
    assert html.count("<img ") == len(rendered.figures)
    for skipped in rendered.skipped:
        assert skipped.reason.replace("'", "&#x27;") in html


def test_html_has_the_parity_table_and_the_manifest_checksums(rendered) -> None:
    html = rendered.html.read_text(encoding="utf-8")
    headline = html.index("Steps to quality parity and the speedup at parity")
    assert html.rfind("<details>", 0, headline) < html.rfind("</details>", 0, headline)  # shown, not folded
    assert "parity at " in html and "speedup" in html
    manifest = SweepLayout(rendered.sweep_dir).manifest.read_text(encoding="utf-8")
    for digest in re.findall(r'"([0-9a-f]{64})"', manifest):
        assert digest in html
    assert "Verification passed" in html


def test_markdown_links_every_written_figure(rendered) -> None:
    md = rendered.markdown.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(links) == sorted(f.png.relative_to(rendered.sweep_dir).as_posix() for f in rendered.figures)
    assert all((rendered.sweep_dir / link).is_file() for link in links)
    assert [line for line in md.splitlines() if line.startswith("## ")] == [
        f"## {i}. {t}" for i, t in enumerate(SECTION_ORDER, start=1)]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory):
    return render_report(write_sweep(tmp_path_factory.mktemp("smoke"), SMOKE_LIKE), echo=False)


def test_smoke_like_sweep_figures(smoke) -> None:
    outputs = smoke
    assert {f.stem for f in outputs.figures} == {
        "findings_throughput", "latency_vs_generation_length", "step_time_vs_length", "throughput_by_batch",
        "memory_heatmap", "pareto_frontier_bertscore_f1", "pareto_frontier_gen_ppl", "quality_vs_steps_bertscore_f1",
        "quality_vs_steps_gen_ppl", "quality_vs_tokens_per_forward", "roofline", "measured_vs_predicted",
    }
    reasons = {s.stem: s.reason for s in outputs.skipped}
    assert set(reasons) == {"block_length_ablation", "training_loss"}  # synthetic weights: no training log
    assert "only one block length" in reasons["block_length_ablation"]
    html = outputs.html.read_text(encoding="utf-8")
    assert "synthetic weights: quality not meaningful" in html
    # CPU runs are predicted against the roofs their worker measured, never a GPU's.
    assert "cpu (measured, float32, 1 threads)" in html and "its worker&#x27;s measured roofs" in html
    # The parity table carries the flag itself, not only the section around it.
    headline = html.index("Steps to quality parity and the speedup at parity")
    caption_end = html.index("<", headline)
    assert "Synthetic weights: quality not meaningful" in html[headline:caption_end]


def test_rendering_is_repeatable(smoke) -> None:
    first = pl.read_parquet(smoke.results_parquet)
    svgs = {f.svg.name: f.svg.read_bytes() for f in smoke.figures}
    again = render_report(smoke.sweep_dir, echo=False)
    assert pl.read_parquet(again.results_parquet).equals(first)
    assert {f.svg.name: f.svg.read_bytes() for f in again.figures} == svgs


def test_cpu_runs_are_never_drawn_against_a_gpu_profile(tmp_path: Path) -> None:
    from report.analysis.predictions import UnknownHardwareError

    with pytest.raises(UnknownHardwareError, match="ran on cpu"):
        render_report(write_sweep(tmp_path, SMOKE_LIKE), hardware="a100-sxm4-80gb", echo=False)


def test_the_report_opens_with_the_findings(smoke) -> None:
    html = smoke.html.read_text(encoding="utf-8")
    findings = html.index("<h2>1. Findings</h2>")
    setup = html.index("<h2>2. Setup and controls</h2>")
    block = html[findings:setup]
    assert block.index("<table") < block.index("<figure")  # the table, then the figure
    assert "Throughput vs batch size, and where LLaMA overtakes LLaDA" in block
    for anchor in ("parity-table", "crossover-table"):
        assert f'href="#{anchor}"' in block and f'id="{anchor}"' in html  # each number links to its table
    assert "S_parity: llada-tiny, BERTScore F1 vs llama-tiny greedy" in block
    assert "speedup at S_parity (BERTScore F1), B = 4" in block
    assert "B*: llama-tiny overtakes llada-tiny at 8 steps" in block
    md = smoke.markdown.read_text(encoding="utf-8")
    assert md.index("## 1. Findings") < md.index("## 2. Setup") and "](#parity-table)" in md
    # The answer is also the last thing printed.
    assert smoke.findings.splitlines()[0] == "Findings" and "B*: llama-tiny overtakes llada-tiny" in smoke.findings
    # Three repetitions: the report says its intervals are ranges.
    assert "3 measured repetitions per run (this spec" in html
    assert "every latency and throughput interval below is the range of the 3 values" in html


def test_the_subtitle_counts_runs_not_rows_when_sessions_pool_them() -> None:
    from report.sections.order import subtitle

    pooled = pl.DataFrame({"status": ["ok", "ok", "error"], "sessions": [3, 3, 1],
                           "run_ids": [["a", "b", "c"], ["d", "e", "f"], ["g"]]})
    assert subtitle("smoke", pooled) == "Sweep 'smoke': 3 configurations (1 error, 2 ok), 7 runs in 3 sessions"
    single = pl.DataFrame({"status": ["ok", "ok"], "sessions": [1, 1], "run_ids": [["a"], ["b"]]})
    assert subtitle("accel", single) == "Sweep 'accel': 2 runs (2 ok)"
