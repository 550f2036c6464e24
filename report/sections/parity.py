"""Section 6's parity tables: the fewest diffusion steps at which a diffusion model matches each reference of its
pair, and the speedup at that step count at every batch size."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from report.document import Table, fmt_float
from report.findings import PARITY_ANCHOR
from report.pairs import GENERIC_AR, GENERIC_DLLM, Sides
from report.quality import FIGURE_METRICS
from report.sections.cells import column_table, hardware_column, quality_flag


def parity_tables(parity: pl.DataFrame, multi: bool, provenance: Sequence[str],
                  sides: Sides = Sides(GENERIC_AR, GENERIC_DLLM)) -> list[Table]:
    """The headline parity rows (S_parity, speedup at every batch size) and every parity row; `sides` names the
    paradigms (report.pairs.table_sides)."""
    if not parity.height:
        return []
    models = (" Models: " + " ".join(provenance)) if provenance else ""
    algs = "dream_alg" in parity.columns and parity["dream_alg"].drop_nulls().len() > 0
    pairs = "llama_model" in parity.columns and parity["llama_model"].drop_nulls().n_unique() > 1
    common = [*hardware_column(multi), ("metric", "metric_label"), ("P", "prompt_length"),
              ("N_out", "generation_length"), ("block", "block_length"), *([("alg", "dream_alg")] if algs else []),
              (sides.dllm, "llada_model"), *([(sides.ar, "llama_model")] if pairs else []),
              ("reference", "reference_label"),
              ("reference level [interval]", lambda r: _ci(r, "reference_value", "reference_interval_low",
                                                           "reference_interval_high")),
              ("S_parity steps [95% CI]; replicates at parity", _s_parity_cell),
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
            "smallest batch size; its 95% CI is a paired bootstrap over prompts. The speedup's interval holds "
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


def _s_parity_cell(r: dict) -> str:
    s = r["s_parity_steps"]
    if s is None:
        text = "none"
    else:
        text = f"{'<= ' if r['s_parity_bound'] == '<=' else ''}{s}"
    if r["parity_fraction"] is None:
        return text
    largest = r["steps_swept"].split(", ")[-1]
    low = r["s_parity_low_steps"]
    high = r["s_parity_high_steps"]
    low_text = str(low) if low is not None else f">{largest}"
    high_text = str(high) if high is not None else f">{largest}"
    return f"{text} [{low_text}, {high_text}]; {r['parity_fraction']:.0%} reach parity"


def _speedup_cell(r: dict) -> str:
    if r["speedup"] is None:
        return "–"
    bound = ">= " if r["s_parity_bound"] == "<=" else ""
    return f"{bound}{r['speedup']:.3g} [{r['speedup_low']:.3g}, {r['speedup_high']:.3g}]"


def _repetition_cell(r: dict) -> str:
    if r["reference_repetition"] is None:
        return "–"
    return f"{fmt_float(r['llada_repetition_at_parity'], 3)} vs {fmt_float(r['reference_repetition'], 3)}"
