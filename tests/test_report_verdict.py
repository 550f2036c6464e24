"""The verdict: short, first in report.md, report.html, findings.json and the terminal (one bullet per distinct
pairing, the quality, how sure; at most 12 terminal lines for a pair); and in full in the report's Findings (at most
five generated sentences a pair: each at its best first, then LLaMA at its best against vanilla LLaDA, then eager
against eager with its host overhead; who is faster at equal quality at B = 1, from which batch LLaMA stays ahead,
how sure and how the runs were taken)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_fixtures import SMOKE_LIKE, VARIANTS, write_sweep

from report.answer.findings_file import FindingsFile
from report.answer.pairing.build import (
    AR_BEST_PAIRING,
    BEST_PAIRING,
    VANILLA_PAIRING,
    Pairing,
    PairingPoint,
    SParity,
)
from report.document.render import render_report
from report.answer.verdict.short import QUALITY_LINES, TERMINAL_LINES, verdict, verdict_text
from report.answer.verdict.full import MAX_SENTENCES, NO_PAIRING, ONLY_VANILLA, full_verdict

PPL = SParity(metric="gen_ppl", reference="llama-mini greedy", judge="packaged-smollm2", steps=4, bound="=",
              replicate_low_steps=4, replicate_high_steps=8, parity_fraction=1.0,
              margin="within 10% (|Δ log ppl| ≤ log 1.1)", alpha=0.05, n_prompts=24, replicate_steps=[4, 8],
              replicate_shares=[0.58, 0.42])
# BERTScore cannot tell its reference from an unrelated passage here: it decides nothing.
BERT = SParity(metric="bertscore_f1", reference="llama-mini greedy", steps=None, bound=None, replicate_low_steps=32,
               parity_fraction=0.24, margin="within 0.02", alpha=0.05, n_prompts=24, decides=False,
               gate="cannot separate text from chance at this scale")
BERT_AT_8 = BERT.model_copy(update={"steps": 8, "bound": "=", "replicate_low_steps": 8, "replicate_high_steps": 8,
                                    "parity_fraction": 0.9, "decides": True, "replicate_steps": [8],
                                    "replicate_shares": [0.9]})


def point(batch: int, speedup: float, low: float, high: float, *, llama: str = "vanilla", llada: str = "vanilla",
          llama_execution: str = "eager", llada_execution: str = "eager", reps: int = 5, sessions: int = 3,
          level: float = 0.95, **measured: object) -> PairingPoint:
    return PairingPoint(
        batch_size=batch, llama_impl=llama, llada_impl=llada, llama_execution=llama_execution,
        llada_execution=llada_execution, llama_run_id="a" * 12, llada_run_id="b" * 12, llama_latency_s=speedup,
        llada_latency_s=1.0, speedup=speedup, speedup_low=low, speedup_high=high, interval_level=level,
        interval_method="t-sessions", interval_label=f"95% t interval over sessions, {sessions} sessions x {reps} + {reps} repetitions",
        sessions=sessions, llama_repetitions=reps, llada_repetitions=reps,
        **{"llada_extrapolated": False, **measured})


def pairing(steps: int, points: list[PairingPoint], b_star: float, bound: str = "=", *, kind: str = VANILLA_PAIRING,
            s_parity: tuple[SParity, ...] = (PPL, BERT), generation: int = 32,
            interval: tuple[float, str, float, str] | None = None) -> Pairing:
    low, low_bound, high, high_bound = interval or (b_star * 0.8, bound, b_star * 1.25, bound)
    return Pairing(
        pairing=kind, hardware="cpu", prompt_length=32, generation_length=generation, steps=steps, block_length=32,
        llama_model="llama-mini", llada_model="llada-mini", llama_impls=list(dict.fromkeys(p.llama_impl for p in points)),
        llada_impls=list(dict.fromkeys(p.llada_impl for p in points)), s_parity=list(s_parity),
        at_s_parity=[s.metric for s in s_parity if s.steps == steps], speedups=points, b_star_measured=b_star,
        b_star_bound=bound, b_star_low=low, b_star_low_bound=low_bound, b_star_high=high, b_star_high_bound=high_bound,
        b_star_level=0.95, roofline_profile=None)


SMOKE = [
    pairing(2, [point(1, 4.5, 3.3, 5.2), point(16, 1.06, 0.96, 1.13)], 16, ">"),
    pairing(4, [point(1, 2.15, 1.87, 2.46), point(4, 1.07, 0.97, 1.15), point(16, 0.333, 0.279, 0.39)], 4.32),
    pairing(8, [point(1, 1.12, 0.93, 1.29), point(16, 0.18, 0.15, 0.28)], 1.24),
]
COMPILED_VS_EAGER = {"llama": "static-compile", "llada": "dual-cache", "llama_execution": "compiled"}
BEST = [pairing(4, [point(1, 1.6, 1.3, 1.9, **COMPILED_VS_EAGER), point(16, 0.5, 0.4, 0.6, **COMPILED_VS_EAGER)],
                3.7, kind=BEST_PAIRING)]


def test_each_pairing_names_its_step_count_the_metric_at_parity_and_b_star_with_its_interval() -> None:
    sentences = full_verdict([*SMOKE, *BEST])
    assert 1 < len(sentences) <= MAX_SENTENCES
    best, vanilla, quality, sure = sentences
    assert vanilla.startswith("Eager against eager (vanilla, the protocol's pair; it measures each side's host "
                              "overhead per forward as much as the architectures) on cpu, 32 + 32 tokens, block 32, "
                              "at 4 steps (K = N_out/8), where quality matches on perplexity only: ")
    assert ("LLaDA is 2.15x [1.87, 2.46] faster than LLaMA at B = 1, and LLaMA stays ahead from B* = 4.32 "
            "[3.46, 5.4] (interpolated between measured batches; at least 85%: 3 pointwise 95% intervals "
            "inverted)") in vanilla
    # Parity on perplexity alone is never called equal quality.
    assert "equal quality" not in " ".join(sentences)
    assert best.startswith("Each at its best (LLaMA static-compile (compiled); LLaDA dual-cache (eager): not like "
                           "for like, a compiled LLaMA against an eager LLaDA; no compiled or graph-captured LLaDA "
                           "was measured)")
    assert "LLaDA is 1.6x [1.3, 1.9] faster than LLaMA at B = 1" in best
    # The judge, the reference (the timed greedy text), the margin and the test, and every step count that S_parity's
    # replicates reach with its speedup and B*.
    assert ("perplexity judged by packaged-smollm2 (SmolLM2-135M-Instruct, a pretrained model this package did not "
            "train), against llama-mini greedy (the text that was timed), within 10% (|Δ log ppl| ≤ log 1.1) for "
            "perplexity and within 0.02 for BERTScore F1, by a two one-sided test at 5% over 24 paired prompts): "
            "perplexity: parity from 4 steps on") in quality
    assert ("S_parity over bootstrap replicates of the prompts: at 4 steps (58%) 2.15x [1.87, 2.46] at B = 1, B* 4.32 "
            "[3.46, 5.4]; at 8 steps (42%) 1.12x [0.93, 1.29] at B = 1, B* 1.24 [0.992, 1.55]") in quality
    # A metric at chance is never "never matches": it decides nothing.
    assert "BERTScore F1 decides no parity: cannot separate text from chance at this scale" in quality
    assert "never matches" not in quality
    assert sure.startswith("How sure: each speedup's interval is a 95% t interval over sessions, 3 sessions x 5 + 5")
    assert "B*'s interval inverts one of them per batch, which guarantees at least 85%" in sure
    assert "S_parity" not in sure  # its replicate shares are the quality sentence's, said once
    assert "95% CI" not in " ".join(sentences)


def test_equal_quality_only_where_every_headline_metric_holds_parity() -> None:
    both = [pairing(k, [point(1, x, x * 0.9, x * 1.1), point(16, 0.3, 0.2, 0.4)], b, s_parity=(PPL, BERT_AT_8))
            for k, x, b in ((4, 2.15, 4.3), (8, 1.12, 1.24))]
    first = full_verdict(both)[0]
    assert ("at equal quality (perplexity as good as llama-mini greedy from 4 steps, BERTScore F1 as good "
            "as llama-mini greedy from 8 steps) at 8 steps (K = N_out/4): LLaDA is 1.12x") in first


def test_the_sentences_come_from_the_numbers() -> None:
    """Generated, never written: another measurement gives another verdict."""
    slower = [pairing(4, [point(1, 0.5, 0.4, 0.6), point(16, 0.2, 0.1, 0.3)], 1, "<=", interval=(1, "<=", 1, "<="))]
    sentence = full_verdict(slower)[0]
    assert "LLaMA is 2x [1.67, 2.5] faster than LLaDA at B = 1" in sentence
    assert "LLaMA stays ahead from B* ≤ 1 [≤ 1, ≤ 1] (LLaMA ahead already at the smallest batch measured" in sentence
    ahead = [pairing(4, [point(1, 3.0, 2.5, 3.5), point(16, 1.5, 1.2, 1.8)], 16, ">", interval=(16, ">", 16, ">"))]
    assert "B* > 16 [> 16, > 16] (LLaDA still ahead at the largest batch measured" in full_verdict(ahead)[0]


def test_an_interval_around_one_is_a_tie_not_a_winner() -> None:
    level = [pairing(4, [point(1, 1.04, 0.78, 1.10), point(8, 0.79, 0.74, 0.80)], 1.39)]
    first = full_verdict(level)[0]
    assert "neither is surely faster at B = 1 (speedup 1.04x [0.78, 1.1])" in first
    assert "faster than" not in first


def test_without_quality_it_answers_at_quarter_half_and_full_steps_beside_the_published_quality() -> None:
    at = {k: pairing(k, [point(1, x, x * 0.9, x * 1.1, reps=3), point(8, 0.4, 0.3, 0.5, reps=3)], b, s_parity=(),
                     generation=256) for k, x, b in ((16, 14.5, 27.7), (64, 5.16, 6.04), (128, 2.5, 2.9), (256, 1.33, 1.36))}
    sentences = full_verdict(list(at.values()))
    first = sentences[0]
    assert "at K = N_out/4 (64 steps for 256 tokens), quality not measured: LLaDA is 5.16x" in first
    assert "at K = N_out/2 (128 steps for 256 tokens)" in first and "at K = N_out (256 steps for 256 tokens)" in first
    assert "16 steps" not in first  # a share of N_out the verdict does not speak of
    assert sentences[1] == ONLY_VANILLA
    assert sentences[2].startswith("Quality was not measured here: ") and "arXiv:2502.09992" in sentences[2]
    assert "S_parity" not in sentences[3]


def test_many_settings_give_ranges_in_one_clause() -> None:
    many = [pairing(64, [point(1, x, x * 0.9, x * 1.1), point(64, 0.1, 0.09, 0.11)], b, s_parity=(), generation=g)
            for g, x, b in ((256, 5.2, 6.0), (256, 6.3, 7.3))]
    first = full_verdict(many)[0]
    assert "LLaDA is 5.2x–6.3x faster than LLaMA at B = 1 over 2 settings" in first
    assert "LLaMA stays ahead from B* 6–7.3 (each with its interval in the Findings)" in first


def test_no_pairing_no_verdict_and_an_unanswered_pair_is_named() -> None:
    assert full_verdict([]) == [NO_PAIRING]
    reason = "dream-tiny (Dream) vs qwen-tiny (Qwen2.5): no answer: every dream-tiny run failed (6 error)"
    assert full_verdict([], [reason]) == [f"No verdict: {reason}."]
    sentences = full_verdict(SMOKE, [reason])
    assert sentences[-1] == f"{reason}."
    # With a second pair in the sweep, the answered pair's sentences name their models.
    assert all(s.startswith("llada-mini (LLaDA) vs llama-mini (LLaMA): ") for s in sentences[:-1])


# ---------------------------------------------------------------- where it stands


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory):
    return render_report(write_sweep(tmp_path_factory.mktemp("verdict"), VARIANTS), echo=False)


def test_findings_json_opens_with_the_verdict(rendered) -> None:
    text = (rendered.sweep_dir / "findings.json").read_text(encoding="utf-8")
    assert text.lstrip("{\n ").startswith('"verdict"')
    found = FindingsFile.model_validate_json(text)
    assert found.provenance.startswith("measured at commit ")
    assert found.verdict == verdict(found.findings, found.unanswered, found.disturbed)
    # One bullet per distinct pairing (three here), the quality and how sure.
    assert len(found.verdict) == 5 and found.verdict[-1].startswith("How sure: ")


def test_the_reports_findings_give_the_verdict_in_full(rendered) -> None:
    found = FindingsFile.model_validate_json((rendered.sweep_dir / "findings.json").read_text(encoding="utf-8"))
    markdown = rendered.markdown.read_text(encoding="utf-8")
    findings = markdown[markdown.index("## 1. Findings"):markdown.index("## 2.")]
    assert "The verdict in full:" in findings
    for sentence in full_verdict(found.findings, found.unanswered, found.provenance, found.pair_provenance):
        assert sentence in findings
    assert "host overhead per forward" in findings and "measured at commit " in findings


def test_the_report_shows_the_verdict_before_its_first_table(rendered) -> None:
    found = FindingsFile.model_validate_json((rendered.sweep_dir / "findings.json").read_text(encoding="utf-8"))
    markdown = rendered.markdown.read_text(encoding="utf-8")
    assert markdown.index("**Verdict**") < markdown.index(f"- {found.verdict[0]}") < markdown.index("| ")
    html = rendered.html.read_text(encoding="utf-8")
    assert html.index('id="verdict"') < html.index("<table")
    assert re.search(r"<h2>Verdict</h2><ul><li>Each at its best", html)


def test_the_terminal_ends_with_the_verdict_and_the_reports_path(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = render_report(write_sweep(tmp_path, SMOKE_LIKE), echo=True)
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    after_table = printed[printed.index("Verdict"):]
    assert len(after_table) - _quality_overflow(after_table) <= TERMINAL_LINES
    assert printed[-1].startswith(f"report: {out.html} ")
    assert printed[-1].endswith(f"; in full, with every pairing, the roofline, the sessions and how the runs were "
                                f"taken: {out.markdown} and findings.json")
    assert "Findings" not in printed[:printed.index("Verdict")]  # the Findings table lives in the report


def test_a_best_pairing_of_eager_sides_says_neither_compiled_nor_graph_captured_ran() -> None:
    eager = {"llama": "vanilla", "llada": "dual-cache"}
    best = [pairing(4, [point(1, 2.8, 1.5, 5.2, **eager), point(16, 0.5, 0.4, 0.6, **eager)], 11, kind=BEST_PAIRING)]
    sentence = full_verdict([*SMOKE, *best])[0]
    assert sentence.startswith("Each at its best (LLaMA vanilla (eager); LLaDA dual-cache (eager); no compiled or "
                               "graph-captured LLaMA or LLaDA was measured)")
    assert "not like for like" not in sentence


def test_the_fast_pairing_comes_first_then_the_ar_at_its_best_then_eager_against_eager_with_its_host_overhead():
    """The order of the answer: each at its best, LLaMA at its best against vanilla LLaDA beside it, then vanilla
    against vanilla, said to be eager against eager with each side's time per forward and share of its roofs."""
    compiled = {"llama": "static-compile", "llama_execution": "compiled"}
    fast = {"llama_forward_s": 0.0058, "llama_roofs_fraction": 0.62}
    best = pairing(4, [point(1, 1.04, 0.6, 1.5, **COMPILED_VS_EAGER, **fast),
                       point(16, 0.8, 0.7, 0.9, **COMPILED_VS_EAGER)], 1.4, kind=BEST_PAIRING)
    ar_best = pairing(4, [point(1, 0.82, 0.73, 0.9, **compiled, **fast), point(16, 0.16, 0.1, 0.2, **compiled)], 1,
                      "<=", kind=AR_BEST_PAIRING, interval=(1, "<=", 1, "<="))
    vanilla = pairing(4, [point(1, 2.8, 1.8, 5.2, llama_forward_s=0.0202, llama_roofs_fraction=0.18,
                                llada_forward_s=0.0286, llada_roofs_fraction=0.55), point(16, 0.4, 0.3, 0.5)], 3.1)
    sentences = full_verdict([vanilla, ar_best, best], context="measured at commit 966dbce, in 1 worker process")
    assert sentences[0].startswith("Each at its best (LLaMA static-compile (compiled); LLaDA dual-cache (eager)")
    assert sentences[1].startswith("LLaMA at its best against vanilla LLaDA (LLaMA static-compile (compiled); LLaDA "
                                   "vanilla (eager))")
    assert "LLaMA is 1.22x [1.11, 1.37] faster than LLaDA at B = 1" in sentences[1]
    assert sentences[2].startswith("Eager against eager (vanilla, the protocol's pair; it measures each side's host "
                                   "overhead per forward as much as the architectures: at B = 1 eager LLaMA's decode "
                                   "pass took 20.2 ms, 18% of its roofs, against 5.8 ms compiled; vanilla LLaDA's "
                                   "step 28.6 ms, 55%)")
    assert sentences[-1].endswith("; measured at commit 966dbce, in 1 worker process.")


