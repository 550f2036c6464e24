"""A configuration measured in several sessions (controls.sessions: fresh processes, on a GPU fresh CUDA contexts)
is one grid point to every analysis: its successful runs pooled into one row, their repetitions kept by session
(`latency_e2e_s_by_session`) for the intervals of report/intervals.py, which treat the session as the unit of
replication; each row also says how its configuration fared in every planned session (`session_statuses`), so a
speedup names the sessions it could not use and why. And whether the two paradigms' runs were interleaved in time,
which the setup reports."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from report import stats
from report.intervals import Speedup, location_interval, speedup
from report.table import SCHEMA
from report.timing import SESSION_SUMMARISED, decoding_summaries, timing_summaries

_OK = "ok"
NOT_RUN = "not run"  # a planned session with no artifact of the configuration: the sweep stopped before it


def pool_sessions(table: pl.DataFrame) -> pl.DataFrame:
    """One row per configuration (`config_key`) for its successful runs across sessions: the run that measured
    quality (else the first session's) gives the row its identity, memory and quality; the timing columns are
    recomputed over every session's repetitions (their intervals over the sessions' medians: `session_intervals`),
    and `sessions`, `session_ids`, `run_ids` and `latency_e2e_s_by_session` say what was pooled, `session_statuses`
    what was not. Failed runs keep their own rows. A sweep of one session comes back with `session_statuses` added."""
    if "config_key" not in table.columns or not table.height:
        return table
    table = with_session_statuses(table)
    ok = table.filter(pl.col("status") == _OK)
    if ok.height == ok["config_key"].n_unique():
        return table
    rows: list[dict[str, Any]] = []
    for _, group in ok.group_by("config_key", maintain_order=True):
        runs = group.sort("session").to_dicts()
        rows.append(runs[0] if len(runs) == 1 else _pooled(runs))
    pooled = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    failed = table.filter(pl.col("status") != _OK)
    order = {run_id: i for i, run_id in enumerate(table["run_id"].to_list())}
    merged = pl.concat([pooled, failed.select(pooled.columns)])
    return merged.sort(pl.col("run_id").replace_strict(order, return_dtype=pl.Int64))


def with_session_statuses(table: pl.DataFrame) -> pl.DataFrame:
    """`session_statuses`: each row's configuration in every session its spec planned (`planned_sessions`): ok, its
    failure (error, oom, crashed), or NOT_RUN. `table`: per-run rows."""
    if "planned_sessions" not in table.columns:
        return table
    statuses: dict[str, list[str]] = {}
    for key, session, status, planned in table.select("config_key", "session", "status", "planned_sessions").iter_rows():
        known = statuses.setdefault(key, [NOT_RUN] * (planned or 1))
        if (session or 0) < len(known) and known[session or 0] != _OK:
            known[session or 0] = status
    column = [statuses[key] for key in table["config_key"].to_list()]
    return table.with_columns(pl.Series("session_statuses", column, dtype=pl.List(pl.String)))


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    primary = next((r for r in runs if r["quality_prompts"] is not None), runs[0])
    row = dict(primary)
    row.update(timing_summaries(
        latency=[v for r in runs for v in r["latency_e2e_s_samples"]],
        ttft=[v for r in runs for v in r["ttft_s_samples"]],
        passes=[p for r in runs for p in r["itl_s_samples"]],
        steps=[p for r in runs for p in r["step_s_samples"]],
        output_tokens=primary["output_tokens"], batch_size=primary["batch_size"],
        generation_length=primary["generation_length"], useful_mean=primary["useful_tokens_mean"],
    ))
    row.update({
        "sessions": len(runs), "session_ids": [r["session"] for r in runs], "run_ids": [r["run_id"] for r in runs],
        "latency_e2e_s_by_session": [r["latency_e2e_s_samples"] for r in runs],
        "warmup_latency_s_samples": [v for r in runs for v in r["warmup_latency_s_samples"]],
        "tokens_committed_samples": [s for r in runs for s in r["tokens_committed_samples"]],
        "forwards_samples": [v for r in runs for v in r["forwards_samples"]],
        "repetitions": sum(r["repetitions"] for r in runs),
    })
    row.update(session_intervals(runs))
    if row["tokens_committed_samples"]:
        row.update(decoding_summaries(
            steps=row["step_s_samples"], committed=row["tokens_committed_samples"], batch_size=primary["batch_size"],
            num_blocks=primary["num_blocks"], schedule_steps=primary["steps"] if primary["extrapolated"] else None))
    return row


def session_intervals(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The interval of a pooled row's latency, throughput and goodput: Student's t over the sessions' medians
    (report.intervals.location_interval), the basis of every speedup, never a bootstrap of the pooled repetitions
    (which covers far below its level over a few sessions)."""
    out: dict[str, Any] = {}
    for name in SESSION_SUMMARISED:
        found = location_interval([r[f"{name}_median"] for r in runs if r[f"{name}_median"] is not None])
        if found is not None:
            out.update({f"{name}_interval_low": found[0], f"{name}_interval_high": found[1],
                        f"{name}_interval": stats.SESSIONS_T})
    return out


