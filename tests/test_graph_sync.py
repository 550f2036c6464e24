"""No host sync inside a timed step of a graph variant, once its warm-up has compiled (captured) it."""

from __future__ import annotations

import pytest
import torch

from specs.schema import LladaImpl, LlamaImpl
from tests.test_sync_free import StepTimer, SyncCounter, _model
from tests.worker_fixtures import one_thread, run_config  # noqa: F401 (fixture)
from workers.measure.scenario import CompiledSteps, generate
from workers.measure.timing import PerfCounterTimer

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "impl"),
    [("llada", LladaImpl(name="dual-graph", cache="dual", graph=True)),
     ("llada", LladaImpl(name="graph", graph=True)),
     ("llama", LlamaImpl(name="graph-live", compile=True, decode_attention="live"))],
    ids=lambda value: getattr(value, "name", value),
)  # fmt: skip
def test_graph_variants_never_sync_inside_a_timed_step(arch: str, impl: object, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = _model(arch, "sdpa")
    config = run_config(arch, batch_size=2, prompt_length=16, generation_length=16)
    if arch == "llada":
        config = config.model_copy(update={"steps": 8, "block_length": 8, "llada_impl": impl})
    else:
        config = config.model_copy(update={"llama_impl": impl})
    prompt = torch.randint(1000, 2000, (2, 16))
    compiled = CompiledSteps()
    warm = generate(loaded, config, prompt, timer=PerfCounterTimer(), seed=0, temperature=0.0, compiled=compiled)
    assert compiled.preparation_s is not None and compiled.preparation_s > 0
    counter = SyncCounter(monkeypatch)
    timer = StepTimer(counter)
    run = generate(loaded, config, prompt, timer=timer, seed=0, temperature=0.0, compiled=compiled)
    assert len(run.steps) == len(timer.per_step) == run.forwards
    assert [calls for calls in timer.per_step if calls] == []
    assert torch.equal(run.tokens, warm.tokens)