def test_an_extrapolated_unchecked_or_bimodal_point_says_so_where_its_speedup_is_given() -> None:
    marks = {"llada_extrapolated": True, "llada_timed_steps": 4, "llada_extrapolation_checked": False,
             "llada_step_modes_s": [0.0216, 0.0312], "speedup_at_modes": [1.31, 0.903]}
    scaled = [pairing(256, [point(1, 1.33, 0.89, 1.68, **marks), point(8, 0.19, 0.18, 0.2, **marks)], 1.36,
                      s_parity=(), generation=256)]
    first, *_, sure = full_verdict(scaled)
    assert ("speedup 1.33x [0.89, 1.68]) (LLaDA timed 4 steps and scaled, unchecked; MODES: the steps at this shape "
            "split at 21.6 / 31.2 ms, speedup 1.31x / 0.903x at each)") in first
    assert "2 of the 2 diffusion latencies behind these speedups are extrapolated from their first timed steps " \
           "(2 unchecked)" in sure


# ---------------------------------------------------------------- read in thirty seconds


def _quality_overflow(lines: list[str]) -> int:
    """The terminal lines the quality bullet (report/answer/verdict/quality.py) takes beyond its budget of QUALITY_LINES:
    the budget binds this module's bullets whatever that sentence's length."""
    start = next(i for i, line in enumerate(lines) if line.startswith("  - ") and "Quality (" in line)
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    "))
    return max(0, end - start - QUALITY_LINES)


