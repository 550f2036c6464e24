"""The host floor per eager forward: measured on the model that runs and recorded beside the roofs, charged by the
roofline to every eager forward; and the eager LLaMA decode's attention kept off cuDNN on a GPU."""

from __future__ import annotations

import gc
import time
from dataclasses import replace

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from orchestrator.plan import plan_runs
from report.analysis.predictions import profile_from_roofs, run_profile
from roofline.hardware import get_hardware
from roofline.predict import predict
from roofline.workload import Workload
from specs.registry import preset_shape
from specs.results import MeasuredRoofs
from specs.schema import LladaImpl, LlamaImpl
from tests.spec_fixtures import spec_from, tiny_spec
from workers.measure import calibrate
from workers.measure.calibrate import (
    GPU_VECTOR_BYTES,
    format_roofs,
    host_floor_s,
    host_seconds,
    with_host_floor,
)
from workers.models.sdpa_backends import eager_llama_decode, without_cudnn_attention

ROOFS = MeasuredRoofs(device="cpu", dtype="float32", threads=1, matmul_flops_per_s=80e9, vector_ops_per_s=4e9,
                      memory_bandwidth_bytes_per_s=15e9, dispatch_s=2e-6, memory_bytes=1 << 33, method="m", wall_s=1.0)


def _micro(layers: int) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    return LlamaForCausalLM(config).eval()


def test_the_host_floor_is_measured_on_the_model_with_its_layers() -> None:
    deep = _micro(8)
    roofs = with_host_floor(ROOFS, deep, "cpu")
    assert roofs.host_floor_layers == 8 and roofs.host_floor_s > 0
    assert with_host_floor(ROOFS, deep, "cpu").host_floor_s == roofs.host_floor_s  # once per model
    assert "host floor" in format_roofs(roofs) and "8-layer" in format_roofs(roofs)
    # What it times is a one-token eager forward through every layer of the model itself (host work is per
    # module, so the layer count sets the floor); timings are never compared here.
    seen: list[tuple[int, tuple[int, ...]]] = []
    hooks = [layer.register_forward_hook(lambda m, args, out, i=i: seen.append((i, tuple(args[0].shape))))
             for i, layer in enumerate(deep.model.layers)]
    try:
        assert host_floor_s(deep, torch.device("cpu")) > 0
    finally:
        for hook in hooks:
            hook.remove()
    calls = len(seen) // 8
    assert calls >= 2 and seen == [(i, (1, 1, 16)) for _ in range(calls) for i in range(8)]
    # The report costs that run on it, and the profile of a sweep without it keeps the dispatch floor.
    assert profile_from_roofs(roofs).host_floor_s == roofs.host_floor_s
    assert profile_from_roofs(ROOFS).host_floor_s == 0.0 and profile_from_roofs(ROOFS).dispatch_s == 2e-6


def test_a_freed_model_leaves_no_host_floor_for_a_model_loaded_in_its_place() -> None:
    """The floor is kept per model object, weakly: a model loaded later (possibly at the freed one's address)
    is measured afresh, never given the freed model's floor and layer count."""
    deep = _micro(8)
    with_host_floor(ROOFS, deep, "cpu")
    assert deep in calibrate._host_floors
    gc.collect()  # earlier tests' dead models go first: between here and the next collection only `deep` is freed
    kept = len(calibrate._host_floors)  # other tests' live models may hold entries too
    del deep
    gc.collect()
    assert len(calibrate._host_floors) == kept - 1
    assert with_host_floor(ROOFS, _micro(2), "cpu").host_floor_layers == 2


class FakeDevice:
    """A device queue in wall time: a forward queues `device_s` of work; a sync waits until the queue is empty."""

    def __init__(self, device_s: float) -> None:
        self.device_s, self.busy_until = device_s, 0.0

    def sync(self) -> None:
        time.sleep(max(0.0, self.busy_until - time.perf_counter()))

    def forward(self, *, host_s: float, syncs_inside: bool) -> None:
        if syncs_inside:  # LLaMA's uncached forward: transformers' mask code reads a device value on the host
            self.sync()
        time.sleep(host_s)
        self.busy_until = max(self.busy_until, time.perf_counter()) + self.device_s


