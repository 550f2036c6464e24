"""Section 3, Latency: the per-run latency table and, where LLaDA runs timed only their first steps, the check
of that extrapolation against the same point run in full."""

from __future__ import annotations

import polars as pl

from report.analysis import stats
from report.document.content import Block, Paragraph, Table, fmt_float, fmt_seconds
from report.analysis.extrapolation import (
    extrapolated_share,
    extrapolation_checks,
    extrapolation_summary,
    shape_columns,
    step_modes,
)
from report.analysis.history import History
from report.answer.pairing.pairs import table_sides
from report.sections.cells import column_table, interval_cell, key_columns, simple, timed_cell
from report.sections.inputs import Blocks, ReportInputs
from specs.results import EXTRAPOLATION_TOLERANCE

CAPTION = ("Latency per run: median over repetitions with the interval of the median (a configuration run in "
           "several sessions: Student's t over the sessions' medians; one session: a 95% BCa bootstrap CI "
           f"from {stats.MIN_CI_SAMPLES} repetitions up, else the range), mean ± sd and CV. ITL (study) is "
           "(L_e2e - TTFT) / (N_out - 1), the study's definition (3.1.1); TTFT's percentiles are over the "
           "repetitions, ITL's (each decode pass) and the step's over every timed pass of every repetition; compile: torch.compile time spent in the warm-ups "
           "of a compiled variant, never in the latency; roofline efficiency: the roofs-only predicted "
           "latency / the measured median (1 = at the roof; 'VIOLATED': faster than 0.9x the roofs allow)")


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    ok = inputs.table.filter(pl.col("status") == "ok")
    return Blocks([], [latency_table(ok, multi), *extrapolation_blocks(inputs.table, inputs.history)])


def latency_table(ok: pl.DataFrame, multi: bool) -> Table:
    columns = [
        *simple(key_columns(multi, ok)),
        ("latency median", lambda r: fmt_seconds(r["latency_e2e_s_median"])),
        ("interval of the median", lambda r: interval_cell(r, "latency_e2e_s", fmt_seconds)),
        ("mean ± sd", lambda r: _mean_sd(r, "latency_e2e_s", fmt_seconds)),
        ("CV", lambda r: fmt_float(r["latency_e2e_s_cv"], 2)),
        ("TTFT", lambda r: fmt_seconds(r["ttft_s_median"])),
        ("TTFT p50 / p90 / p99", lambda r: _tails(r, "ttft_s")),
        ("ITL (study)", lambda r: fmt_seconds(r["itl_s_median"])),
        ("ITL p50 / p90 / p99", lambda r: _tails(r, "itl_token_s")),
        ("step p50 / p90 / p99", lambda r: _tails(r, "step_s")),
        ("reps", lambda r: str(r["latency_e2e_s_n"])),
        ("timed", timed_cell),
        ("preparation (untimed)", lambda r: fmt_seconds(r["preparation_s"])),
        ("roofline efficiency", _efficiency_cell),
    ]
    return column_table(ok, columns, CAPTION)


def _mean_sd(row: dict, name: str, fmt) -> str:
    if row[f"{name}_mean"] is None:
        return "–"
    sd = row[f"{name}_sd"]
    return f"{fmt(row[f'{name}_mean'])} ± {fmt(sd)}" if sd is not None else fmt(row[f"{name}_mean"])


def _tails(row: dict, name: str) -> str:
    values = [row[f"{name}_p{p}"] for p in stats.TAIL_PERCENTILES]
    return "–" if values[0] is None else " / ".join(fmt_seconds(v) for v in values)


_SHAPE_AND_STEPS = ("hardware", "model", "batch_size", "prompt_length", "generation_length", "steps", "timed_steps")


def _where_it_ran(history: History | None, run_id: str | None, model: str) -> str:
    """'; run 2 of llada-8b in worker process 3 of 4' where the runs recorded their process."""
    at = history.process_of(run_id) if history and run_id else None
    if at is None:
        return ""
    process, processes, nth = at
    return f"; {run_id}, run {nth} of {model} in worker process {process} of {processes}"


