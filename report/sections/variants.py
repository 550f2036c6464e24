"""Section 7, Accelerated variants: each implementation variant against vanilla at the same point, and where
each stops paying off as the batch grows."""

from __future__ import annotations

import polars as pl

from report.analysis import stats
from report.document.content import Block, Paragraph, fmt_bytes, fmt_float, fmt_seconds
from report.answer.pairing.pairs import table_sides
from report.analysis.parity import bracket
from report.sections.cells import column_table, hardware_column
from report.sections.inputs import Blocks, ReportInputs
from report.table.flat import has_variants
from report.analysis.variants import DELTA_METRICS, UNPAIRED, idle_confidence_rules, payoff_table
from specs.registry import family

_DELTA_LABEL = {"gen_ppl": "perplexity", "bertscore_f1": "BERTScore F1"}
COMPARISON_CAPTION = (
    "Each variant against vanilla at the same point. Speedup: vanilla's median end-to-end latency over the "
    "variant's (> 1: the variant is faster), with its interval, its level and what it rests on (sessions x "
    "vanilla + variant repetitions; report/analysis/intervals.py). Roofline speedup: the faithful model on this device's profile (a confidence rule costed at "
    "its measured forwards, else at the step cap). Forwards: per generation (a confidence rule's median over "
    "repetitions). Δ quality: variant minus vanilla per prompt, the median over the prompts both ran with a "
    "percentile bootstrap CI over prompts (the range below six); lower perplexity and higher BERTScore are "
    "better. KV cache: the peak bytes the variant's cache held")


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    """Each variant against vanilla at the same point, then where each stops paying off as the batch grows."""
    variants = inputs.variants
    if not has_variants(inputs.table):
        # The grid's axes that take implementations: one per sampler of the sweep's families (the AR loop's is llama).
        samplers = {family(a).sampler for a in inputs.table["arch"].drop_nulls().unique().to_list()}
        axes = "grid.llada.impl, grid.dream.impl and grid.llama.impl" if "dream" in samplers else \
            "grid.llada.impl and grid.llama.impl"
        return Blocks([], [Paragraph("No accelerated variants in this sweep: every run is the vanilla "
                                     f"implementation ({axes} add them).")])
    t = table_sides(inputs.table)
    lead: list[Block] = [Paragraph(
        f"Every other section compares vanilla {t.ar} with vanilla {t.dllm}; this one sets each implementation "
        "variant beside the vanilla run of the same model at the same point (lengths, steps, block, batch).")]
    if not variants.height:
        return Blocks(lead, [Paragraph("No variant run succeeded.", warning=True)])
    hw = hardware_column(multi)
    alg = [("setting", "sampler_setting")] if variants["sampler_setting"].drop_nulls().len() else []  # where present
    columns = [*hw, ("model", "model"), ("impl", "impl"), ("P", "prompt_length"), ("N_out", "generation_length"),
               ("steps", "steps"), ("block", "block_length"), *alg, ("B", "batch_size"),
               ("speedup [interval]", _variant_speedup_cell),
               ("roofline speedup", _predicted_cell),
               ("forwards (vanilla → variant)", lambda r: f"{fmt_float(r['vanilla_forwards'], 4)} → "
                f"{fmt_float(r['forwards'], 4)}"),
               ("tokens per forward", lambda r: fmt_float(r["tokens_per_forward"], 3)),
               *((f"Δ {_DELTA_LABEL[m]} [interval]", lambda r, m=m: _delta_cell(r, m)) for m in DELTA_METRICS),
               ("KV cache", lambda r: fmt_bytes(r["cache_bytes"])),
               ("preparation (untimed)", lambda r: fmt_seconds(r["preparation_s"]))]
    tail: list[Block] = [column_table(variants, columns, COMPARISON_CAPTION, fold=False, anchor="variants-table")]
    payoff = payoff_table(variants)
    if payoff.height:
        columns = [*hw, ("model", "model"), ("impl", "impl"), ("P", "prompt_length"), ("N_out", "generation_length"),
                   ("steps", "steps"), ("block", "block_length"), *alg, ("batch sizes", "batch_sizes"),
                   ("speedup", "speedups"), ("roofline speedup", "predicted_speedups"), ("as batch grows", "statement")]
        tail.append(column_table(
            payoff, columns,
            "Where each variant stops paying off as the batch grows: the first measured batch size whose speedup "
            "(point estimate) falls below 1, measured and predicted by the roofline at the same batch sizes",
            fold=False))
    idle = idle_confidence_rules(variants)
    if idle:
        tail.append(Paragraph(
            "The confidence rule of " + ", ".join(idle) + " never ended a block early (as many forwards as vanilla "
            "at every point): no speedup or quality change measured there comes from the rule (a cache it carries "
            "still acts).",
            warning=True))
    missing = variants.filter(pl.col("speedup").is_null())
    if missing.height:
        tail.append(Paragraph(
            f"{missing.height} variant run(s) have no successful vanilla run at the same point, so no speedup or "
            "quality delta: " + ", ".join(sorted(set(missing["run_id"].to_list()))), warning=True))
    return Blocks(lead, tail)


def _variant_speedup_cell(r: dict) -> str:
    if r["speedup"] is None:
        return "no vanilla run"
    return f"{r['speedup']:.3g}x {bracket(r['speedup_low'], r['speedup_high'])} ({r['speedup_interval']})"


def _predicted_cell(r: dict) -> str:
    if r["predicted_speedup"] is None:
        return "–"
    source = f" (forwards: {r['forwards_source']})" if r["forwards_source"] not in (None, "schedule") else ""
    return f"{r['predicted_speedup']:.3g}x{source}"


def _delta_cell(r: dict, metric: str) -> str:
    value = r[f"{metric}_delta"]
    if value is None:
        return "–"
    if r[f"{metric}_delta_interval"] == UNPAIRED:
        return f"{value:+.3g} (unpaired: no shared prompt, difference of medians, no interval)"
    kind = stats.INTERVAL_LABEL.get(r[f"{metric}_delta_interval"], r[f"{metric}_delta_interval"])
    return (f"{value:+.3g} [{r[f'{metric}_delta_low']:+.3g}, {r[f'{metric}_delta_high']:+.3g}] "
            f"({kind}, {r[f'{metric}_pairs']} prompts paired)")
