"""The goals of a GPU round, each met or missed with its figure: pure functions over the round's artifacts (the
campaign's run results and the device tests' findings), so they are evaluated the same way on the GPU machine
(no torch, no polars needed) and tested on a CPU.

The goals, from the last round's plan:
  * LLaMA's graph-captured decode (a `compile` variant: reduce-overhead's CUDA graphs) at >= 60% of the memory
    roof at B = 1 and >= 50% at B = 64: the roofline's mean decode-pass bytes (roofline/llama.py, the bytes the
    report charges) over the bandwidth the run's worker measured, against the run's median decode step;
  * the LLaDA graph step's host overhead <= 2 ms: the host time of one replayed vanilla step (`next(sampler)`,
    no synchronize) that tests/gpu/test_gpu_graphs.py records as the finding `llada_step_host_ms`;
  * the dual cache >= 2.5x faster than vanilla at B = 1: vanilla LLaDA's median latency over the fastest dual-cache
    variant's (eager or graph);
  * the roofline a bound: no run faster than 0.9x its roofs-only prediction (roofline/measured.py), as the report
    flags it;
  * the headline over sessions: at every batch, each side's fastest implementation ran in at least
    HEADLINE_SESSIONS sessions, so its speedup's interval is a t interval over them (the report computes it).
A goal whose artifact is missing (a piece not run yet, a run that failed) is neither met nor missed: `met` None.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from roofline.errors import RooflineInputError
from roofline.llama import mean_decode_pass_bytes
from roofline.measured import VIOLATION_FRACTION, predict_result, profile_from_roofs, run_profile
from roofline.workload import run_workload
from specs.registry import family, preset_shape
from specs.results import RunResult, RunStatus

LLAMA_DECODE_ROOF_SHARE = {1: 0.60, 64: 0.50}  # batch -> the least share of the memory roof
LLADA_GRAPH_HOST_MS = 2.0
DUAL_CACHE_SPEEDUP_B1 = 2.5
HOST_FINDING = "llada_step_host_ms"
HEADLINE_SESSIONS = 3


class Goal(BaseModel):
    """One goal: what it asks, the figure measured, met or missed (None: not measured), and where it comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    target: str
    figure: float | None
    unit: str
    met: bool | None
    detail: str


def evaluate_goals(results: Sequence[RunResult], findings: Sequence[dict[str, Any]]) -> list[Goal]:
    """Every goal of the round over its artifacts."""
    ok = [r for r in results if r.status == RunStatus.OK and r.samples is not None and r.samples.latency_e2e_s]
    return [
        *(llama_decode_goal(ok, batch, share) for batch, share in LLAMA_DECODE_ROOF_SHARE.items()),
        llada_host_goal(findings),
        dual_cache_goal(ok),
        roofline_bound_goal(ok),
        sessions_goal(ok),
    ]


def _median_latency(result: RunResult) -> float:
    assert result.samples is not None
    return statistics.median(result.samples.latency_e2e_s)


def decode_roof_share(result: RunResult) -> float | None:
    """The memory roof of the run's mean decode pass over its median decode step; None without decode steps or
    measured roofs."""
    env, samples, config = result.environment, result.samples, result.config
    roofs = env.measured_roofs if env is not None else None
    steps = [s for repetition in (samples.itl_s or []) for s in repetition] if samples is not None else []
    if roofs is None or not steps:
        return None
    shape = result.model_shape or config.model.shape() or preset_shape("llama", "8b")
    try:
        roof_bytes = mean_decode_pass_bytes(shape, run_workload(config))
    except RooflineInputError:
        return None
    return roof_bytes / roofs.memory_bandwidth_bytes_per_s / statistics.median(steps)


def llama_decode_goal(results: Iterable[RunResult], batch: int, share: float) -> Goal:
    """The best graph-captured LLaMA decode at `batch` against the memory roof."""
    name, target = f"llama graph decode B = {batch}", f">= {share:.0%} of the memory roof"
    shares = {
        r.config.impl_name: s for r in results
        if r.config.batch_size == batch and r.config.llama_impl is not None  # only autoregressive runs carry one
        and r.config.llama_impl.compile and (s := decode_roof_share(r)) is not None
    }  # fmt: skip
    if not shares:
        return Goal(name=name, target=target, figure=None, unit="share", met=None,
                    detail=f"no compiled LLaMA run at B = {batch} with decode steps")  # fmt: skip
    impl = max(shares, key=lambda k: shares[k])
    each = ", ".join(f"{k} {v:.0%}" for k, v in sorted(shares.items()))
    return Goal(name=name, target=target, figure=shares[impl], unit="share", met=shares[impl] >= share,
                detail=f"{impl}: the roofline's mean decode-pass bytes over the measured bandwidth / median decode "
                f"step ({each})")  # fmt: skip


def llada_host_goal(findings: Iterable[dict[str, Any]]) -> Goal:
    """The host time of a replayed LLaDA vanilla step, from the device tests' finding."""
    name, target = "llada graph step host overhead", f"<= {LLADA_GRAPH_HOST_MS:g} ms"
    found = [f for f in findings if f.get("finding") == HOST_FINDING]
    vanilla = [f for f in found if f.get("cache") == "none" and f.get("replayed_median") is not None]
    if not vanilla:
        return Goal(name=name, target=target, figure=None, unit="ms", met=None,
                    detail=f"no finding {HOST_FINDING!r} (cache none) from tests/gpu/test_gpu_graphs.py")  # fmt: skip
    figure = float(vanilla[-1]["replayed_median"])
    others = "; ".join(f"cache {f.get('cache')}: replayed {f.get('replayed_median'):.3g} ms, eager "
                       f"{f.get('eager_median'):.3g} ms" for f in found)  # fmt: skip
    return Goal(name=name, target=target, figure=figure, unit="ms", met=figure <= LLADA_GRAPH_HOST_MS,
                detail=f"host time of next(sampler) on a replayed step, batch 1, bf16, the `small` preset "
                f"({vanilla[-1].get('layers')} layers), median over a generation; {others}")  # fmt: skip