def interval_count(row: dict[str, Any], name: str) -> str:
    """What an interval of `name` rests on: its repetitions, or its sessions where it is over the sessions."""
    if row[f"{name}_interval"] == stats.SESSIONS_T:
        return f"{row.get('sessions')} sessions"
    return str(row[f"{name}_n"])


def has_interval(row: dict[str, Any], name: str) -> bool:
    """Whether a row's interval of `name` is one: the range of a single repetition is that value, not an interval."""
    kind = row.get(f"{name}_interval")
    return kind is not None and (kind != stats.RANGE or (row.get(f"{name}_n") or 0) >= 2)


def gaps_text(row: dict[str, Any]) -> str:
    """', leaving out session 2 of 2 (llada-tiny failed: error)': the planned sessions a row's figures lack, or ''."""
    gaps = left_out(row)
    return f", leaving out {', '.join(gaps)}" if gaps else ""


def by_session(row: dict[str, Any]) -> dict[int, list[float]]:
    """A (pooled) row's latency repetitions per session id: what report/intervals.py pairs across two rows."""
    sessions = row.get("session_ids") or [row.get("session") or 0]
    samples = row.get("latency_e2e_s_by_session") or [row["latency_e2e_s_samples"]]
    return {int(s): list(v) for s, v in zip(sessions, samples)}


def aligned(numerator: dict[str, Any], denominator: dict[str, Any]) -> tuple[list[list[float]], list[list[float]]]:
    """Two rows' repetitions aligned by session (a session one side lacks gets an empty list)."""
    a, b = by_session(numerator), by_session(denominator)
    ids = sorted(set(a) | set(b))
    return [a.get(i, []) for i in ids], [b.get(i, []) for i in ids]


def row_speedup(numerator: dict[str, Any], denominator: dict[str, Any]) -> Speedup:
    """median L(numerator) / median L(denominator) with its interval, the two rows' sessions paired, naming each
    planned session it could not use and why (`left_out`)."""
    return replace(speedup(*aligned(numerator, denominator)), left_out=left_out(numerator, denominator))


def left_out(*rows: dict[str, Any]) -> tuple[str, ...]:
    """Each planned session in which the rows' configurations did not all run successfully, with why:
    'session 2 of 2 (llada-tiny failed: error)', 'session 3 of 3 (llama-tiny did not run, llada-tiny did not run)'."""
    sides = [(row["model"], row.get("session_statuses") or []) for row in rows]
    planned = max(len(statuses) for _, statuses in sides)
    gaps = []
    for s in range(planned):
        why = [f"{model} did not run" if statuses[s] == NOT_RUN else f"{model} failed: {statuses[s]}"
               for model, statuses in sides if s < len(statuses) and statuses[s] != _OK]
        if why:
            gaps.append(f"session {s + 1} of {planned} ({', '.join(why)})")
    return tuple(gaps)


def shared_median(row: dict[str, Any], other: dict[str, Any]) -> float:
    """`row`'s median latency over the sessions `other` ran too: the latency beside a speedup between the two rests
    on the sessions the speedup rests on (its own median where they share every session)."""
    mine, theirs = by_session(row), by_session(other)
    shared = [v for session, values in mine.items() if theirs.get(session) for v in values]
    if len(shared) == sum(len(values) for values in mine.values()):
        return row["latency_e2e_s_median"]
    return stats.summarize(shared).median


def interleaved(table: pl.DataFrame) -> bool | None:
    """Whether, in every session, each measured point's runs of both paradigms were taken in one block of time
    (no other point's run started between them): the design that lets a session's drift fall on both alike.
    None when the runs carry no start times. `table`: per-run rows (not pooled)."""
    if "started_at" not in table.columns or table["started_at"].null_count() == table.height:
        return None
    point = ["hardware", "prompt_length", "generation_length", "batch_size"]
    runs = table.filter(pl.col("status") == _OK).sort("started_at")
    for _, session in runs.group_by("session", maintain_order=True):
        sequence = [tuple(r) for r in session.select(point).iter_rows()]
        paradigms = session["paradigm"].to_list()
        for key in set(sequence):
            at = [i for i, k in enumerate(sequence) if k == key]
            if len({paradigms[i] for i in at}) < 2:
                continue  # a point only one paradigm measured pairs nothing
            if at[-1] - at[0] + 1 != len(at):
                return False
    return True