@pytest.mark.parametrize("syncs_inside", [False, True], ids=["llada-like", "llama-like"])
def test_the_host_floor_is_host_time_whether_or_not_the_forward_syncs(syncs_inside: bool) -> None:
    """Device work queued by earlier calls (30 ms each) never enters the interval, with a sync inside the forward
    or without: both models' floors are the host's 2 ms, measured the same way."""
    device = FakeDevice(device_s=0.03)
    seconds = host_seconds(lambda: device.forward(host_s=0.002, syncs_inside=syncs_inside), device.sync, calls=3)
    assert 0.002 <= seconds < 0.015
    # Without draining first, the llama-like forward would have waited for the previous call's device work.
    device.forward(host_s=0.002, syncs_inside=False)
    start = time.perf_counter()
    device.forward(host_s=0.002, syncs_inside=True)
    assert time.perf_counter() - start > 0.02


def test_a_gpu_calibration_streams_its_elementwise_operands() -> None:
    assert GPU_VECTOR_BYTES >= 256 << 20


def test_every_eager_forward_costs_at_least_the_host_floor() -> None:
    h200 = get_hardware("h200")
    llada = preset_shape("llada", "8b")
    work = Workload(prompt_len=256, gen_len=256, steps=64, block_length=64)
    vanilla = predict("llada", llada, work, hardware=h200)
    assert vanilla.latency_roofs_s < vanilla.latency_s == pytest.approx(64 * h200.host_floor_s)
    dual = predict("llada", llada, replace(work, cache="dual"), hardware=h200)
    assert dual.latency_s == pytest.approx(64 * h200.host_floor_s)  # host-bound: the cache cannot help at B = 1
    captured = predict("llada", llada, replace(work, cache="dual"), hardware=h200, graph_forwards=True)
    assert captured.latency_s == captured.latency_roofs_s < dual.latency_s
    # Half the layers, half the floor.
    half = predict("llada", llada.model_copy(update={"num_layers": 16}), work, hardware=h200)
    assert half.host_floor_s == pytest.approx(h200.host_floor_s / 2)
    # A large batch is above the floor: the floor changes nothing there.
    big = predict("llada", llada, replace(work, batch=64), hardware=h200)
    assert big.latency_s == big.latency_roofs_s


def test_a_run_is_costed_on_its_own_models_host_floor() -> None:
    from specs.results import Environment, RunResult, RunStatus

    planned = plan_runs(spec_from(tiny_spec(batch_sizes=[1])))
    roofs = ROOFS.model_copy(update={"host_floor_s": 5e-3, "host_floor_layers": 2})
    env = Environment(hostname="h", platform="p", python="3", device="cpu", measured_roofs=roofs)
    result = RunResult(run_id=planned[0].run_id, sweep="s", config=planned[0].config, status=RunStatus.OK,
                       environment=env, started_at="t", finished_at="t", weights="synthetic")
    profile = run_profile(profile_from_roofs(ROOFS), result)
    assert (profile.host_floor_s, profile.host_floor_layers) == (5e-3, 2)


def test_only_the_eager_llama_decode_on_a_gpu_leaves_cudnn_out() -> None:
    planned = [r.config for r in plan_runs(spec_from(tiny_spec(batch_sizes=[1])))]
    llama = next(c for c in planned if c.model.arch == "llama")
    llada = next(c for c in planned if c.model.arch == "llada")
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    assert eager_llama_decode(llama, gpu)
    assert not eager_llama_decode(llama, cpu) and not eager_llama_decode(llada, gpu)
    compiled = llama.model_copy(update={"llama_impl": LlamaImpl(name="static-compile", compile=True)})
    assert not eager_llama_decode(compiled, gpu)
    assert not eager_llama_decode(llada.model_copy(update={"llada_impl": LladaImpl(name="d", cache="dual")}), gpu)
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with without_cudnn_attention(llama, gpu):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with without_cudnn_attention(llada, gpu):
        assert torch.backends.cuda.cudnn_sdp_enabled()
