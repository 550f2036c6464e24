"""A run whose KV cache was never written fails with a clear error instead of measuring a model without it.

The failure this guards against: a transformers release renamed the keyword the cache travels under, the
attention modules stopped receiving it, and a dual-cache run recorded a cache of 0 bytes and a speedup."""

from __future__ import annotations

import pytest
import torch
from transformers import StaticCache

from specs.results import RunStatus
from specs.schema import Controls, LladaImpl
from tests.worker_fixtures import run_config
from workers.models.cache_kwarg import CACHE_KWARG, cache_kwargs, pop_cache
from workers.runner import Worker
from workers.samplers.llada.block_cache import BlockCache
from workers.samplers.cache_check import CacheNotWrittenError, require_written, unwritten_layers
from workers.samplers.kv_cache import PreallocatedCache

QUICK = Controls(dtype="float32", device="cpu", warmup=0, repetitions=1)
KV = torch.zeros(1, 2, 8, 4)  # [B, H_kv, L, D]


def test_pop_cache_takes_the_cache_under_either_name() -> None:
    for name in ("cache", "past_key_values"):
        kwargs: dict[str, object] = {name: "the-cache", "other": 1}
        assert pop_cache(kwargs) == "the-cache" and kwargs == {"other": 1}
    assert pop_cache({}) is None
    assert cache_kwargs("c") == {CACHE_KWARG: "c"}


def test_each_cache_kind_reports_the_layers_nobody_wrote() -> None:
    block, prealloc = BlockCache(3, length=8), PreallocatedCache(3, capacity=8)
    assert unwritten_layers(block) == unwritten_layers(prealloc) == [0, 1, 2]
    block.update(KV, KV, 0)
    block.update(KV, KV, 2)
    prealloc.update(KV, KV, 1)
    assert unwritten_layers(block) == [1] and unwritten_layers(prealloc) == [0, 2]


def test_require_written_names_the_cache_and_passes_a_written_one(tiny_llama_config) -> None:  # noqa: ANN001
    static = StaticCache(config=tiny_llama_config, max_cache_len=8)
    with pytest.raises(CacheNotWrittenError, match=r"the static KV cache was never written in \d+ of \d+ layers"):
        require_written(static, "static")
    layers = len(static.layers)
    kv = torch.zeros(1, tiny_llama_config.num_key_value_heads, 1, tiny_llama_config.head_dim)
    for layer in range(layers):
        static.update(kv, kv, layer, {"cache_position": torch.tensor([0])})
    require_written(static, "static")
    require_written(None, "none")


@pytest.fixture
def tiny_llama_config():  # noqa: ANN201
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8,
    )  # fmt: skip


@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_a_cached_llada_run_whose_attention_drops_the_cache_fails(cache: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention that never sees the cache still returns logits; the run must end in an error, not a result."""
    monkeypatch.setattr("workers.models.llada_model.pop_cache", lambda kwargs: (pop_cache(kwargs), None)[1])
    config = run_config("llada", controls=QUICK, llada_impl=LladaImpl(name=f"{cache}-cache", cache=cache))
    result = Worker().run(config, sweep="s", run_id=f"bypassed-{cache}")
    assert result.status == RunStatus.ERROR
    assert f"the {cache} KV cache was never written" in (result.error or "")
    assert result.samples is None or not result.samples.latency_e2e_s


def test_a_llama_run_whose_model_never_gets_the_preallocated_cache_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workers.samplers.autoregressive.cache_kwargs", lambda cache: {})
    result = Worker().run(run_config("llama", controls=QUICK), sweep="s", run_id="bypassed-llama")
    assert result.status == RunStatus.ERROR
    assert "the preallocated KV cache was never written" in (result.error or "")