def _terminal(sentences: list[str]) -> list[str]:
    text = verdict_text(sentences, Path("/sweep/report.md"), Path("/sweep/findings.json"), "report: x")
    return text.lstrip("\n").splitlines()


def test_one_pair_prints_at_most_twelve_lines() -> None:
    """The dual-cache best pairing beside vanilla: two pairings, quality, how sure."""
    one = _terminal(verdict([*SMOKE, *BEST]))
    assert len(one) - _quality_overflow(one) <= TERMINAL_LINES


def test_a_best_pairing_that_is_the_vanilla_one_is_one_line_not_a_second_bullet() -> None:
    best_is_vanilla = [p.model_copy(update={"pairing": BEST_PAIRING}) for p in SMOKE]
    sentences = verdict([*SMOKE, *best_is_vanilla])
    assert sentences[0].startswith("Vanilla against vanilla (both eager) on cpu, 32 + 32 tokens, block 32, at 4 steps")
    assert sentences[1] == "Each at its best is the vanilla pairing here: no variant ran faster at 4 steps."
    assert sum("2.15x" in s for s in sentences if not s.startswith("Quality")) == 1  # the numbers once
    # A best pairing of other runs keeps its own bullet, first.
    distinct = verdict([*SMOKE, *BEST])
    assert distinct[0].startswith("Each at its best (LLaMA static-compile (compiled); LLaDA dual-cache (eager)) on cpu, "
                                 "32 + 32 tokens, block 32, at 4 ")
    assert "LLaDA is 1.6x [1.3, 1.9] faster than LLaMA at B = 1" in distinct[0]
    assert distinct[1].startswith("Vanilla against vanilla (both eager)") and len(distinct) == 4


