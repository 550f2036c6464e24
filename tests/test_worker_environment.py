"""Hardware requirement, device resolution, threads, and the environment record (NVML faked)."""

from __future__ import annotations

import types

import pytest
import torch

from specs.schema import Controls, HardwareRequirement
from workers import environment
from workers.environment import capture_environment, nvml_snapshot
from workers.errors import SpecMismatchError
from workers.hardware import THREADS_ENV, check_hardware, configure_threads, resolve_device


def test_any_gpu_accepts_every_device() -> None:
    assert check_hardware(HardwareRequirement(), "cpu", None).refusal is None
    assert check_hardware(HardwareRequirement(gpu="any"), "NVIDIA H100 80GB HBM3", True).refusal is None


def test_required_gpu_must_be_present_and_named() -> None:
    a100 = HardwareRequirement(gpu="A100")
    assert "no GPU" in check_hardware(a100, "cpu", None).refusal
    refused = check_hardware(a100, "NVIDIA RTX A6000", False).refusal
    assert "'A100'" in refused and "NVIDIA RTX A6000" in refused and "allow_mismatch" in refused
    assert check_hardware(a100, "NVIDIA A100-SXM4-80GB", False) == check_hardware(HardwareRequirement(), "cpu", None)
    assert check_hardware(HardwareRequirement(gpu="a100"), "NVIDIA A100-PCIE-40GB", None).refusal is None


def test_allowed_mismatch_is_kept_but_not_refused() -> None:
    verdict = check_hardware(HardwareRequirement(gpu="A100", allow_mismatch=True), "NVIDIA H100", False)
    assert verdict.refusal is None and "NVIDIA H100" in verdict.mismatch


def test_exclusive_gpu_refuses_shared_or_unverifiable() -> None:
    exclusive = HardwareRequirement(exclusive=True)
    assert "other processes" in check_hardware(exclusive, "NVIDIA A100", True).refusal
    assert "NVML" in check_hardware(exclusive, "NVIDIA A100", None).refusal
    assert check_hardware(exclusive, "NVIDIA A100", False).refusal is None


def test_device_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(Controls(device="auto")) == torch.device("cpu")
    assert resolve_device(Controls(device="cpu")) == torch.device("cpu")
    with pytest.raises(SpecMismatchError, match="no CUDA device"):
        resolve_device(Controls(device="cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert resolve_device(Controls(device="auto")) == torch.device("cuda", 0)


def test_threads_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv(THREADS_ENV, "1")
        assert configure_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv(THREADS_ENV, "zero")
        with pytest.raises(SpecMismatchError, match=THREADS_ENV):
            configure_threads()
    finally:
        torch.set_num_threads(before)


def test_cpu_environment_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(environment.GIT_COMMIT_ENV, "abc123")
    monkeypatch.setenv(environment.IMAGE_ENV, "sha256:feed")
    environment.git_commit.cache_clear()
    try:
        record = capture_environment(torch.device("cpu"), attention_kernel="sdpa", dtype="float32")
    finally:
        environment.git_commit.cache_clear()
    assert record.device == "cpu" and record.torch == torch.__version__ and record.transformers
    assert record.git_commit == "abc123" and record.image_digest == "sha256:feed"
    assert record.attention_kernel == "sdpa" and record.dtype == "float32"
    assert record.nvml is None and record.other_gpu_processes is None and record.cpu_threads >= 1


def _fake_nvml(processes: list[int]) -> types.SimpleNamespace:
    calls: list[str] = []

    class NVMLError(Exception):
        pass

    def unsupported(*_):
        raise NVMLError("Not Supported")

    return types.SimpleNamespace(
        calls=calls,
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByPciBusId_v2=lambda bus: ("handle", bus),
        nvmlDeviceGetHandleByIndex=lambda i: ("handle", i),
        nvmlDeviceGetClockInfo=lambda h, kind: 1410 if kind == 0 else 1593,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 1410,
        nvmlDeviceGetTemperature=lambda h, kind: 41,
        nvmlDeviceGetPowerUsage=lambda h: 65000,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 400000,
        nvmlDeviceGetPerformanceState=unsupported,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=80 * 2**30, used=2**30),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=p) for p in processes],
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [],
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",
    )  # fmt: skip


@pytest.fixture()
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    props = types.SimpleNamespace(pci_bus_id=7, pci_device_id=0, pci_domain_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)
    monkeypatch.setattr(environment, "_ensure_cuda_context", lambda device: None)


def test_nvml_readings_and_other_processes(monkeypatch: pytest.MonkeyPatch, fake_gpu: None) -> None:
    import os

    nvml = _fake_nvml([os.getpid()])
    monkeypatch.setattr(environment, "import_pynvml", lambda: nvml)
    snapshot = nvml_snapshot(torch.device("cuda", 0))
    assert snapshot.metrics["sm_clock_mhz"] == 1410 and snapshot.metrics["power_w"] == 65.0
    assert snapshot.metrics["temperature_c"] == 41 and "performance_state" not in snapshot.metrics
    assert snapshot.driver == "550.54.15" and snapshot.other_processes is False
    assert nvml.calls == ["init", "shutdown"]
    monkeypatch.setattr(environment, "import_pynvml", lambda: _fake_nvml([os.getpid(), 999_999]))
    assert nvml_snapshot(torch.device("cuda", 0)).other_processes is True
    # In a container NVML lists host PIDs: ours is not recognised, so one process is us, two are shared.
    # (The snapshot first makes sure this process holds a context, so it is always among them.)
    monkeypatch.setattr(environment, "import_pynvml", lambda: _fake_nvml([123]))
    assert nvml_snapshot(torch.device("cuda", 0)).other_processes is False
    monkeypatch.setattr(environment, "import_pynvml", lambda: _fake_nvml([123, 456]))
    assert nvml_snapshot(torch.device("cuda", 0)).other_processes is True


def test_missing_nvml_leaves_fields_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "import_pynvml", lambda: None)
    snapshot = nvml_snapshot(torch.device("cuda", 0))
    assert snapshot.metrics is None and snapshot.other_processes is None and snapshot.driver is None


def test_gpu_environment_record(monkeypatch: pytest.MonkeyPatch, fake_gpu: None) -> None:
    monkeypatch.setattr(environment, "import_pynvml", lambda: _fake_nvml([1]))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    record = capture_environment(torch.device("cuda", 0), attention_kernel="flash_attention_2", dtype="bfloat16")
    assert record.device == "NVIDIA A100-SXM4-80GB" and record.gpu_count == 1 and record.driver == "550.54.15"
    assert record.nvml["memory_clock_mhz"] == 1593 and record.other_gpu_processes is False
