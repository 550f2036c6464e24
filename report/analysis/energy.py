"""Energy at report time: joules per generated token of every run, from the counter its worker read around the
measured repetitions (NVML's board counter on a GPU, RAPL's package counters on a CPU), what that counter covers,
and which numbers are extrapolated.

An extrapolated LLaDA run (controls.extrapolation) timed only its first steps: the counter covers those
(`energy_joules_timed`), and its `joules_per_token` is scaled by the factor that scales its latency, which assumes
every untimed step costs what a timed one did. Where a point also ran in full, the two are set side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from report.document.content import Paragraph, Table, fmt_float, fmt_seconds
from report.analysis.extrapolation import checked_pairs
from report.answer.findings import FINDINGS_SCHEMA
from report.answer.pairing.text import setting_text
from report.answer.pairing.build import VANILLA_PAIRING, Pairing
from report.table.flat import full_where_measured

ENERGY_ANCHOR = "energy-table"
SOURCE_LABEL = {"nvml": "NVML", "rapl": "RAPL"}

CHECK_SCHEMA: dict[str, pl.DataType] = {
    "hardware": pl.String, "model": pl.String, "impl": pl.String, "batch_size": pl.Int64,
    "prompt_length": pl.Int64, "generation_length": pl.Int64, "steps": pl.Int64, "timed_steps": pl.Int64,
    "extrapolated_joules_per_token": pl.Float64, "full_joules_per_token": pl.Float64, "ratio": pl.Float64,
}


def energy_runs(table: pl.DataFrame) -> pl.DataFrame:
    """The successful runs that recorded energy (every implementation), one row per grid point."""
    if "joules_per_token" not in table.columns:
        return table.clear()
    ok = table.filter((pl.col("status") == "ok") & pl.col("joules_per_token").is_not_null())
    return full_where_measured(ok)


def counters(table: pl.DataFrame) -> list[tuple[str, str, str, int]]:
    """(hardware, source, scope, runs) of every counter the runs read: what each joule covers."""
    runs = energy_runs(table)
    if not runs.height:
        return []
    grouped = runs.group_by("hardware", "energy_source", "energy_scope").len().sort(["hardware", "energy_source"])
    return [(h, s, scope, n) for h, s, scope, n in grouped.iter_rows()]


def counter_text(table: pl.DataFrame, hardware: str | None = None) -> str:
    """'NVML, GPU 0 (the whole board)' (several counters joined by '; ')."""
    found = [(s, scope) for h, s, scope, _ in counters(table) if hardware is None or h == hardware]
    return "; ".join(f"{SOURCE_LABEL.get(s, s)}, {scope}" for s, scope in found) or "no counter"


def energy_checks(table: pl.DataFrame) -> pl.DataFrame:
    """Each check point that ran both extrapolated and in full: both joules per token and their ratio, which says
    how well scaling the timed steps' energy stands for the whole generation."""
    paired = checked_pairs(table, "joules_per_token")
    if not paired.height:
        return pl.DataFrame(schema=CHECK_SCHEMA)
    return paired.select(
        "hardware", "model", pl.col("impl").fill_null("vanilla"), "batch_size", "prompt_length", "generation_length",
        "steps", "timed_steps", pl.col("joules_per_token").alias("extrapolated_joules_per_token"),
        pl.col("joules_per_token_full").alias("full_joules_per_token"),
        (pl.col("joules_per_token") / pl.col("joules_per_token_full")).alias("ratio"),
    ).cast(CHECK_SCHEMA).sort(["hardware", "model", "generation_length", "batch_size", "steps"])