def _efficiency_cell(row: dict) -> str:
    value = row.get("roofline_efficiency")
    if value is None:
        return "–"
    return fmt_float(value, 2) + (" VIOLATED" if row.get("roofline_violated") else "")


def extrapolation_blocks(table: pl.DataFrame, history: History | None = None) -> list[Block]:
    """Say how many latencies are extrapolated and how many no full run checks, set each checked extrapolation
    beside the full runs at its shape, name the suspect ones the speedups and B* leave out (and where they ran in
    their worker process, from `history`), and the shapes whose steps split into modes."""
    extrapolated, _ = extrapolated_share(table.filter(pl.col("status") == "ok"))
    if not extrapolated:
        return []
    checks = extrapolation_checks(table)
    dllm = table_sides(table).dllm
    blocks: list[Block] = [Paragraph(
        f"{extrapolation_summary(table, dllm)}: each latency extrapolated from the mean timed step "
        "(controls.extrapolation; column 'timed'). Where a point also ran in full, the full measurement is the one "
        "every figure, the Findings and the throughput tables use." + (
            f" A vanilla {dllm} step costs the same whatever the step count, so each extrapolated run's median timed "
            "step is checked against the median step of the full runs at its lengths, batch and block, median "
            f"against median; one off by more than {EXTRAPOLATION_TOLERANCE:.0%} is SUSPECT and left out of the "
            "speedups and B*; one with no full run at its batch and shape is UNCHECKED." if checks.height else
            " The sweep has no full run at the shape of any extrapolated one, so the extrapolation is unchecked."),
        warning=extrapolated > checks.height)]
    suspect = checks.filter(pl.col("suspect"))
    if suspect.height:
        runs = {tuple(r[:-1]): r[-1] for r in table.select(*_SHAPE_AND_STEPS, "run_id").iter_rows()}
        blocks.append(Paragraph(
            f"{suspect.height} extrapolated run(s) failed the check and are left out of the speedups and B*: "
            + "; ".join(f"{r['model']} B={r['batch_size']} {r['prompt_length']}+{r['generation_length']} "
                        f"{r['steps']} steps (timed step {fmt_seconds(r['step_s'])} against "
                        f"{fmt_seconds(r['full_step_s'])} in full, ratio {fmt_float(r['step_ratio'], 3)}"
                        f"{_where_it_ran(history, runs.get(tuple(r[k] for k in _SHAPE_AND_STEPS)), r['model'])})"
                        for r in suspect.iter_rows(named=True)) + ".", warning=True))
    for key, modes in step_modes(table).items():
        at = dict(zip(shape_columns(table), key))
        blocks.append(Paragraph(
            f"MODES: the repetitions' median {dllm} step of {at['model']} at B={at['batch_size']} "
            f"{at['prompt_length']}+{at['generation_length']} (every step count) splits "
            f"into two modes, {fmt_seconds(modes.fast_s)} ({modes.fast_repetitions} repetitions) and "
            f"{fmt_seconds(modes.slow_s)} ({modes.slow_repetitions}): a speedup there holds only for the mode its "
            "run fell in, and the pairings give it at each.", warning=True))
    if checks.height:
        columns = [
            ("model", "model"), ("B", "batch_size"), ("P", "prompt_length"), ("N_out", "generation_length"),
            ("steps", "steps"), ("timed steps", "timed_steps"),
            ("timed step", lambda r: fmt_seconds(r["step_s"])),
            ("full runs' step", lambda r: f"{fmt_seconds(r['full_step_s'])} ({r['full_steps']} steps)"),
            ("step ratio", lambda r: fmt_float(r["step_ratio"], 3) + (" SUSPECT" if r["suspect"] else "")),
            ("extrapolated / full latency", lambda r: fmt_float(r["ratio"], 3)),
            ("reps (extrapolated, full)",
             lambda r: f"{r['extrapolated_n']}, {r['full_n']}" if r["full_n"] is not None else "–"),
        ]
        blocks.append(column_table(checks, columns,
                                   "Extrapolation check: each extrapolated run's median timed step against the full "
                                   "runs' at its shape, and its latency against the full run of the same step count "
                                   "where there is one; a ratio near 1 means the first steps stand for the whole "
                                   "generation"))
    return blocks
