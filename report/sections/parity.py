"""Section 6's parity tables: the fewest diffusion steps at which a diffusion model matches each reference of its
pair, and the speedup at that step count at every batch size."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from report.document.content import Table, fmt_float
from report.answer.findings import PARITY_ANCHOR
from report.answer.pairing.pairs import GENERIC_AR, GENERIC_DLLM, Sides
from report.analysis.parity_text import bracket
from report.analysis.quality import FIGURE_METRICS
from report.sections.cells import column_table, hardware_column, quality_flag


def parity_tables(parity: pl.DataFrame, multi: bool, provenance: Sequence[str],
                  sides: Sides = Sides(GENERIC_AR, GENERIC_DLLM)) -> list[Table]:
    """The headline parity rows (S_parity, speedup at every batch size) and every parity row; `sides` names the
    paradigms (report.answer.pairing.pairs.table_sides)."""
    if not parity.height:
        return []
    models = (" Models: " + " ".join(provenance)) if provenance else ""
    algs = "sampler_setting" in parity.columns and parity["sampler_setting"].drop_nulls().len() > 0
    pairs = "llama_model" in parity.columns and parity["llama_model"].drop_nulls().n_unique() > 1
    common = [*hardware_column(multi), ("metric", "metric_label"), ("P", "prompt_length"),
              ("N_out", "generation_length"), ("block", "block_length"), *([("setting", "sampler_setting")] if algs else []),
              (sides.dllm, "llada_model"), *([(sides.ar, "llama_model")] if pairs else []),
              ("reference", "reference_label"),
              ("reference level [interval]", lambda r: _ci(r, "reference_value", "reference_interval_low",
                                                           "reference_interval_high")),
              ("test (margin)", lambda r: _test_cell(r)),
              ("S_parity steps; replicates by step count", _s_parity_cell),
              ("repeated-bigram rate at S_parity vs reference", _repetition_cell),
              ("B", "batch_size"), ("speedup [interval | S_parity]", _speedup_cell),
              ("goodput speedup", lambda r: fmt_float(r["goodput_speedup"], 3) + (" FLAG" if r["low_useful"] else "")),
              ("statement", "statement")]
    tables = []
    headline = parity.filter(pl.col("metric").is_in(list(FIGURE_METRICS)) & pl.col("headline"))
    if headline.height:
        tables.append(column_table(
            headline, common,
            f"Steps to quality parity and the speedup at parity at every batch size (speedup > 1: {sides.dllm} is "
            "faster at equal quality). S_parity is found once per generation length, metric and reference, at the "
            "smallest batch size, by a two one-sided test (TOST) of the paired per-prompt differences against the "
            "spec's margin; the shares are the bootstrap replicates over prompts at each step count (no confidence "
            "interval). A metric whose reference an unrelated passage matches within the margin cannot separate "
            "text from chance and decides nothing. The speedup's interval holds "
            "S_parity fixed (the latency repetitions at that step count); '<=' parity at the fewest swept steps "
            "makes the speedup a lower bound" + quality_flag(headline) + models,
            fold=False, anchor=PARITY_ANCHOR))
    tables.append(column_table(
        parity, common,
        f"Every parity row: each metric against each reference ({sides.ar} greedy, {sides.ar} sampled, and the "
        "human continuation for perplexity and degeneracy)" + quality_flag(parity) + models))
    return tables


def _ci(row: dict, value: str, low: str, high: str, digits: int = 4) -> str:
    if row[value] is None:
        return "–"
    text = fmt_float(row[value], digits)
    if row[low] is None and row[high] is None:
        return text
    return f"{text} [{fmt_float(row[low], digits)}, {fmt_float(row[high], digits) if row[high] is not None else '>'}]"


def _test_cell(r: dict) -> str:
    if not r["decides"]:
        return "cannot separate text from chance at this scale: not used"
    return (f"{r['test']} at {r['test_steps']} steps: {fmt_float(r['difference'], 3)} "
            f"[{fmt_float(r['difference_low'], 3)}, {fmt_float(r['difference_high'], 3)}] ({r['margin']})")


def _s_parity_cell(r: dict) -> str:
    s = r["s_parity_steps"]
    text = "none" if s is None else f"{'<= ' if r['s_parity_bound'] == '<=' else ''}{s}"
    if r["parity_fraction"] is None:
        return text
    shares = [f"{k}: {v:.0%}" for k, v in zip(r["replicate_steps"], r["replicate_shares"])]
    if r["parity_fraction"] < 1:
        shares.append(f"none: {1 - r['parity_fraction']:.0%}")
    return f"{text}; " + ", ".join(shares)


def _speedup_cell(r: dict) -> str:
    if r["speedup"] is None:
        return "–"
    bound = ">= " if r["s_parity_bound"] == "<=" else ""
    return f"{bound}{r['speedup']:.3g} {bracket(r['speedup_low'], r['speedup_high'])}"


def _repetition_cell(r: dict) -> str:
    if r["reference_repetition"] is None:
        return "–"
    return f"{fmt_float(r['llada_repetition_at_parity'], 3)} vs {fmt_float(r['reference_repetition'], 3)}"