def dual_cache_goal(results: Iterable[RunResult]) -> Goal:
    """Vanilla LLaDA's median latency over the fastest dual-cache variant's at B = 1."""
    name, target = "dual cache over vanilla B = 1", f">= {DUAL_CACHE_SPEEDUP_B1:g}x"
    llada = [r for r in results if family(r.config.model.arch).sampler == "llada" and r.config.batch_size == 1]
    vanilla = [r for r in llada if r.config.llada_impl is None or r.config.llada_impl.name == "vanilla"]
    # The full run where there is one: an extrapolated latency is a prediction from its first steps.
    vanilla.sort(key=lambda r: r.samples is not None and r.samples.extrapolated is not None)
    dual = {r.config.impl_name: _median_latency(r) for r in llada
            if r.config.llada_impl is not None and r.config.llada_impl.cache == "dual"}  # fmt: skip
    if not vanilla or not dual:
        return Goal(name=name, target=target, figure=None, unit="x", met=None,
                    detail="needs a vanilla and a dual-cache LLaDA run at B = 1")  # fmt: skip
    base = _median_latency(vanilla[0])
    impl = min(dual, key=lambda k: dual[k])
    each = ", ".join(f"{k} {base / v:.3g}x" for k, v in sorted(dual.items()))
    speedup = base / dual[impl]
    return Goal(name=name, target=target, figure=speedup, unit="x", met=speedup >= DUAL_CACHE_SPEEDUP_B1,
                detail=f"{impl}: vanilla's median latency {base:.3g} s / {dual[impl]:.3g} s ({each})")  # fmt: skip


def roofline_bound_goal(results: Iterable[RunResult]) -> Goal:
    """Every run's roofs-only prediction on its own measured roofs against its median latency."""
    name, target = "roofline a bound", f"no run faster than {VIOLATION_FRACTION:g}x its roofs-only prediction"
    efficiencies: dict[str, float] = {}
    for result in results:
        roofs = result.environment.measured_roofs if result.environment is not None else None
        if roofs is None:
            continue
        try:
            prediction = predict_result(result, run_profile(profile_from_roofs(roofs), result))
        except RooflineInputError:
            continue
        roofs_s = prediction.latency_roofs_s if prediction.latency_roofs_s is not None else prediction.latency_s
        efficiencies[result.run_id] = roofs_s / _median_latency(result)
    if not efficiencies:
        return Goal(name=name, target=target, figure=None, unit="efficiency", met=None,
                    detail="no run with measured roofs")  # fmt: skip
    violated = sorted(k for k, v in efficiencies.items() if v > 1 / VIOLATION_FRACTION)
    worst = max(efficiencies, key=lambda k: efficiencies[k])
    return Goal(name=name, target=target, figure=efficiencies[worst], unit="efficiency", met=not violated,
                detail=f"highest roofs-only predicted / measured latency over {len(efficiencies)} runs: run {worst}"
                + (f"; violated by {', '.join(violated)}" if violated else ""))  # fmt: skip


def sessions_goal(results: Iterable[RunResult]) -> Goal:
    """The fewest sessions in which both models ran at a batch, over the batches both ran."""
    name, target = "headline over sessions", f">= {HEADLINE_SESSIONS} sessions at every batch, both models in each"
    sessions: dict[int, dict[bool, set[int]]] = {}
    for r in results:
        side = family(r.config.model.arch).is_diffusion
        sessions.setdefault(r.config.batch_size, {}).setdefault(side, set()).add(r.config.session or 0)
    both = {b: len(s[True] & s[False]) for b, s in sessions.items() if len(s) == 2}
    if not both:
        return Goal(name=name, target=target, figure=None, unit="sessions", met=None,
                    detail="no batch at which both models ran")  # fmt: skip
    fewest = min(both.values())
    each = ", ".join(f"B = {b}: {n}" for b, n in sorted(both.items()))
    return Goal(name=name, target=target, figure=float(fewest), unit="sessions", met=fewest >= HEADLINE_SESSIONS,
                detail=f"sessions with both models: {each}")


def piece_results(folder: Path) -> list[RunResult]:
    """The run results of every sweep in a piece's folder (whichever variant of its spec ran)."""
    return [r for sweep in sorted(folder.iterdir()) if sweep.is_dir() for r in read_results(sweep)] \
        if folder.is_dir() else []


def read_results(sweep_dir: Path) -> list[RunResult]:
    """The run results a campaign wrote (none when the directory does not exist yet). A file that is no whole run
    result (a sweep killed mid-write leaves none, but a folder may hold strays) scores nothing."""
    runs = sweep_dir / "runs"
    results = []
    for path in sorted(runs.glob("*.json")) if runs.is_dir() else []:
        try:
            results.append(RunResult.model_validate_json(path.read_bytes()))
        except (ValidationError, OSError):
            continue
    return results


def read_findings(path: Path) -> list[dict[str, Any]]:
    """The JSON lines the device tests and the decode profile appended (none when the file does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
