"""A configuration measured in several sessions (controls.sessions: fresh processes, on a GPU fresh CUDA contexts)
is one grid point to every analysis: its successful runs pooled into one row, their repetitions kept by session
(`latency_e2e_s_by_session`) for the intervals of report/analysis/intervals.py, which treat the session as the unit of
replication; each row also says how its configuration fared in every planned session (`session_statuses`), so a
speedup names the sessions it could not use and why. And whether the two paradigms' runs were interleaved in time,
which the setup reports; and which sessions ran disturbed (`session_loads`): where the machine was busy, a
session's samples measure its load as much as the models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from report.analysis import stats
from report.analysis.intervals import Speedup, location_interval, speedup
from report.table.flat import SCHEMA
from report.table.timing import SESSION_SUMMARISED, decoding_summaries, timing_summaries
from specs.results import RunResult, RunStatus

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
    (report.analysis.intervals.location_interval), the basis of every speedup, never a bootstrap of the pooled repetitions
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
    """A (pooled) row's latency repetitions per session id: what report/analysis/intervals.py pairs across two rows."""
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


# ---------------------------------------------------------------- disturbed sessions

# A session is flagged as disturbed where its CPU-timed runs had their cores for less than this share of their
# measured wall time (CPU time / (wall time x torch threads), over all its repetitions): a single-threaded run on an
# idle core has it for over 95% (the rest is the kernel's own bookkeeping), so below 80% the wall time is at least
# a quarter longer than the work, a distortion as large as the differences the verdict reads. The share misses some
# disturbance: spinning OpenMP threads keep burning CPU while they wait for a descheduled sibling, so with several
# threads the CPU time grows with the wall time. Hence the second signal: the machine's 1-minute load average at
# the runs' start and end (their median) above the CPUs the worker could use, i.e. more runnable tasks than cores.
DISTURBED_CPU_SHARE = 0.8


@dataclass(frozen=True)
class SessionLoad:
    """What the CPU-timed runs of one session say about the machine while they ran."""

    session: int  # 0-based
    planned: int
    runs: int
    cpu_share: float | None  # CPU time / (wall x threads) over every repetition; None: no run recorded CPU time
    load: float | None  # median of the runs' 1-minute load averages at their start and end
    cpus: int | None

    @property
    def reasons(self) -> list[str]:
        """Why the session is disturbed (empty: quiet, or nothing to judge by)."""
        out = []
        if self.cpu_share is not None and self.cpu_share < DISTURBED_CPU_SHARE:
            out.append(f"CPU time {self.cpu_share:.0%} of wall time")
        if self.load is not None and self.cpus is not None and self.load > self.cpus:
            out.append(f"load {self.load:.1f} on {self.cpus} CPUs")
        return out

    @property
    def name(self) -> str:
        return f"session {self.session + 1} of {self.planned}"


def session_loads(results: Sequence[RunResult]) -> list[SessionLoad]:
    """One SessionLoad per session that has a successful CPU-timed run (perf_counter) recording its CPU time or the
    machine's load (older artifacts record neither): a CUDA timer times the device, whose time the host's CPU time
    and load do not describe, so GPU runs are never flagged here."""
    by_session: dict[int, list[RunResult]] = {}
    for r in results:
        samples = r.samples
        if (r.status == RunStatus.OK and samples is not None and samples.timer == "perf_counter"
                and (samples.cpu_s is not None or samples.host_load is not None)):
            by_session.setdefault(r.config.session or 0, []).append(r)
    out = []
    for session, runs in sorted(by_session.items()):
        cpu = wall = 0.0
        loads: list[float] = []
        cpus = None
        for r in runs:
            samples = r.samples
            assert samples is not None
            if samples.cpu_s is not None:
                measured = samples.extrapolated.measured_e2e_s if samples.extrapolated else samples.latency_e2e_s
                threads = (r.environment.cpu_threads if r.environment else None) or 1
                cpu += sum(samples.cpu_s)
                wall += sum(measured) * threads
            if samples.host_load is not None:
                loads += [samples.host_load.start[0], samples.host_load.end[0]]
                cpus = samples.host_load.cpus
        out.append(SessionLoad(session, runs[0].config.controls.sessions, len(runs), cpu / wall if wall else None,
                               stats.median(loads) if loads else None, cpus))
    return out


def disturbed_text(loads: Sequence[SessionLoad]) -> str | None:
    """'sessions 2 and 3 of 3 (CPU time down to 61% of wall time; load up to 5.2 on 2 CPUs)': the flagged sessions
    and the worst of their signs; '' where none is flagged, None where no session could be judged."""
    if not loads:
        return None
    flagged = [s for s in loads if s.reasons]
    if not flagged:
        return ""
    numbers = [str(s.session + 1) for s in flagged]
    names = ", ".join(numbers[:-1]) + (" and " if len(numbers) > 1 else "") + numbers[-1]
    signs = []
    shares = [s.cpu_share for s in flagged if s.cpu_share is not None and s.cpu_share < DISTURBED_CPU_SHARE]
    if shares:
        signs.append(f"CPU time {'down to ' if len(flagged) > 1 else ''}{min(shares):.0%} of wall time")
    busy = [s for s in flagged if s.load is not None and s.cpus is not None and s.load > s.cpus]
    if busy:
        worst = max(busy, key=lambda s: s.load or 0.0)
        signs.append(f"load {'up to ' if len(flagged) > 1 else ''}{worst.load:.1f} on {worst.cpus} CPUs")
    plural = "s" if len(flagged) > 1 else ""
    return f"session{plural} {names} of {flagged[0].planned} ({'; '.join(signs)})"


def disturbed_finding(loads: Sequence[SessionLoad]) -> str | None:
    """The Findings' line on disturbed sessions, each with why (None where none is flagged)."""
    flagged = [s for s in loads if s.reasons]
    if not flagged:
        return None
    each = "; ".join(f"{s.name}: {', '.join(s.reasons)}" for s in flagged)
    return (f"DISTURBED SESSIONS ({each}): the machine was busy while they ran (a run's CPU time under "
            f"{DISTURBED_CPU_SHARE:.0%} of its wall time per thread, or more runnable tasks than CPUs), so their "
            "timings, and every interval resting on them, measure its load as well as the models")


def session_load_rows(loads: Sequence[SessionLoad]) -> list[tuple[str, ...]]:
    """The Setup's sessions table: session, runs, CPU share, load, flagged."""
    return [(s.name, str(s.runs), "–" if s.cpu_share is None else f"{s.cpu_share:.0%}",
             "–" if s.load is None else f"{s.load:.2f} on {s.cpus} CPUs",
             "DISTURBED: " + "; ".join(s.reasons) if s.reasons else "quiet")
            for s in loads]
