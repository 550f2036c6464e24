"""Timers and memory trackers: the CPU paths for real, the CUDA paths with torch.cuda faked at the boundary."""

from __future__ import annotations

import time

import pytest
import torch

from specs.results import Memory
from workers.measure import memory as memory_module
from workers.measure import timing
from workers.measure.memory import CpuPeakRss, MemoryTracker, free_device_memory, memory_at_failure
from workers.measure.timing import CudaEventTimer, PerfCounterTimer, timer_for
from workers.models.loading import weights_bytes

CUDA = torch.device("cuda", 0)


def test_perf_counter_timer_measures_the_region() -> None:
    timer = PerfCounterTimer()
    with timer.measure() as interval:
        time.sleep(0.02)
    assert 0.015 < interval.seconds() < 0.5
    assert timer.kind == "perf_counter" and timer_for(torch.device("cpu")).kind == "perf_counter"


class FakeCuda:
    """torch.cuda's timing boundary: events stamp a fake device clock; reading needs a synchronize."""

    def __init__(self) -> None:
        self.clock_ms = 0.0
        self.log: list[str] = []
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing, "timing events must be created with enable_timing=True"
                self.stamp: float | None = None
                self.synced = False

            def record(self, stream=None) -> None:
                fake.log.append("record")
                self.stamp = fake.clock_ms

            def synchronize(self) -> None:
                fake.log.append("event.synchronize")
                self.synced = True

            def elapsed_time(self, end: Event) -> float:
                if not end.synced:
                    raise RuntimeError("elapsed_time before the end event completed")
                fake.log.append("elapsed_time")
                return end.stamp - self.stamp

        self.Event = Event

    def synchronize(self, device=None) -> None:
        self.log.append("cuda.synchronize")


@pytest.fixture()
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "Event", fake.Event)
    monkeypatch.setattr(torch.cuda, "synchronize", fake.synchronize)
    return fake


def test_cuda_event_timer_records_events_and_syncs_only_when_read(fake_cuda: FakeCuda) -> None:
    timer = timer_for(CUDA)
    assert isinstance(timer, CudaEventTimer) and timer.kind == "cuda_event"
    with timer.measure() as whole:
        fake_cuda.clock_ms += 5.0
        with timer.measure() as step:
            fake_cuda.clock_ms += 2.5
        fake_cuda.clock_ms += 1.0
    assert "event.synchronize" not in fake_cuda.log and "cuda.synchronize" not in fake_cuda.log  # no sync inside
    assert step.seconds() == pytest.approx(0.0025)
    assert whole.seconds() == pytest.approx(0.0085)
    assert fake_cuda.log.count("event.synchronize") == 2
    whole.seconds()
    assert fake_cuda.log.count("elapsed_time") == 2  # read once, then cached
    timer.synchronize()
    assert fake_cuda.log[-1] == "cuda.synchronize"


def test_cuda_event_timer_closes_the_region_on_error(fake_cuda: FakeCuda) -> None:
    timer = CudaEventTimer(CUDA)
    with pytest.raises(ValueError), timer.measure() as interval:
        fake_cuda.clock_ms += 3.0
        raise ValueError("boom")
    assert interval.seconds() == pytest.approx(0.003)


def test_host_interval_cannot_be_read_early() -> None:
    interval = timing._HostInterval()
    with pytest.raises(RuntimeError):
        interval.seconds()


