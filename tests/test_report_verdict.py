"""The verdict: at most five generated sentences (who is faster at equal quality at B = 1, from which batch LLaMA
stays ahead, how sure), first in report.md, report.html, findings.json and the terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_fixtures import SMOKE_LIKE, VARIANTS, write_sweep

from report.pairings import BEST_PAIRING, VANILLA_PAIRING, FindingsFile, Pairing, PairingPoint, SParity
from report.render import render_report
from report.verdict import MAX_SENTENCES, NO_PAIRING, ONLY_VANILLA, verdict

PPL = SParity(metric="gen_ppl", reference="llama-mini sampled (T = 1)", steps=4, bound="=", ci_low_steps=4,
              ci_high_steps=8, parity_fraction=1.0)
BERT = SParity(metric="bertscore_f1", reference="llama-mini greedy", steps=None, bound=None, ci_low_steps=32,
               parity_fraction=0.24)


def point(batch: int, speedup: float, low: float, high: float, *, llama: str = "vanilla", llada: str = "vanilla",
          reps: int = 5, interval: str = "range") -> PairingPoint:
    return PairingPoint(
        batch_size=batch, llama_impl=llama, llada_impl=llada, llama_run_id="a" * 12, llada_run_id="b" * 12,
        llama_latency_s=speedup, llada_latency_s=1.0, speedup=speedup, speedup_low=low, speedup_high=high,
        interval=interval, interval_label="", llama_repetitions=reps, llada_repetitions=reps,
        llada_extrapolated=False, throughput_ratio=1 / speedup)


def pairing(steps: int, points: list[PairingPoint], b_star: float, bound: str = "=", *, kind: str = VANILLA_PAIRING,
            s_parity: tuple[SParity, ...] = (PPL, BERT)) -> Pairing:
    return Pairing(
        pairing=kind, hardware="cpu", prompt_length=32, generation_length=32, steps=steps, block_length=32,
        llama_model="llama-mini", llada_model="llada-mini", llama_impls=list(dict.fromkeys(p.llama_impl for p in points)),
        llada_impls=list(dict.fromkeys(p.llada_impl for p in points)), s_parity=list(s_parity),
        at_s_parity=[s.metric for s in s_parity if s.steps == steps], speedups=points, b_star_measured=b_star,
        b_star_bound=bound, b_star_roofline=None, roofline_profile=None)


SMOKE = [
    pairing(2, [point(1, 4.5, 3.3, 5.2), point(16, 1.06, 0.96, 1.13)], 16, ">"),
    pairing(4, [point(1, 2.15, 1.87, 2.46), point(4, 1.07, 0.97, 1.15), point(16, 0.333, 0.279, 0.39)], 4.32),
    pairing(8, [point(1, 1.12, 0.93, 1.29), point(16, 0.18, 0.15, 0.28)], 1.24),
]
BEST = [pairing(4, [point(1, 1.6, 1.3, 1.9, llama="static-compile", llada="dual-cache"),
                    point(16, 0.5, 0.4, 0.6, llama="static-compile", llada="dual-cache")], 3.7, kind=BEST_PAIRING)]


def test_each_pairing_says_who_is_faster_at_parity_and_where_llama_takes_over() -> None:
    sentences = verdict([*SMOKE, *BEST])
    assert 1 < len(sentences) <= MAX_SENTENCES
    vanilla, best, sure = sentences
    assert vanilla.startswith("Vanilla against vanilla (the protocol) on cpu, 32 + 32 tokens, block 32")
    assert ("at equal quality (perplexity as good as llama-mini sampled (T = 1) from 4 steps) LLaDA is 2.15x "
            "[1.87, 2.46] faster than LLaMA at B = 1, and LLaMA stays ahead from B = 4.32") in vanilla
    assert "LLaDA's BERTScore F1 never matches llama-mini greedy's within the 2–8 steps swept" in vanilla
    assert best.startswith("Each at its best (LLaMA static-compile, LLaDA dual-cache)")
    assert "LLaDA is 1.6x [1.3, 1.9] faster than LLaMA at B = 1, and LLaMA stays ahead from B = 3.7" in best
    assert sure.startswith("How sure: each speedup rests on 5 + 5 measured repetitions")
    assert "the range of the ratio, not a confidence interval" in sure
    assert "S_parity on perplexity has a 95% bootstrap CI over prompts of 4–8 steps" in sure


def test_the_sentences_come_from_the_numbers() -> None:
    """Generated, never written: another measurement gives another verdict."""
    slower = [pairing(4, [point(1, 0.5, 0.4, 0.6), point(16, 0.2, 0.1, 0.3)], 1, "<=")]
    (sentence, _, _) = verdict(slower)
    assert "LLaMA is 2x [1.67, 2.5] faster than LLaDA at B = 1" in sentence
    assert "LLaMA is ahead from the smallest batch measured, B = 1, on" in sentence
    ahead = [pairing(4, [point(1, 3.0, 2.5, 3.5), point(16, 1.5, 1.2, 1.8)], 16, ">")]
    assert "LLaDA stays ahead up to the largest batch measured, B = 16" in verdict(ahead)[0]


def test_a_bracket_around_one_is_a_tie_not_a_winner() -> None:
    level = [pairing(4, [point(1, 1.04, 0.78, 1.10), point(8, 0.79, 0.74, 0.80)], 1.39)]
    first = verdict(level)[0]
    assert "the two are level at B = 1 (speedup 1.04x [0.78, 1.1], a bracket around 1)" in first
    assert "faster" not in first


def test_without_quality_it_says_so_and_still_answers_the_speed() -> None:
    points = [point(1, 2.82, 2.48, 4.19, reps=3), point(8, 0.422, 0.418, 0.449, reps=3)]
    sentences = verdict([pairing(64, points, 3.11, s_parity=())])
    assert "without a quality measurement, at 64 steps LLaDA is 2.82x [2.48, 4.19] faster" in sentences[0]
    assert sentences[1] == ONLY_VANILLA
    assert "3 + 3 measured repetitions" in sentences[2] and "S_parity" not in sentences[2]


def test_many_settings_give_ranges_in_one_sentence() -> None:
    many = [pairing(s, [point(1, x, x * 0.9, x * 1.1, reps=6, interval="bca95"), point(64, 0.1, 0.09, 0.11)], b,
                    s_parity=())
            for s, x, b in ((16, 25.3, 28.8), (64, 6.3, 7.3), (256, 1.6, 1.36))]
    first, _, sure = verdict(many)
    assert "LLaDA is 1.6x–25.3x faster than LLaMA at B = 1 over 3 settings" in first
    assert "LLaMA stays ahead from B = 1.36 to B = 28.8, depending on the setting" in first
    assert "95% BCa CI" in sure


def test_no_pairing_no_verdict() -> None:
    assert verdict([]) == [NO_PAIRING]


# ---------------------------------------------------------------- where it stands


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory):
    return render_report(write_sweep(tmp_path_factory.mktemp("verdict"), VARIANTS), echo=False)


def test_findings_json_opens_with_the_verdict(rendered) -> None:
    text = (rendered.sweep_dir / "findings.json").read_text(encoding="utf-8")
    assert text.lstrip("{\n ").startswith('"verdict"')
    found = FindingsFile.model_validate_json(text)
    assert found.verdict == verdict(found.findings) and len(found.verdict) <= MAX_SENTENCES


def test_the_report_shows_the_verdict_before_its_first_table(rendered) -> None:
    found = FindingsFile.model_validate_json((rendered.sweep_dir / "findings.json").read_text(encoding="utf-8"))
    markdown = rendered.markdown.read_text(encoding="utf-8")
    assert markdown.index("**Verdict**") < markdown.index(f"- {found.verdict[0]}") < markdown.index("| ")
    html = rendered.html.read_text(encoding="utf-8")
    assert html.index('id="verdict"') < html.index("<table")
    assert re.search(r"<h2>Verdict</h2><ul><li>Vanilla against vanilla", html)


def test_the_terminal_ends_with_the_verdict_and_the_reports_path(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = render_report(write_sweep(tmp_path, SMOKE_LIKE), echo=True)
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    after_table = printed[printed.index("Verdict") - 1:]
    assert len(after_table) <= 25
    assert printed[-1].startswith(f"report: {out.html} ")
    assert printed[-2].startswith(f"The full Findings, both pairings and any variants: {out.markdown}")
    assert "Findings" not in printed[:printed.index("Verdict")]  # the Findings table lives in the report