def fmt_joules(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µJ"
    if value < 1:
        return f"{value * 1e3:.3g} mJ"
    return f"{value:,.0f} J" if value >= 100 else f"{value:.3g} J"


def _timed(row: dict) -> str:
    if row["extrapolated"]:
        return f"first {row['timed_steps']} of {row['steps']} steps; J/token scaled"
    return "in full"


def energy_blocks(table: pl.DataFrame, multi: bool) -> list[Paragraph | Table]:
    """The Energy section's text and tables (its figure is added by the catalog)."""
    runs = energy_runs(table)
    if not runs.height:
        return [Paragraph("No run recorded energy: the machine exposed no counter the worker could read (NVML's "
                          "total-energy counter on a GPU; RAPL's package counters on a CPU, often readable by root "
                          "only). Energy is never estimated.")]
    found = counters(table)
    blocks: list[Paragraph | Table] = [Paragraph(
        "Joules per generated token: the energy counter read once before and once after the measured repetitions "
        "(warm-ups, model load and quality scoring are outside), divided by repetitions x B x N_out. Counters: "
        + "; ".join(f"{SOURCE_LABEL.get(s, s)} on {h}: {scope} ({n} runs)" for h, s, scope, n in found)
        + ". A board or package counter includes everything on that device, idle power too: joules per token fall "
        "with the batch partly because that floor is shared by more tokens. Each run has one reading, so its "
        "joules per token carry no interval.")]
    extrapolated = runs.filter(pl.col("energy_extrapolated").fill_null(False))
    if extrapolated.height:
        blocks.append(Paragraph(
            f"{extrapolated.height} run(s) timed only their first steps (controls.extrapolation): their counter "
            "covers those steps ('joules timed') and their joules per token are scaled by the factor that scales "
            "their latency, as if every untimed step cost what a timed one did. They are marked 'extrapolated' here, "
            "hollow in the figure, and in findings.json (llada_energy_extrapolated).", warning=False))
    checks = energy_checks(table)
    if checks.height:
        columns = [("model", "model"), ("impl", "impl"), ("B", "batch_size"), ("P", "prompt_length"),
                   ("N_out", "generation_length"), ("steps", "steps"), ("timed steps", "timed_steps"),
                   ("J/token extrapolated", lambda r: fmt_joules(r["extrapolated_joules_per_token"])),
                   ("J/token in full", lambda r: fmt_joules(r["full_joules_per_token"])),
                   ("extrapolated / full", lambda r: fmt_float(r["ratio"], 3))]
        blocks.append(_table(checks, columns, "Energy extrapolation check: the same configuration's joules per token "
                             "scaled from its first steps and measured in full; a ratio near 1 means the timed steps' "
                             "energy stands for the whole generation"))
    hw = [("hardware", "hardware")] if multi else []
    columns = [*hw, ("model", "model"), ("impl", lambda r: r["impl"] or "vanilla"), ("B", "batch_size"),
               ("P", "prompt_length"), ("N_out", "generation_length"), ("steps", "steps"), ("block", "block_length"),
               ("J/token", lambda r: fmt_joules(r["joules_per_token"])
                + (" (extrapolated)" if r["energy_extrapolated"] else "")),
               ("joules timed", lambda r: fmt_joules(r["energy_joules_timed"])),
               ("seconds between readings", lambda r: fmt_seconds(r["energy_seconds"])),
               ("mean power", lambda r: "–" if r["energy_power_w"] is None else f"{r['energy_power_w']:.0f} W"),
               ("tokens", lambda r: f"{r['energy_tokens']:,}"), ("timed", _timed),
               ("counter", lambda r: f"{SOURCE_LABEL.get(r['energy_source'], r['energy_source'])}: "
                f"{r['energy_scope']}")]
    blocks.append(_table(runs, columns, "Energy per run: joules per generated token, the joules the counter read over "
                         "the timed region, the host seconds between its two readings, their mean power, and the "
                         "tokens generated there", anchor=ENERGY_ANCHOR))
    return blocks


def _table(df: pl.DataFrame, columns: Sequence[tuple[str, object]], caption: str, anchor: str | None = None) -> Table:
    rows = tuple(tuple(fmt(r) if callable(fmt) else _plain(r[fmt]) for _, fmt in columns)
                 for r in df.iter_rows(named=True))
    return Table(tuple(c for c, _ in columns), rows, caption, anchor=anchor)


def _plain(value: object) -> str:
    return "–" if value is None else str(value)


# ---------------------------------------------------------------- the Findings' energy rows


def energy_findings(pairings: Sequence[Pairing], table: pl.DataFrame) -> pl.DataFrame:
    """Rows for the Findings (report.answer.findings.FINDINGS_SCHEMA): joules per token of both models at the smallest and
    the largest batch, per pairing, at S_parity where quality found it, else at each LLaDA step count."""
    rows = []
    for p in pairings:
        if not any(q.llama_joules_per_token is not None or q.llada_joules_per_token is not None for q in p.speedups):
            continue
        found = [s.steps for s in p.s_parity if s.steps is not None]
        if found and p.steps not in found:
            continue
        ends = [p.speedups[0]] + ([p.speedups[-1]] if len(p.speedups) > 1 else [])
        parity = f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else ""
        name = f"energy per token ({p.pairing} pairing) at {p.steps} steps{parity}, {setting_text(p)}"
        if len({q.pair for q in pairings}) > 1:
            name += f" ({p.llama_model} vs {p.llada_model})"
        best = p.pairing != VANILLA_PAIRING
        parts = []
        for q in ends:
            llama = f"{p.pair.ar_title}{' ' + q.llama_impl if best else ''} {fmt_joules(q.llama_joules_per_token)}"
            llada = (f"{p.pair.dllm_title}{' ' + q.llada_impl if best else ''} {fmt_joules(q.llada_joules_per_token)}"
                     + (" (extrapolated)" if q.llada_energy_extrapolated else ""))
            parts.append(f"B = {q.batch_size}: {llama}, {llada}")
        value = "; ".join(parts) + f" per generated token ({counter_text(table, p.hardware)})"
        rows.append((p.hardware, p.prompt_length, p.generation_length, name, value, ENERGY_ANCHOR, False))
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA, orient="row")
