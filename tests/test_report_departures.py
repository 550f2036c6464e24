"""Departures from the study: every report opens its setup with each control of the study's design beside what the
runs recorded, whether they agree, and why not: the spec's `departures:`, else its author's comment beside the
field, else the package's own rule, else "no reason given". A spec's notes never move a run id."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml
from report_fixtures import A100, SMOKE_LIKE, FixtureGrid, HardwareKind, reseal, write_sweep

from orchestrator.plan import plan_runs
from report.analysis.departures import NO_REASON, REFERENCE_WHY, S_PARITY_WHY, departures, summary
from report.analysis.parity import PARITY_SCHEMA, parity_table
from report.analysis.quality import quality_long_table
from report.document.render import _load, render_report
from report.sections.setup import _elsewhere
from report.table.spec_comments import field_comments
from report.table.flat import results_table
from specs import study
from specs.artifacts import SweepLayout, verify
from specs.loader import SpecError, load_spec, parse_spec
from specs.paths import PACKAGE_ROOT

# The study's grid at one point of each axis, on its GPU and kernel; the fixture warms up twice and records
# Python 3.11, so those two depart.
STUDY_LIKE = FixtureGrid(
    name="study-like", batch_sizes=(1, 8, 32), prompt_length=256, generation_lengths=(256,), steps=(16, 32, 64),
    block_lengths=(64,), attention="flash_attention_2", repetitions=3, extra_failures=False,
    hardware=(HardwareKind(A100, "A100", quality=True),),
)


def _sweep(root: Path, grid: FixtureGrid, extra: str = "") -> tuple[Path, str]:
    """A fixture sweep whose frozen spec has `extra` appended (and its checksum re-sealed)."""
    layout = SweepLayout(write_sweep(root, grid))
    text = layout.spec.read_text(encoding="utf-8") + extra
    layout.spec.write_text(text, encoding="utf-8")
    reseal(layout.root)
    assert not verify(layout)
    return layout.root, text


def _rows(root: Path, text: str, *, quality: bool) -> dict:
    results, _ = _load(SweepLayout(root), strict=True)
    table = results_table(results)
    parity = parity_table(quality_long_table(results), table, resamples=200) if quality else pl.DataFrame(
        schema=PARITY_SCHEMA)
    return {r.control.key: r for r in departures(table, parse_spec(text, check_files=False), text, parity)}


def test_a_sweep_on_the_studys_grid_agrees_where_it_does_and_says_why_not_elsewhere(tmp_path: Path) -> None:
    rows = _rows(*_sweep(tmp_path, STUDY_LIKE), quality=True)
    assert list(rows) == [c.key for c in study.CONTROLS]
    agrees = {k for k, r in rows.items() if r.agrees}
    assert agrees == {"models", "lengths", "split", "steps", "batch_sizes", "output_tokens", "temperature",
                      "hardware", "precision", "attention", "quality_reference"}  # no sampled text: greedy heads
    assert rows["warmup"].sweep == "2" and rows["warmup"].why == NO_REASON.format(key="warmup")
    assert rows["software"].sweep == "Python 3.11.7, PyTorch 2.5.1, CUDA 12.6"  # 3.11 is not the study's 3.13
    assert rows["hardware"].sweep == A100 and rows["lengths"].sweep == "512 tokens (256+256)"
    # The package's own rule: S_parity from every larger step on.
    assert (rows["s_parity"].agrees, rows["s_parity"].why) == (False, S_PARITY_WHY)
    assert rows["quality_reference"].sweep.startswith("BERTScore F1: llama-8b greedy; ")
    assert all(r.why == "" for r in rows.values() if r.agrees)
    line = summary(list(rows.values()))
    assert line.startswith("This sweep departs from the study's design (report-draft.md, sections 3.1.4 and 4) on "
                           "3 of 14 controls: warm-up passes W, software stack S, S_parity; it agrees on models (A), ")


def test_perplexity_held_to_llamas_sampled_text_is_a_departure_with_the_packages_why(tmp_path: Path) -> None:
    root, text = _sweep(tmp_path, STUDY_LIKE)
    table = results_table(_load(SweepLayout(root), strict=True)[0])
    parity = pl.DataFrame([
        {"metric": "bertscore_f1", "metric_label": "BERTScore F1", "reference": "llama greedy",
         "reference_label": "llama-8b greedy", "headline": True},
        {"metric": "gen_ppl", "metric_label": "perplexity", "reference": "llama sampled",
         "reference_label": "llama-8b sampled (T = 1)", "headline": True},
        {"metric": "gen_ppl", "metric_label": "perplexity", "reference": "llama greedy",
         "reference_label": "llama-8b greedy", "headline": False},
    ], schema_overrides=PARITY_SCHEMA)
    rows = {r.control.key: r for r in departures(table, parse_spec(text, check_files=False), text, parity)}
    reference = rows["quality_reference"]
    assert reference.sweep == "BERTScore F1: llama-8b greedy; perplexity: llama-8b sampled (T = 1)"
    assert (reference.agrees, reference.why) == (False, REFERENCE_WHY)


def test_the_why_is_the_specs_reason_else_its_comment_else_none_given(tmp_path: Path) -> None:
    root, text = _sweep(tmp_path, SMOKE_LIKE, "departures:\n  warmup: two passes fit the budget\n")
    text = text.replace("attention: sdpa", "attention: sdpa  # no FlashAttention on a CPU")
    rows = _rows(root, text, quality=False)
    assert rows["warmup"].why == "two passes fit the budget"
    assert rows["attention"].why == "no FlashAttention on a CPU (spec.yaml, beside controls.attention)"
    assert rows["precision"].sweep == "float32" and rows["precision"].why == NO_REASON.format(key="precision")
    assert rows["models"].why.startswith("random weights at the models' shapes")  # synthetic: the package's why
    assert (rows["lengths"].sweep, rows["lengths"].agrees) == ("64, 96 tokens (32+32, 32+64)", False)
    assert (rows["split"].sweep, rows["split"].agrees) == ("33% prompt, 50% prompt", False)
    assert rows["hardware"].sweep == "cpu" and rows["software"].sweep.endswith("CUDA none")
    assert (rows["s_parity"].agrees, rows["s_parity"].sweep) == (None, "not measured: no quality in this sweep")


def test_the_report_opens_its_setup_with_the_table_and_notes_a_spec_edited_after_its_runs(tmp_path: Path) -> None:
    root, _ = _sweep(tmp_path, SMOKE_LIKE, "amendments:\n  - the description was rewritten after the runs\n")
    outputs = render_report(root, echo=False)
    md = outputs.markdown.read_text(encoding="utf-8")
    setup = md[md.index("## 2. Setup and controls"):md.index("## 3. Latency")]
    opening = setup.split("\n\n")[1:3]
    assert opening[0].startswith("This sweep departs from the study's design")
    assert opening[1].startswith("*Departures from the study: each control of its design beside what this sweep")
    table = setup[setup.index("| control |"):]
    assert [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:2 + len(study.CONTROLS)]] == [
        c.label for c in study.CONTROLS]
    assert "(this spec's controls.repetitions)" in setup and "the GPU specs measure" not in setup
    assert "Departures from the study" in outputs.html.read_text(encoding="utf-8")
    provenance = md[md.index("## 10. Environment"):]
    assert "spec.yaml was edited after its runs" in provenance and "the description was rewritten" in provenance


def test_a_spec_naming_another_gpu_than_the_runs_recorded_is_said_so(tmp_path: Path) -> None:
    root, text = _sweep(tmp_path, STUDY_LIKE)
    table = results_table(_load(SweepLayout(root), strict=True)[0])
    asked_h100 = parse_spec(text.replace("controls:\n", "controls:\n  hardware: {gpu: H100, profile: h100-sxm}\n"),
                            check_files=False)
    warning = _elsewhere(asked_h100, table)
    assert warning is not None and warning.startswith("The spec names gpu 'H100', roofline profile h100-sxm")
    assert A100 in warning
    assert _elsewhere(parse_spec(text, check_files=False), table) is None  # no requirement: nothing to say
    rows = {r.control.key: r for r in departures(table, asked_h100, None, pl.DataFrame(schema=PARITY_SCHEMA))}
    assert rows["hardware"].sweep == f"{A100} (the spec names 'H100')"


def test_comments_are_read_by_the_fields_dotted_path() -> None:
    text = """# the header