def test_a_tie_at_b1_beside_b_star_below_the_batches_says_what_each_rests_on() -> None:
    """'Neither is surely faster at B = 1' and 'LLaMA stays ahead from B* <= 1' read as a contradiction: B* rests
    on the medians, the tie on their interval, and the words say so."""
    tie = [pairing(4, [point(1, 0.9, 0.6, 1.2), point(16, 0.3, 0.2, 0.4)], 1, "<=", interval=(1, "<=", 2.5, "="))]
    for sentence in (verdict(tie)[0], full_verdict(tie)[0]):
        assert "neither is surely faster at B = 1 (speedup 0.9x [0.6, 1.2])" in sentence
        assert "on the medians alone LLaMA is ahead at every batch measured (B* ≤ 1" in sentence
        assert "but at B = 1 the interval holds 1, so that lead is not sure there" in sentence
        assert "stays ahead from" not in sentence
    # A sure lead keeps the plain words.
    assert "LLaMA stays ahead from B* ≤ 1 [≤ 1, ≤ 1]" in verdict(
        [pairing(4, [point(1, 0.5, 0.4, 0.6), point(16, 0.2, 0.1, 0.3)], 1, "<=", interval=(1, "<=", 1, "<="))])[0]


def test_the_findings_figure_marks_the_b_star_the_verdict_speaks_of(rendered) -> None:
    """The verdict speaks at one step count; the Findings figure's bold X is that step count's B*, labelled so."""
    found = FindingsFile.model_validate_json((rendered.sweep_dir / "findings.json").read_text(encoding="utf-8"))
    spoken = next(s for s in found.verdict if s.startswith("Vanilla against vanilla"))
    figure = next(p for p in rendered.figures if p.png.stem.startswith("findings_throughput"))
    data = figure.png.with_suffix(".svg").read_text(encoding="utf-8")
    marked = re.findall(r"B\*(?: [^<]*?)? at (\d+) steps[^<]*the verdict", data)
    assert marked and all(f"at {k} steps" in spoken for k in marked)
