"""Section 4, Throughput: tokens per second and goodput per run, and the batch size B* where the AR model of each
pair pulls ahead."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from report.document.content import Block, Table, fmt_float, fmt_rate
from report.answer.findings import CROSSOVER_ANCHOR, row_crossover
from report.analysis.intervals import crossover_text
from report.answer.pairing.text import roofline_value
from report.answer.pairing.pairs import Sides, table_sides
from report.sections.cells import (
    column_table,
    hardware_column,
    interval_cell,
    key_columns,
    simple,
    timed_cell,
)
from report.sections.inputs import Blocks, ReportInputs
from report.table.flat import USEFUL_FRACTION_FLAG


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    ok = inputs.table.filter(pl.col("status") == "ok")
    tail: list[Block] = [throughput_table(ok, multi)]
    decoding = ok.filter(pl.col("tokens_per_step_mean").is_not_null())
    if decoding.height:
        tail.append(decoding_table(decoding, multi))
    if inputs.crossovers.height:
        tail.append(crossover_table(inputs.crossovers, multi, table_sides(inputs.table)))
    return Blocks([], tail)


def throughput_table(ok: pl.DataFrame, multi: bool) -> Table:
    columns = [
        *simple(key_columns(multi, ok)),
        ("tokens/s median", lambda r: fmt_rate(r["tokens_per_s_median"])),
        ("interval", lambda r: interval_cell(r, "tokens_per_s", fmt_rate)),
        ("timed", timed_cell),
        ("goodput tokens/s", lambda r: fmt_rate(r["goodput_tokens_per_s_median"])),
        ("useful / N_out", lambda r: fmt_float(r["useful_fraction"], 3)
         + (" FLAG" if r["low_useful"] else "")),
        ("forwards", lambda r: fmt_float(r["forwards"], 4)),
        ("tokens per forward", lambda r: fmt_float(r["tokens_per_forward"], 3)),
    ]
    return column_table(ok, columns,
                        "Throughput per run: B x N_out / latency, and goodput B x useful tokens / latency (useful: "
                        f"tokens before the first EOS; FLAG below {USEFUL_FRACTION_FLAG:.0%} of N_out). Tokens per "
                        f"forward: N_out over model forward passes per sequence ({table_sides(ok).ar} 1; a CFG step "
                        "counts two); "
                        "forwards: the median over repetitions where a variant's confidence rule made them vary, "
                        "else the schedule's count")


def decoding_table(diffusion: pl.DataFrame, multi: bool) -> Table:
    """Each diffusion run's decoding under the names serving engines give it (report.table.flat `_decoding_columns`)."""
    columns = [
        *simple(key_columns(multi, diffusion)),
        ("committed tokens/s", lambda r: fmt_rate(r["committed_tokens_per_s_median"])),
        ("tokens committed per step", lambda r: fmt_float(r["tokens_per_step_mean"], 3)),
        ("steps per block", lambda r: fmt_float(r["steps_per_block_mean"], 3)),
        ("timed", timed_cell),
    ]
    return column_table(diffusion, columns,
                        "Diffusion decoding per run. Committed tokens/s: the tokens the timed steps committed (whole "
                        "batch) over those steps' time, median over repetitions (it leaves out the host work between "
                        "steps that end-to-end throughput counts). Tokens committed per step: per sequence, the mean "
                        "over every timed step (N_out / steps for a fixed schedule). Steps per block: the mean over "
                        "repetitions of the steps each block took (fewer than the schedule's where a confidence rule "
                        "ends a block early; '–': a sampler without blocks)")


def crossover_table(crossovers: pl.DataFrame, multi: bool, t: Sides) -> Table:
    """The measured and predicted B* per pair and diffusion setting; `t` names the sides (report.answer.pairing.pairs)."""
    algs = crossovers["sampler_setting"].drop_nulls().len() > 0
    several = crossovers["llama_model"].n_unique() > 1
    columns = [*hardware_column(multi), ("P", "prompt_length"), ("N_out", "generation_length"),
               *([(t.ar, "llama_model")] if several else []), (t.dllm, "llada_model"), ("steps", "steps"),
               ("block", "block_length"), *([("setting", "sampler_setting")] if algs else []), ("batch sizes", "batch_sizes"),
               (f"T({t.ar}) / T({t.dllm})", "throughput_ratios"), ("B* measured [interval]", _measured_b_star),
               (f"{t.dllm} extrapolated", lambda r: r["extrapolated"] or "–"),
               ("the roofs-only model's B*", _predicted_b_star("predicted_b_star_roofs")),
               ("the floor-calibrated model's B*", _calibrated_b_star), ("profile", "profile")]
    return column_table(crossovers, columns,
                        f"Crossover: the batch size B* from which {t.ar}'s throughput stays ahead of {t.dllm}'s at "
                        f"each step count, from the same speedups as the pairings, interpolated in log B between "
                        f"measured batch sizes ('≤': {t.ar} ahead at every batch measured, '>': {t.dllm} ahead at "
                        "every one), its interval inverted from the speedups' (at least 1 - k(1 - level) over its k "
                        "batches where the speedup falls with B: report/analysis/intervals.py); and the faithful roofline's B* "
                        "on the device's profile from two models: the roofs-only model (each latency at the roofs, "
                        "which bound a run's latency from below) and the floor-calibrated model (a host or dispatch "
                        "floor fitted to measured runs). Neither is a bound on B*: a ratio of two lower bounds "
                        "bounds nothing",
                        fold=False, anchor=CROSSOVER_ANCHOR)


def _measured_b_star(r: dict) -> str:
    return crossover_text(row_crossover(r), r["ar_title"], r["dllm_title"])


def _predicted_b_star(column: str) -> Callable[[dict], str]:
    return lambda r: "–" if r["profile"] is None else roofline_value(r[column])


def _calibrated_b_star(r: dict) -> str:
    if r["profile"] is None or r["calibration"] is None:
        return "–: the profile has no floor"
    return f"{roofline_value(r['predicted_b_star'])} ({r['calibration']})"