name: x
grid:
  batch_sizes: [1, 8]   # two batches
  llada:
    # the study's range
    # in two lines
    steps: [16, 64]
    block_lengths: [64]
models:
  - name: a       # first
    arch: llama
controls: {warmup: 1}  # flow style
"""
    assert field_comments(text) == {
        "name": "the header", "grid.batch_sizes": "two batches", "grid.llada.steps": "the study's range in two lines",
        "models.name": "first", "controls": "flow style",
    }


def test_a_specs_notes_are_checked_and_never_move_a_run_id() -> None:
    text = (PACKAGE_ROOT / "specs" / "smoke.yaml").read_text(encoding="utf-8")
    assert "departures:" in text
    bare = yaml.safe_load(text)
    del bare["departures"]
    with_notes = load_spec(PACKAGE_ROOT / "specs" / "smoke.yaml")
    without = parse_spec(yaml.safe_dump(bare), check_files=False)
    assert [r.run_id for r in plan_runs(with_notes)] == [r.run_id for r in plan_runs(without)]
    with pytest.raises(SpecError, match=r"departures\.warm_up.*allowed: 'models', 'lengths'"):
        parse_spec(yaml.safe_dump({**bare, "departures": {"warm_up": "x"}}), check_files=False)
    # The H200 sweep amended after its runs still plans to the ids it ran under (tests/test_plan.py) and says why.
    assert load_spec(PACKAGE_ROOT / "results" / "h200" / "accel-8b" / "spec.yaml").amendments
