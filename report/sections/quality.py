"""Section 6, Quality vs computation: the judge's bias, the parity tables, the calibration, quality per setting
and the ELBO's precision."""

from __future__ import annotations

import polars as pl

from report.document.content import Block, Paragraph, Table, fmt_float
from report.answer.pairing.pairs import is_ar, table_sides
from report.analysis.quality import QualityData
from report.sections.cells import column_table, hardware_column, quality_flag
from report.sections.inputs import Blocks, ReportInputs
from report.sections.parity import parity_tables
from report.table.flat import provenance_notes, quality_notes, unlearned_warnings, vanilla_runs
from specs.registry import family

BERTSCORE_WINDOW_NOTE = (
    "BERTScore scores the whole text: a continuation or reference longer than the scorer's window (510 subword "
    "tokens for BERT-style models) is embedded in consecutive windows and matched as one text."
)


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    """The runs' own warnings before the figures; the tables after them."""
    table = inputs.table
    lead: list[Block] = [Paragraph(note, warning=True) for note in unlearned_warnings(vanilla_runs(table))]
    lead += [Paragraph(f"Quality note from the runs: {note}", warning=True) for note in quality_notes(table)]
    quality = inputs.quality
    tail: list[Block] = []
    provenance = provenance_notes(table)
    if provenance:
        tail.append(Paragraph("Models: " + " ".join(provenance)))
    judge = judge_note(quality)
    if judge:
        tail.append(Paragraph(judge))
    tail += parity_tables(quality.parity, multi, provenance, table_sides(table))
    if quality.calibration.height:
        tail.append(_calibration_table(quality.calibration, multi))
    if quality.by_setting.height:
        tail.append(_setting_table(quality.by_setting, multi))
        if quality.elbo_precision.height:
            tail.append(_elbo_table(quality.elbo_precision, multi))
    else:
        tail.append(Paragraph("No run recorded quality metrics."))
    return Blocks(lead, tail)


def judge_note(quality: QualityData) -> str | None:
    """The judge's bias, in numbers, where a perplexity judge is the AR model under test: its greedy text is that
    judge's own mode. The judge of each perplexity row is read from the calibration's `scored_by`; an independent
    judge (one that generated none of the text) gets no note."""
    for metric, row_name in (("gen_ppl", "Perplexity"), ("gen_ppl_second", "The second perplexity row")):
        setting = quality.by_setting.filter((pl.col("metric") == metric) & is_ar())
        judges = set(quality.calibration.filter(pl.col("metric") == metric)["scored_by"].to_list())
        own = setting.filter(pl.col("model").is_in(list(judges)))
        if own.height:
            return _self_judged_note(quality, own, metric, row_name)
    return None


def _self_judged_note(quality: QualityData, own: pl.DataFrame, metric: str, row_name: str) -> str:
    title, judge = family(own["arch"][0]).title, own["model"][0]
    greedy = own.filter((pl.col("continuation") == "generated") & (pl.col("temperature") == 0))
    human = quality.calibration.filter((pl.col("metric") == metric) & (pl.col("text") == "human continuation"))
    parts = ([f"{title}'s greedy text scores a median perplexity of {fmt_float(greedy['value'][0])}"]
             if greedy.height else [])
    parts += [f"the human continuation {fmt_float(human['value'][0])}"] if human.height else []
    levels = f" ({', '.join(parts)})" if parts else ""
    if metric == "gen_ppl":
        return (f"{row_name} is judged by {judge}, the {title} under test: its greedy text is its own mode{levels}, "
                f"so a perplexity headline against {title} greedy would favour the judge. The headline for perplexity "
                f"is {title} sampled (else the human continuation's level); {title} greedy stays as a second row, and "
                "the repeated-bigram rate stands beside every perplexity, since repetitive text also scores a low "
                "perplexity.")
    return (f"{row_name} is judged by {judge}, the {title} under test: its greedy text is its own mode{levels}, so "
            "that row favours its judge and decides nothing.")


def _median_interval(r: dict) -> str:
    return f"[{fmt_float(r['interval_low'], 4)}, {fmt_float(r['interval_high'], 4)}] ({r['interval']})"


def _setting_table(setting: pl.DataFrame, multi: bool) -> Table:
    algs = "sampler_setting" in setting.columns and setting["sampler_setting"].drop_nulls().len() > 0
    columns = [*hardware_column(multi), ("model", "model"), ("P", "prompt_length"), ("N_out", "generation_length"),
               ("steps", "steps"), ("block", "block_length"), *([("setting", "sampler_setting")] if algs else []),
               ("continuation", "continuation"), ("metric", "metric"),
               ("median", lambda r: fmt_float(r["value"], 4)), ("interval", _median_interval),
               ("repeated-bigram rate", lambda r: fmt_float(r["repetition"], 3)),
               ("distinct-2 vs human", _diversity_cell),
               ("ranked worst", lambda r: str(r["empty"])), ("B", "batch_size")]
    return column_table(
        setting, columns,
        "Quality per setting at its smallest batch size: median over prompts with its interval; the "
        "repeated-bigram rate of the same texts beside every perplexity; distinct-2 against the human "
        "continuation's, DEGENERATE where it falls short by more than quality.parity.diversity_margin (no parity "
        "there, and its perplexity is no quality); 'ranked worst' counts continuations "
        "too short for the metric (an empty text has no perplexity), which rank worst instead of leaving their "
        "prompt out. " + BERTSCORE_WINDOW_NOTE + quality_flag(setting))


def _diversity_cell(r: dict) -> str:
    if r.get("diversity") is None:
        return "–"
    cell = f"{fmt_float(r['diversity'], 2)} vs {fmt_float(r['human_diversity'], 2)}"
    return cell + (" DEGENERATE" if r.get("degenerate") else "")


def _calibration_table(calibration: pl.DataFrame, multi: bool) -> Table:
    columns = [*hardware_column(multi), ("metric", "metric_label"), ("P", "prompt_length"),
               ("N_out", "generation_length"), ("scored by", "scored_by"), ("text", "text"),
               ("median", lambda r: fmt_float(r["value"], 4)), ("interval", _median_interval),
               ("what it means for this metric", "meaning")]
    return column_table(calibration, columns,
                        "Calibration: the human continuation and an unrelated passage scored as if generated, read "
                        "per metric (for perplexity and the ELBO the human text is a level, not the best end; for "
                        "degeneracy the unrelated passages are the same texts rotated, so only the human level is "
                        "shown)")


def _elbo_table(precision: pl.DataFrame, multi: bool) -> Table:
    columns = [*hardware_column(multi), ("LLaDA", "model"), ("N_out", "generation_length"),
               ("Monte-Carlo samples", "samples"), ("prompts", "n_prompts"),
               ("SE per prompt (median)", lambda r: fmt_float(r["stderr_per_prompt"], 3)),
               ("SE share in the median over prompts", lambda r: fmt_float(r["stderr_of_median"], 3)),
               ("smallest difference between adjacent step counts",
                lambda r: fmt_float(r["smallest_step_difference"], 3)),
               ("small enough", lambda r: "–" if r["small_enough"] is None else (
                   "yes" if r["small_enough"] else "NO: raise quality.elbo.samples"))]
    return column_table(precision, columns,
                        "The ELBO's Monte-Carlo precision next to the differences it is read for (nats/token): its "
                        "share in the median over prompts (1.25 x SE / sqrt(prompts)) should stay under a third of "
                        "the smallest step-to-step difference")