class FakeCudaMemory:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.allocated, self.peak_allocated, self.peak_reserved = 100, 100, 200
        self.segments: list[dict] = []  # the allocator's segments, as torch.cuda.memory_snapshot lists them

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def log(name, value=None):
            def fn(*args, **kwargs):
                self.calls.append(name)
                return value() if callable(value) else value
            return fn

        monkeypatch.setattr(torch.cuda, "synchronize", log("synchronize"))
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", log("reset"))
        monkeypatch.setattr(torch.cuda, "empty_cache", log("empty_cache"))
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", log("max_allocated", lambda: self.peak_allocated))
        monkeypatch.setattr(torch.cuda, "max_memory_reserved", log("max_reserved", lambda: self.peak_reserved))
        monkeypatch.setattr(torch.cuda, "memory_allocated", log("allocated", lambda: self.allocated))
        monkeypatch.setattr(torch.cuda, "memory_snapshot", log("snapshot", lambda: self.segments))
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def test_gpu_memory_tracker_resets_then_reads_peaks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCudaMemory()
    fake.install(monkeypatch)
    fake.allocated = 70
    with MemoryTracker(CUDA, weights=64) as tracker:
        assert fake.calls == ["synchronize", "reset", "allocated"]  # the baseline is read after the reset
        fake.peak_allocated, fake.peak_reserved = 1000, 2048
    assert tracker.result() == Memory(
        device="cuda", weights_bytes=64, peak_allocated_bytes=1000, peak_reserved_bytes=2048, baseline_allocated_bytes=70,
        graph_pool_bytes=0, graph_pool_allocated_bytes=0,
    )
    assert fake.calls[3] == "synchronize"  # the peak is read after the device finished
    assert tracker.result().peak_in_use_bytes == 1000  # no graph: what was allocated


def test_gpu_memory_tracker_counts_the_graph_pools_working_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay allocates nothing, so the allocated peak misses the intermediates it writes in its graph's private
    pool: the tracker reads the pools' segments and adds their unallocated bytes (the static output, live,
    is counted once). The default pool and another device's segments are not graph memory."""
    fake = FakeCudaMemory()
    fake.install(monkeypatch)
    fake.segments = [
        {"device": 0, "segment_pool_id": (0, 0), "total_size": 4096, "allocated_size": 4096},
        {"device": 0, "segment_pool_id": (1, 0), "total_size": 5000, "allocated_size": 600},  # LLaDA's pool
        {"device": 0, "segment_pool_id": (0, 3), "total_size": 400, "allocated_size": 0},  # cudagraph trees'
        {"device": 1, "segment_pool_id": (1, 0), "total_size": 9999, "allocated_size": 0},
    ]
    with MemoryTracker(CUDA, weights=64) as tracker:
        fake.peak_allocated = 1000
    memory = tracker.result()
    assert (memory.graph_pool_bytes, memory.graph_pool_allocated_bytes) == (5400, 600)
    assert memory.peak_in_use_bytes == 1000 + 5400 - 600


def test_gpu_memory_at_failure_and_freeing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCudaMemory()
    fake.install(monkeypatch)
    fake.allocated, fake.peak_allocated, fake.peak_reserved = 700, 900, 1024
    memory = memory_at_failure(CUDA, weights=64)
    assert (memory.at_failure_allocated_bytes, memory.peak_allocated_bytes, memory.peak_reserved_bytes) == (700, 900, 1024)
    free_device_memory(CUDA)
    assert fake.calls[-3:] == ["synchronize", "empty_cache", "reset"]


def test_cpu_peak_rss_sees_a_transient_allocation() -> None:
    with MemoryTracker(torch.device("cpu"), weights=1) as tracker:
        block = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
        del block
    memory = tracker.result()
    assert memory.device == "cpu" and memory.peak_allocated_bytes is None
    assert memory.peak_rss_delta_bytes is not None and memory.peak_rss_delta_bytes >= 48 * 2**20


