"""The cell formatters and column helpers several sections share: key columns, row formatting, intervals."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from report.analysis import stats
from report.document.content import Table, fmt_value
from report.table.sessions import gaps_text, has_interval, interval_count


def hardware_column(multi: bool) -> list[tuple[str, str]]:
    """The hardware column, shown only when the sweep ran on more than one kind of device."""
    return [("hardware", "hardware")] if multi else []


def key_columns(multi: bool, runs: pl.DataFrame | None = None) -> list[tuple[str, str]]:
    """(column, header) of what identifies a run: hardware where several, model, impl, batch, lengths, steps,
    block, and the sampler setting (Dream's alg, block diffusion's threshold) where one of `runs` has one."""
    algs = runs is not None and "sampler_setting" in runs.columns and runs["sampler_setting"].drop_nulls().len() > 0
    return hardware_column(multi) + [("model", "model"), ("impl", "impl"), ("batch_size", "B"),
                                     ("prompt_length", "P"), ("generation_length", "N_out"), ("steps", "steps"),
                                     ("block_length", "block")] + ([("sampler_setting", "setting")] if algs else [])


def simple(keys: list[tuple[str, str]]) -> list[tuple[str, object]]:
    """key_columns' (column, header) pairs as (header, column) columns."""
    return [(label, column) for column, label in keys]


def rows(df: pl.DataFrame, columns: Sequence[tuple[str, object]]) -> tuple[tuple[str, ...], ...]:
    """Each column is (header, the frame's column to show, or a function of the row that writes the cell)."""
    out = []
    for row in df.iter_rows(named=True):
        out.append(tuple(fmt(row) if callable(fmt) else fmt_value(row[fmt]) for _, fmt in columns))
    return tuple(out)


def column_table(df: pl.DataFrame, columns: Sequence[tuple[str, object]], caption: str, fold: bool | None = None,
                 anchor: str | None = None) -> Table:
    """One table row per row of `df`, headed by the columns' headers."""
    return Table(tuple(c for c, _ in columns), rows(df, columns), caption, fold=fold, anchor=anchor)


def interval_cell(row: dict, name: str, fmt: Callable[[float], str]) -> str:
    """'[low, high] (range, n=5)' or '[low, high] (95% t interval over the sessions' medians, n=3 sessions)': never
    an interval without its kind and what it rests on, a planned session it lacks included (', leaving out session
    2 of 2 (llada-tiny failed: error)'); '–' for one repetition, whose range is no interval."""
    low, high, kind = row[f"{name}_interval_low"], row[f"{name}_interval_high"], row[f"{name}_interval"]
    if low is None or high is None or not has_interval(row, name):
        return "–"
    return f"[{fmt(low)}, {fmt(high)}] ({stats.INTERVAL_LABEL[kind]}, n={interval_count(row, name)}{gaps_text(row)})"


def timed_cell(row: dict) -> str:
    """Which steps the latency rests on: all of them, or the first K with the rest extrapolated."""
    if row.get("extrapolated"):
        return f"first {row['timed_steps']} of {row['steps']} steps, extrapolated"
    return "in full"


def quality_flag(df: pl.DataFrame) -> str:
    """The runs' quality notes (e.g. synthetic weights) on the table itself, so it is never read without them."""
    notes = sorted({p.strip() for n in df["quality_note"].drop_nulls().to_list() for p in n.split(";") if p.strip()})
    return f". {'; '.join(notes).capitalize()}." if notes else ""

