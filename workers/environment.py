"""Capture where a number came from: software versions, device, git commit, image digest, NVML readings.

Every artifact embeds one (STYLE 6). Versions and the commit are read once per process; NVML readings
(clocks, temperature, power, other processes on the GPU) are taken fresh for every run because they are
what changes between runs.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from specs.results import Environment
from workers.hardware import device_name

GIT_COMMIT_ENV = "LLADA_BENCH_GIT_COMMIT"  # set by the image, which has no .git
IMAGE_ENV = "LLADA_BENCH_IMAGE"  # the container image digest, set by the image itself
PACKAGE_DIR = Path(__file__).resolve().parent
_GIT_TIMEOUT_S = 5


def capture_environment(
    device: torch.device, attention_kernel: str | None = None, dtype: str | None = None
) -> Environment:
    """The environment of a run on `device`; the kernel and dtype are the ones the model actually ran."""
    nvml = nvml_snapshot(device) if device.type == "cuda" else NvmlSnapshot()
    return Environment(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=platform.python_version(),
        torch=torch.__version__,
        transformers=_version("transformers"),
        flash_attn=_version("flash-attn") or _version("flash_attn"),
        cuda=torch.version.cuda,
        device=device_name(device),
        gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
        driver=nvml.driver,
        attention_kernel=attention_kernel,
        dtype=dtype,
        git_commit=git_commit(),
        image_digest=os.environ.get(IMAGE_ENV) or None,
        nvml=nvml.metrics,
        other_gpu_processes=nvml.other_processes,
        cpu_threads=torch.get_num_threads(),
    )


@functools.cache
def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def git_commit() -> str | None:
    """The commit from the environment (images have no .git), else `git rev-parse HEAD` of the package."""
    from_env = os.environ.get(GIT_COMMIT_ENV)
    if from_env:
        return from_env
    try:
        done = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


# ---------------------------------------------------------------- NVML


class NvmlSnapshot:
    """What NVML said about one GPU; every field None where NVML is absent or the query is unsupported."""

    def __init__(
        self,
        metrics: dict[str, float | int | str] | None = None,
        other_processes: bool | None = None,
        driver: str | None = None,
    ) -> None:
        self.metrics = metrics
        self.other_processes = other_processes
        self.driver = driver


def import_pynvml() -> Any | None:
    try:
        import pynvml  # provided by the nvidia-ml-py distribution
    except ImportError:
        return None
    return pynvml


def nvml_snapshot(device: torch.device) -> NvmlSnapshot:
    """Clocks, temperature, power and the other processes on `device`'s GPU; empty when NVML is missing."""
    nvml = import_pynvml()
    if nvml is None:
        return NvmlSnapshot()
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, driver not loaded, ...
        return NvmlSnapshot()
    _ensure_cuda_context(device)
    try:
        handle = nvml_handle(nvml, device)
        metrics: dict[str, float | int | str] = {}
        readings: dict[str, Callable[[], float | int | str]] = {
            "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "memory_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # NVML reports mW
            "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
            "performance_state": lambda: int(nvml.nvmlDeviceGetPerformanceState(handle)),
            "memory_total_bytes": lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            "memory_used_bytes": lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).used),
        }
        for key, read in readings.items():
            try:
                metrics[key] = read()
            except Exception:  # NVMLError_NotSupported on some boards; keep the rest
                continue
        return NvmlSnapshot(metrics=metrics, other_processes=_others_on_gpu(nvml, handle), driver=_driver(nvml))
    except Exception:
        return NvmlSnapshot()
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _driver(nvml: Any) -> str | None:
    try:
        version = nvml.nvmlSystemGetDriverVersion()
    except Exception:
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


def nvml_handle(nvml: Any, device: torch.device) -> Any:
    """NVML numbers GPUs physically; CUDA numbers the visible ones. Match by PCI bus id when torch gives it."""
    props = torch.cuda.get_device_properties(device)
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        bus_id = f"{getattr(props, 'pci_domain_id', 0):08X}:{bus:02X}:{getattr(props, 'pci_device_id', 0):02X}.0"
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId_v2(bus_id)
        except Exception:
            pass
    index = device.index if device.index is not None else torch.cuda.current_device()
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if index < len(visible):
        if visible[index].startswith(("GPU-", "MIG-")):
            return nvml.nvmlDeviceGetHandleByUUID(visible[index])
        if visible[index].isdigit():
            index = int(visible[index])
    return nvml.nvmlDeviceGetHandleByIndex(index)


def _ensure_cuda_context(device: torch.device) -> None:
    """Make sure this process holds a CUDA context on `device`, so NVML lists it among the GPU's processes."""
    torch.empty(1, device=device)


def _others_on_gpu(nvml: Any, handle: Any) -> bool | None:
    """Whether processes other than this one hold the GPU (this one holds a context: `_ensure_cuda_context`).

    Inside a container NVML reports host PIDs, so this process may not find its own PID in the list; then
    one listed process is this one and any further one is another.
    """
    try:
        processes = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except Exception:
        return None
    try:
        processes += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(handle))
    except Exception:
        pass
    pids = {p.pid for p in processes}
    me = os.getpid()
    if me in pids:
        return len(pids - {me}) > 0
    return len(pids) > 1
