"""How a sweep's runs were taken, read from their own records: the commit each was measured at, the worker
processes they span, whether the two paradigms were interleaved, the warm-up passes, and first repetitions that
ran cold. The answer's provenance (the verdict, findings.json, the provenance section) is said from these, never
assumed.

A worker measures its device's roofs once per process (workers/measure/calibrate.py) and every run records them,
so runs that share one roofs record ran in one process, and a resumed command or a fresh session shows as a new
record. Runs without one (older artifacts) are not counted in processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from report.analysis import stats
from report.table.sessions import interleaved
from report.answer.pairing.pairs import Pair
from specs.registry import family
from specs.results import RunResult

# A first repetition this much slower than the median of the others ran cold: the warm-up did not settle it.
COLD_RATIO = 1.25


@dataclass(frozen=True)
class Process:
    """One worker process: when its runs started and finished, and which models it ran."""

    started_at: str
    finished_at: str
    run_ids: tuple[str, ...]  # in the order they started
    models: tuple[str, ...]


@dataclass(frozen=True)
class Cold:
    """A run whose first repetition was slow: that repetition, and the median of the others."""

    run_id: str
    first_s: float
    others_s: float


@dataclass(frozen=True)
class History:
    commits: tuple[str, ...]  # every git commit the runs recorded, short
    processes: tuple[Process, ...]  # by first start; empty where no run recorded its roofs
    interleaved: bool | None  # report.table.sessions.interleaved
    spans: tuple[tuple[str, str, str], ...]  # (paradigm title, first start, last finish) of each side's runs
    warmups: tuple[int, ...]  # the warm-up passes a run the runs recorded
    cold: tuple[Cold, ...]

    def process_of(self, run_id: str) -> tuple[int, int, int] | None:
        """(process number from 1, how many processes, the run's number among its model's runs there from 1)."""
        for i, process in enumerate(self.processes):
            if run_id in process.run_ids:
                at = process.run_ids.index(run_id)
                model = process.models[at]
                return i + 1, len(self.processes), process.models[: at + 1].count(model)
        return None


def history(results: Sequence[RunResult], runs: pl.DataFrame) -> History:
    """The History of a sweep's successful runs (`runs`: report.table.flat.results_table, one row per run)."""
    ok = sorted((r for r in results if r.samples is not None and r.started_at), key=lambda r: r.started_at or "")
    commits = tuple(dict.fromkeys((r.environment.git_commit or "unknown")[:7] for r in ok if r.environment))
    groups: dict[tuple, list[RunResult]] = {}
    for r in ok:
        roofs = r.environment.measured_roofs if r.environment else None
        if roofs is not None:
            key = (roofs.device, roofs.matmul_flops_per_s, roofs.memory_bandwidth_bytes_per_s, roofs.wall_s)
            groups.setdefault(key, []).append(r)
    processes = tuple(Process(g[0].started_at or "", max(x.finished_at or "" for x in g),
                              tuple(x.run_id for x in g), tuple(x.config.model.name for x in g))
                      for g in groups.values())
    spans = []
    for paradigm in ("autoregressive", "diffusion"):
        mine = [r for r in ok if family(r.config.model.arch).paradigm == paradigm]
        if mine:
            title = "/".join(dict.fromkeys(family(r.config.model.arch).title for r in mine))
            spans.append((title, mine[0].started_at or "", max(r.finished_at or "" for r in mine)))
    cold = []
    for r in ok:
        first, others = r.samples.latency_e2e_s[0], r.samples.latency_e2e_s[1:]
        rest = stats.median(others) if len(others) >= 2 else None
        if rest and first > COLD_RATIO * rest:
            cold.append(Cold(r.run_id, first, rest))
    return History(commits, tuple(sorted(processes, key=lambda p: p.started_at)), interleaved(runs),
                   tuple(spans), tuple(sorted({r.config.controls.warmup for r in ok})), tuple(cold))


def pair_histories(results: Sequence[RunResult], runs: pl.DataFrame, pairs: Sequence[Pair]) -> dict[str, str]:
    """Each pair's history_text from its two models' runs alone, keyed by Pair.heading; empty where the sweep is one
    pair and nothing else (its history is the sweep's). A three-way sweep's processes and interleaving are then said
    of each pair's own runs, never of the families together, nor of a model that pairs with none."""
    paired = {name for pair in pairs for name in (pair.ar_model, pair.dllm_model)}
    if len(pairs) < 2 and {r.config.model.name for r in results} <= paired:
        return {}
    texts = {}
    for pair in pairs:
        models = {pair.ar_model, pair.dllm_model}
        mine = [r for r in results if r.config.model.name in models]
        texts[pair.heading] = history_text(history(mine, runs.filter(pl.col("model").is_in(sorted(models)))))
    return texts


def history_text(h: History) -> str:
    """The provenance in one clause list: 'measured at commit 966dbce, in 4 worker processes (...), LLaMA and LLaDA
    not interleaved (...), 1 warm-up pass a run; 1 run's first repetition ran cold (...)'."""
    parts = [f"measured at commit {', '.join(h.commits) or 'unknown'}"]
    if h.processes:
        spans = "; ".join(f"{_span(p.started_at, p.finished_at)} UTC, {len(p.run_ids)} runs" for p in h.processes)
        parts.append(f"in {len(h.processes)} worker process{'es' if len(h.processes) > 1 else ''} ({spans})")
    if len(h.spans) == 2:
        (ar, ar_from, ar_to), (dllm, dllm_from, dllm_to) = h.spans
        if h.interleaved:
            parts.append(f"{ar} and {dllm} interleaved point by point")
        elif h.interleaved is False:
            parts.append(f"{ar} and {dllm} not interleaved ({ar} {_span(ar_from, ar_to)}, {dllm} "
                         f"{_span(dllm_from, dllm_to)})")
    if h.warmups:
        count = "/".join(str(w) for w in h.warmups)
        parts.append(f"{count} warm-up pass{'es' if h.warmups != (1,) else ''} a run")
    text = ", ".join(parts)
    if h.cold:
        runs = "; ".join(f"{c.run_id}: {c.first_s:.3g} s against {c.others_s:.3g} s" for c in h.cold)
        whose = f"{len(h.cold)} runs'" if len(h.cold) > 1 else "1 run's"
        text += (f"; {whose} first repetition ran over {COLD_RATIO:g}x the median of the others, so the warm-up did "
                 f"not settle it ({runs})")
    return text


def _span(start: str, end: str) -> str:
    """'15:53–15:58', or '12:19' where both fall in one minute."""
    return _clock(start) if _clock(start) == _clock(end) else f"{_clock(start)}–{_clock(end)}"


def _clock(stamp: str) -> str:
    """'2026-11-24T15:53:44.523+00:00' → '15:53' (UTC as recorded)."""
    return stamp[11:16] if len(stamp) >= 16 else stamp
