"""The roofline costs a LLaDA `graph` variant as it costs LLaMA's compiled decode: no host floor per forward
and no per-launch dispatch floor, only the roofs."""

from __future__ import annotations

import pytest

from roofline.hardware import get_hardware
from roofline.predict import predict_run
from specs.schema import LladaImpl
from tests.worker_fixtures import run_config


@pytest.mark.parametrize("floor", ["dispatch_s", "host_floor_s"])
@pytest.mark.parametrize("cache", ["none", "dual"])
def test_graph_variant_is_costed_on_the_roofs_alone(floor: str, cache: str) -> None:
    floored = get_hardware("h100-sxm").model_copy(update={floor: 5e-3})
    config = run_config("llada", batch_size=1, prompt_length=64, generation_length=64).model_copy(
        update={"steps": 8, "block_length": 32})
    eager_impl = LladaImpl(name="eager", cache=cache) if cache != "none" else None
    eager = predict_run(config.model_copy(update={"llada_impl": eager_impl}), floored)
    graph = predict_run(config.model_copy(update={"llada_impl": LladaImpl(name="g", cache=cache, graph=True)}), floored)
    assert graph.latency_s < eager.latency_s
    assert graph.latency_s == pytest.approx(graph.latency_roofs_s)
    assert graph.latency_roofs_s == pytest.approx(eager.latency_roofs_s)
