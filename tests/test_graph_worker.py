"""A run of a graph variant through the worker: warm-ups compile (capture), the timed repetitions do not,
the tokens are the eager variant's, and the artifact says how the step forward and attention ran."""

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


@pytest.mark.slow
def test_llada_graph_variant_gives_the_eager_variants_tokens_and_records_its_capture(worker: Worker) -> None:
    """Dual cache with and without `graph`: the same tokens; the capture (CPU: compilation) happens in the
    warm-ups the scenario adds, one per prompt batch the repetitions use (LLaDA's windows follow the tokens),
    so no timed repetition is slower than it."""
    eager = worker.run(run_config("llada", controls=QUICK, llada_impl=LladaImpl(name="dual", cache="dual")),
                       sweep="s", run_id="dual")  # fmt: skip
    impl = LladaImpl(name="dual-graph", cache="dual", graph=True)
    result = worker.run(run_config("llada", controls=QUICK, llada_impl=impl), sweep="s", run_id="dual-graph")
    assert result.status == RunStatus.OK, result.traceback
    assert result.preparation_s is not None and result.preparation_s > 0
    # the capture ran in the warm-ups (a capture in a timed repetition fails the run: Preparation.frozen); how long it
    # took depends on inductor's cache, warm or cold, so it is not compared with a repetition's latency
    assert len(result.samples.warmup_latency_s) == 2
    assert result.environment.forward_capture == "inductor" and result.environment.kv_cache == "dual"
    assert eager.environment.forward_capture is None and eager.preparation_s is None
    assert [g.token_ids for g in result.generations] == [g.token_ids for g in eager.generations]


@pytest.mark.slow
def test_llama_live_attention_variant_gives_vanilla_tokens_and_names_its_kernel(worker: Worker) -> None:
    vanilla = worker.run(run_config("llama", controls=QUICK), sweep="s", run_id="llama")
    impl = LlamaImpl(name="graph-live", compile=True, decode_attention="live")
    result = worker.run(run_config("llama", controls=QUICK, llama_impl=impl), sweep="s", run_id="live")
    assert result.status == RunStatus.OK, result.traceback
    assert result.environment.kv_cache == "live" and result.cache_bytes > 0
    assert "live prefix" in (result.environment.decode_attention_kernel or "")
    assert result.environment.forward_capture == "inductor"
    assert [g.token_ids for g in result.generations] == [g.token_ids for g in vanilla.generations]
