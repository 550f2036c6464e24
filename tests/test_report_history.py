"""How a sweep's runs were taken (report/analysis/history.py), read from the H200 runs' own records: the campaign's four
resumed commands as four worker processes, its two models an hour apart, the accel sweep's cold first repetition."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report_pairings import unpack

from report.analysis.history import history, history_text
from report.document.render import _load
from report.table.flat import results_table
from specs.artifacts import SweepLayout


def _history(name: str, into: Path):
    results, _ = _load(SweepLayout(unpack(name, into)), strict=True)
    return history(results, results_table(results))


def test_the_campaign_s_resumed_commands_are_four_processes_and_its_models_were_not_interleaved(tmp_path) -> None:
    h = _history("campaign-h100", tmp_path)
    assert h.commits == ("966dbce",) and h.warmups == (1,) and h.interleaved is False and not h.cold
    assert [(p.started_at[11:16], p.finished_at[11:16], len(p.run_ids)) for p in h.processes] == [
        ("15:53", "15:58", 4), ("16:00", "16:08", 5), ("17:04", "17:12", 30), ("17:12", "17:16", 3)]
    assert [set(p.models) for p in h.processes] == [{"llama-8b-synthetic"}] * 2 + [{"llada-8b-synthetic"}] * 2
    # The two runs whose extrapolation failed its check: the first two LLaDA runs of the third process.
    assert h.process_of("796b4d4b0f06") == (3, 4, 1) and h.process_of("853988b648a8") == (3, 4, 2)
    assert h.process_of("no-such-run") is None
    text = history_text(h)
    assert text.startswith("measured at commit 966dbce, in 4 worker processes (15:53–15:58 UTC, 4 runs; ")
    assert "LLaMA and LLaDA not interleaved (LLaMA 15:53–16:08, LLaDA 17:04–17:16), 1 warm-up pass a run" in text


def test_a_first_repetition_the_warm_up_did_not_settle_is_named(tmp_path) -> None:
    h = _history("accel-8b", tmp_path)
    assert len(h.processes) == 1 and h.interleaved is False
    (cold,) = h.cold
    assert cold.run_id == "a286390f05fa" and cold.first_s == pytest.approx(7.613, abs=1e-3)
    assert cold.others_s == pytest.approx((5.180 + 5.080) / 2, abs=1e-2)
    assert "1 run's first repetition ran over 1.25x the median of the others" in history_text(h)
