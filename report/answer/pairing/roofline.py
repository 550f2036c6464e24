"""The roofline's B* of a pairing whose sides run several implementations: at each batch it tries, each model's
fastest predicted implementation among those that ran (report/answer/pairing/build.py's best pairings)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from report.analysis import stats
from roofline.crossover import MAX_BATCH, crossing_batch
from roofline.hardware import HardwareProfile
from roofline.predict import predict_run
from specs.results import RunResult


def representatives(rows: pl.DataFrame, by_id: dict[str, RunResult]) -> dict[str, tuple[RunResult, float | None]]:
    """Per implementation: the run at its smallest batch and its median measured forwards (a confidence rule is
    costed at those), the configuration the roofline re-costs at other batch sizes."""
    out: dict[str, tuple[RunResult, float | None]] = {}
    for row in rows.sort("batch_size").iter_rows(named=True):
        result = by_id.get(row["run_id"])
        if row["impl"] in out or result is None:
            continue
        forwards = result.samples.forwards if result.samples else None
        out[row["impl"]] = (result, stats.median([float(f) for f in forwards]) if forwards else None)
    return out


def _fastest_predicted(runs: dict[str, tuple[RunResult, float | None]], profile: HardwareProfile,
                       batch: int, prefer: Sequence[str] = ()) -> tuple[str, float]:
    """(implementation, latency) of the fastest predicted implementation at `batch`. A tie (a host floor that
    every implementation hits) goes to the first of `prefer` (the measured pairing's), then by name."""
    best: tuple[str, float] | None = None
    for impl in sorted(runs, key=lambda name: (name not in prefer, list(prefer).index(name) if name in prefer else 0,
                                               name)):
        result, forwards = runs[impl]
        config = result.config.model_copy(update={"batch_size": batch})
        latency = predict_run(config, profile, "faithful", shape=result.model_shape,
                              measured_forwards=forwards).latency_s
        if best is None or latency < best[1] * (1 - 1e-9):
            best = (impl, latency)
    assert best is not None, "a pairing has runs on both sides"
    return best


def best_roofline_crossover(
    llama: dict[str, tuple[RunResult, float | None]], llada: dict[str, tuple[RunResult, float | None]],
    profile: HardwareProfile, max_batch: int = MAX_BATCH, prefer: Sequence[str] = (),
) -> tuple[float | None, dict[str, str]]:
    """The roofline's B* on `profile` when each model runs its fastest predicted implementation at each batch, and
    the implementations it picks there (ties to `prefer`; keyed 'llama' for the AR side, 'llada' for the diffusion
    side). Both generate B x N_out tokens, so T(AR) / T(dLLM) = L(dLLM) / L(AR)."""

    def log_ratio(batch: int) -> float:
        return math.log(_fastest_predicted(llada, profile, batch, prefer)[1]
                        / _fastest_predicted(llama, profile, batch, prefer)[1])

    crossing = crossing_batch(log_ratio, max_batch)
    at = max_batch if crossing is None else max(1, round(crossing))
    chosen = {"llama": _fastest_predicted(llama, profile, at, prefer)[0],
              "llada": _fastest_predicted(llada, profile, at, prefer)[0]}
    return crossing, chosen
