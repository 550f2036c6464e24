"""A run of an implementation variant: the worker picks it from the RunConfig and records what it did."""

from __future__ import annotations

import pytest

from specs.results import RunStatus
from specs.schema import Controls, LladaImpl, LlamaImpl
from tests.worker_fixtures import run_config
from workers.runner import Worker

QUICK = Controls(dtype="float32", device="cpu", warmup=0, repetitions=2)


@pytest.fixture(scope="module")
def worker() -> Worker:
    return Worker()


def test_vanilla_runs_record_forwards_and_the_decode_loops_cache(worker: Worker) -> None:
    llada = worker.run(run_config("llada", controls=QUICK), sweep="s", run_id="v-llada")
    llama = worker.run(run_config("llama", controls=QUICK), sweep="s", run_id="v-llama")
    assert llada.status == llama.status == RunStatus.OK
    assert llada.samples.forwards == [8, 8] and llada.nfe == 8 and llada.cache_bytes is None
    assert llada.environment.kv_cache == "none" and llada.preparation_s is None
    assert llama.samples.forwards == [16, 16] and llama.nfe == 16 and llama.cache_bytes > 0
    assert llama.environment.kv_cache == "preallocated" and llama.preparation_s is None


def test_cached_threshold_variant_records_its_forwards_and_cache(worker: Worker) -> None:
    """The random tiny model's confidences are ~1/vocab; a factor this large passes every position (1 - f/(n+1)
    < 0 for n < f - 1), so each block ends after its first step: 2 blocks, 2 forwards of the schedule's 8."""
    impl = LladaImpl(name="dual-factor", cache="dual", factor=100.0)
    result = worker.run(run_config("llada", controls=QUICK, llada_impl=impl), sweep="s", run_id="dual-t")
    assert result.status == RunStatus.OK, result.traceback
    s = result.samples
    assert result.nfe == 8 and s.forwards == [2, 2]
    assert [len(steps) for steps in s.step_s] == s.forwards
    assert all(sum(c) == 2 * 16 for c in s.tokens_committed)  # every position once (no mask predicted here)
    assert result.cache_bytes > 0 and result.environment.kv_cache == "dual"
    assert all(len(g.token_ids) == 16 for g in result.generations)


@pytest.mark.slow
def test_compile_variant_gives_vanilla_tokens_and_records_compile_time(worker: Worker) -> None:
    """Compiled in the warm-ups (none configured: the scenario adds one per batch shape), never timed."""
    vanilla = worker.run(run_config("llama", controls=QUICK), sweep="s", run_id="llama")
    config = run_config("llama", controls=QUICK, llama_impl=LlamaImpl(name="static-compile", compile=True))
    result = worker.run(config, sweep="s", run_id="compiled")
    assert result.status == RunStatus.OK, result.traceback
    assert result.preparation_s is not None and result.preparation_s > 0
    assert len(result.samples.warmup_latency_s) == 1 and result.samples.warmup_latency_s[0] > result.preparation_s
    assert max(result.samples.latency_e2e_s) < result.preparation_s
    assert result.environment.kv_cache == "static" and result.cache_bytes > 0
    assert [g.token_ids for g in result.generations] == [g.token_ids for g in vanilla.generations]
