"""No host sync inside a timed step: what the attention kernel receives, and every synchronising call counted.

The device is the only thing faked. The models run on the CPU with `_attn_implementation =
"flash_attention_2"`, and the registry entry of that kernel is a stand-in that records its keyword
arguments and computes with sdpa: transformers' real flash path reads `position_ids` on the host
(`_is_packed_sequence`, once per layer at batch 1), so receiving them is what syncs on a GPU. Around each
step that the scenario times, every tensor method that forces a device->host transfer is counted
(bool/int/float/index conversions, item, tolist, nonzero, cpu, numpy, torch.cuda.synchronize).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from specs.schema import Controls, LladaImpl, ModelSpec
from tests.worker_fixtures import one_thread, run_config  # noqa: F401 (fixture)
from workers.measure.scenario import generate
from workers.models.loading import load_model

pytestmark = pytest.mark.usefixtures("one_thread")

SYNCING_METHODS = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "nonzero", "cpu", "numpy")


class SyncCounter:
    """Counts synchronising calls while `counting` is on; torch is patched for the test's duration."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counting = False
        self.calls: list[str] = []
        for name in SYNCING_METHODS:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(name, getattr(torch.Tensor, name)))
        monkeypatch.setattr(torch, "nonzero", self._wrap("torch.nonzero", torch.nonzero))
        monkeypatch.setattr(torch.cuda, "synchronize", self._wrap("cuda.synchronize", lambda *a, **k: None))

    def _wrap(self, name: str, real):  # noqa: ANN001, ANN202
        counter = self

        def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if counter.counting:
                counter.calls.append(name)
            return real(*args, **kwargs)

        return counted


class StepTimer:
    """A timer like the scenario's: the outermost region is the generation, the nested ones its steps.
    Syncs are counted inside the steps only; each step's count is kept."""

    kind = "perf_counter"

    def __init__(self, counter: SyncCounter) -> None:
        self.counter = counter
        self.depth = 0
        self.per_step: list[list[str]] = []

    @contextmanager
    def measure(self) -> Iterator[object]:
        self.depth += 1
        step = self.depth == 2
        if step:
            self.counter.calls, self.counter.counting = [], True
        try:
            yield object()
        finally:
            if step:
                self.counter.counting = False
                self.per_step.append(self.counter.calls)
            self.depth -= 1

    def synchronize(self) -> None:
        return None


class KernelSpy:
    """Stands in for the flash-attention kernel: records what each call receives, computes with sdpa."""

    def __init__(self) -> None:
        self.kwargs: list[set[str]] = []

    def __call__(self, module, query, key, value, attention_mask, **kwargs):  # noqa: ANN001, ANN003, ANN204
        self.kwargs.append(set(kwargs))
        kwargs.pop("position_ids", None)
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


@pytest.fixture()
def spy(monkeypatch: pytest.MonkeyPatch) -> KernelSpy:
    kernel = KernelSpy()
    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "flash_attention_2", kernel)
    return kernel


def _model(arch: str, kernel: str):  # noqa: ANN202
    spec = ModelSpec(name=f"{arch}-tiny", arch=arch, source={"synthetic": "tiny"})
    loaded = load_model(spec, Controls(dtype="float32", device="cpu"), torch.device("cpu"))
    loaded.model.config._attn_implementation = kernel  # flash_attention_2: the kernel the registry spy replaces
    return loaded


@pytest.mark.parametrize("kernel", ["flash_attention_2", "sdpa"])
@pytest.mark.parametrize("arch", ["llama", "llada", "qwen2", "dream"])
def test_timed_steps_never_sync_and_the_kernel_never_gets_position_ids(
    arch: str, kernel: str, spy: KernelSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 1, where transformers' packed-sequence check would read the position ids in every layer."""
    loaded = _model(arch, kernel)
    config = run_config(arch, batch_size=1, prompt_length=16, generation_length=16)
    if arch == "llada":
        config = config.model_copy(update={"steps": 8, "block_length": 8})  # 2 blocks: a window per block
    prompt = torch.randint(1000, 2000, (1, 16))
    counter = SyncCounter(monkeypatch)
    timer = StepTimer(counter)
    run = generate(loaded, config, prompt, timer=timer, seed=0, temperature=0.0)
    expected_steps = config.steps if config.steps is not None else config.generation_length
    assert len(run.steps) == len(timer.per_step) == expected_steps
    if kernel == "flash_attention_2":
        assert spy.kwargs, "the flash-attention stand-in was never called"
        assert all("position_ids" not in received for received in spy.kwargs)
    assert [calls for calls in timer.per_step if calls] == []


@pytest.mark.parametrize(
    "impl",
    [LladaImpl(name="prefix", cache="prefix"), LladaImpl(name="dual", cache="dual"),
     LladaImpl(name="threshold", threshold=1e-9), LladaImpl(name="factor", factor=4.0),
     LladaImpl(name="dual-threshold", cache="dual", threshold=1e-9)],
    ids=lambda impl: impl.name,
)  # fmt: skip
def test_no_llada_variant_syncs_inside_a_timed_step(impl: LladaImpl, monkeypatch: pytest.MonkeyPatch) -> None:
    """A confidence rule ends blocks early, which the host must learn: it reads that between steps, never
    inside one; the caches add no read either."""
    loaded = _model("llada", "sdpa")
    config = run_config("llada", batch_size=2, prompt_length=16, generation_length=16).model_copy(
        update={"steps": 8, "block_length": 8, "llada_impl": impl})
    counter = SyncCounter(monkeypatch)
    timer = StepTimer(counter)
    run = generate(loaded, config, torch.randint(1000, 2000, (2, 16)), timer=timer, seed=0, temperature=0.0)
    assert len(run.steps) == len(timer.per_step) == run.forwards
    if impl.threshold is not None:  # 1e-9 accepts every candidate: each block ends after its first step
        assert run.forwards == 2
    assert sum(run.committed) == 2 * 16  # every position filled, each counted once, read after the timing
    assert [calls for calls in timer.per_step if calls] == []


def test_counter_sees_a_sync_added_inside_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard itself: a step that reads a value on the host is caught."""
    counter = SyncCounter(monkeypatch)
    timer = StepTimer(counter)
    with timer.measure(), timer.measure():
        x = torch.ones(3)
        if (x > 0).all():
            pass
    assert timer.per_step == [["__bool__"]]