def test_cpu_peak_rss_falls_back_to_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "_try_reset_peak_rss", lambda: False)
    with CpuPeakRss() as peak:
        block = torch.ones(64 * 2**20 // 4)
        time.sleep(0.05)
        del block
    assert peak.method == "sampling" and peak.delta_bytes >= 48 * 2**20


def test_weights_bytes_counts_tied_weights_once() -> None:
    embedding = torch.nn.Embedding(10, 4)
    model = torch.nn.ModuleDict({"embed": embedding, "head": torch.nn.Linear(4, 10, bias=False)})
    model["head"].weight = embedding.weight
    assert weights_bytes(model) == 10 * 4 * 4


# ---------------------------------------------------------------- a run's measured region on a faked GPU


def _fake_generate(log: list[str]):
    """Stands in for scenario.generate: logs each generation; its intervals are already complete."""
    from workers.measure.scenario import TimedGeneration

    def generate(loaded, config, input_ids, *, timer, seed, temperature, compiled=None, engine=None):
        log.append("generate")
        with timer.measure() as e2e:
            steps = []
            for _ in range(config.timed_steps or config.steps or config.generation_length):
                with timer.measure() as step:
                    pass
                steps.append(step)
        return TimedGeneration(tokens=torch.zeros((config.batch_size, config.generation_length), dtype=torch.long),
                               e2e=e2e, steps=steps, committed=[1] * len(steps))

    return generate


def test_each_run_starts_from_an_empty_cache_and_resets_after_its_warmups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Peaks and cached blocks never carry over from earlier runs (or their quality phase): the run starts
    from gc + empty_cache + reset; the warm-ups are followed by another reset and the baseline read."""
    from types import SimpleNamespace

    from tests.worker_fixtures import run_config
    from workers.measure import energy, scenario

    fake = FakeCudaMemory()
    fake.install(monkeypatch)
    monkeypatch.setattr(scenario, "generate", _fake_generate(fake.calls))
    monkeypatch.setattr(scenario, "timer_for", lambda device: PerfCounterTimer())
    monkeypatch.setattr(energy, "import_pynvml", lambda: None)
    config = run_config("llama")  # warmup 1, repetitions 2
    loaded = SimpleNamespace(device=CUDA, weights_bytes=64)
    measurement = scenario.measure(loaded, config, [torch.zeros((2, 16), dtype=torch.long)])
    first = fake.calls.index("generate")
    assert fake.calls[:first] == ["synchronize", "empty_cache", "reset"]
    measured = fake.calls[first + 1 :]
    assert measured[:3] == ["synchronize", "reset", "allocated"] and measured.count("generate") == 2
    assert measurement.memory.baseline_allocated_bytes == fake.allocated
    assert measurement.energy is None  # no NVML: no number, never a guess


class FakeNvml:
    """pynvml's boundary: a total-energy counter in millijoules that the test advances."""

    NVML_CLOCK_SM = 0

    def __init__(self) -> None:
        self.millijoules = 5_000_000
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        self.calls.append("energy")
        return self.millijoules


def test_energy_from_nvml_around_the_measured_repetitions(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from tests.worker_fixtures import run_config
    from workers.measure import energy, scenario

    fake_memory = FakeCudaMemory()
    fake_memory.install(monkeypatch)
    nvml = FakeNvml()
    monkeypatch.setattr(energy, "import_pynvml", lambda: nvml)
    monkeypatch.setattr(energy, "nvml_handle", lambda lib, device: lib.nvmlDeviceGetHandleByIndex(0))
    log: list[str] = []
    real = _fake_generate(log)

    def generate(*args, **kwargs):
        result = real(*args, **kwargs)
        nvml.millijoules += 40_000  # 40 J per generation
        return result

    monkeypatch.setattr(scenario, "generate", generate)
    monkeypatch.setattr(scenario, "timer_for", lambda device: PerfCounterTimer())
    config = run_config("llama")  # B=2, N_out=16, warmup 1, repetitions 2
    measurement = scenario.measure(SimpleNamespace(device=CUDA, weights_bytes=64), config, [torch.zeros((2, 16), dtype=torch.long)])
    e = measurement.energy
    assert e is not None and e.source == "nvml" and "GPU 0" in e.scope
    assert e.joules == pytest.approx(80.0)  # the warm-up's 40 J are outside the region
    assert e.generated_tokens == 2 * 2 * 16 and e.joules_per_token == pytest.approx(80.0 / 64)
    assert nvml.calls == ["init", "energy", "energy", "shutdown"]


def test_extrapolated_run_scales_latency_and_energy_from_its_timed_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from tests.worker_fixtures import run_config
    from workers.measure import energy, scenario

    monkeypatch.setattr(energy, "import_pynvml", lambda: None)
    monkeypatch.setattr(scenario, "generate", _fake_generate([]))
    config = run_config("llada", steps=16, block_length=8, timed_steps=4)
    measurement = scenario.measure(SimpleNamespace(device=torch.device("cpu"), weights_bytes=64), config, [torch.zeros((2, 16), dtype=torch.long)])
    s = measurement.samples
    assert s.extrapolated is not None and (s.extrapolated.timed_steps, s.extrapolated.steps) == (4, 16)
    assert all(len(steps) == 4 for steps in s.step_s) and measurement.nfe == 16 and measurement.outputs == {}
    for e2e, measured, steps in zip(s.latency_e2e_s, s.extrapolated.measured_e2e_s, s.step_s):
        assert e2e == pytest.approx(measured + 12 * sum(steps) / 4)


def test_tensor_peak_counts_the_bytes_alive_at_once_and_repeats() -> None:
    from workers.measure.memory import tensor_peak_bytes

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        first = torch.empty(1 << 20, dtype=torch.uint8)
        second = torch.empty(2 << 20, dtype=torch.uint8)
        del first  # freed before the third: 3 MiB alive at most, never 4
        third = torch.empty(1 << 20, dtype=torch.uint8)
        return second, third

    kept = torch.empty(8 << 20, dtype=torch.uint8)  # alive before the run: not counted
    peaks = [tensor_peak_bytes(run) for _ in range(3)]
    assert peaks == [3 << 20] * 3
    del kept


def test_on_cpu_the_tensor_peak_comes_from_one_more_generation_after_the_timed_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from tests.worker_fixtures import run_config
    from workers.measure import energy, scenario

    log: list[str] = []
    fake = _fake_generate(log)

    def generate(*args, **kwargs):
        held = torch.empty(1 << 20, dtype=torch.uint8)  # what a generation needs at its peak
        result = fake(*args, **kwargs)
        del held
        return result

    class LoggedTracker(MemoryTracker):
        def __exit__(self, *exc) -> None:
            super().__exit__(*exc)
            log.append("region closed")

    monkeypatch.setattr(energy, "import_pynvml", lambda: None)
    monkeypatch.setattr(scenario, "generate", generate)
    monkeypatch.setattr(scenario, "MemoryTracker", LoggedTracker)
    config = run_config("llama")  # warmup 1, repetitions 2
    measurement = scenario.measure(SimpleNamespace(device=torch.device("cpu"), weights_bytes=64), config,
                                   [torch.zeros((2, 16), dtype=torch.long)])
    assert log == ["generate"] * 3 + ["region closed", "generate"]  # warm-up, 2 timed, then the untimed pass
    assert len(measurement.samples.latency_e2e_s) == 2
    assert measurement.memory.peak_tensor_bytes >= 1 << 20
    assert measurement.memory.peak_rss_delta_bytes is not None  # the tracker's reading stays beside it


def test_rapl_counter_sums_packages_and_unwraps(tmp_path) -> None:
    from workers.measure.energy import EnergyMeter

    for index, (start, limit) in enumerate([(900, 1000), (50, 10_000)]):
        domain = tmp_path / f"intel-rapl:{index}"
        domain.mkdir()
        (domain / "name").write_text(f"package-{index}\n")
        (domain / "energy_uj").write_text(str(start))
        (domain / "max_energy_range_uj").write_text(str(limit))
    (tmp_path / "intel-rapl:0:0").mkdir()  # a core subdomain: never counted
    with EnergyMeter(torch.device("cpu"), rapl_root=tmp_path) as meter:
        (tmp_path / "intel-rapl:0" / "energy_uj").write_text("100")  # wrapped: 900 -> 1000 -> 100 = 200 uJ
        (tmp_path / "intel-rapl:1" / "energy_uj").write_text("350")  # 300 uJ
    assert meter.reading is not None and meter.reading.source == "rapl"
    assert meter.reading.joules == pytest.approx(500e-6) and "package-0, package-1" in meter.reading.scope
    with EnergyMeter(torch.device("cpu"), rapl_root=tmp_path / "absent") as meter:
        pass
    assert meter.reading is None
