"""Energy of the measured region: NVML's total-energy counter on GPU, RAPL on CPU where the host exposes it.

Both are cumulative counters read once before and once after the region, so reading adds nothing to the
timed work (NVML is a host call; it does not synchronise the device, and the tracker is entered and
exited only after the scenario has synchronised). Both count the whole device: NVML the GPU board, RAPL
every CPU package (all processes on those sockets), which is why `exclusive: true` matters for energy as
much as for time. NVML refreshes the counter every few tens of milliseconds on current boards, so a
region much shorter than that reads coarsely; `seconds` is kept beside `joules` so a reader can judge.
Where neither counter is available the record is None, never a guess.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from workers.environment import import_pynvml, nvml_handle

MJ_PER_J = 1e3  # NVML reports millijoules
UJ_PER_J = 1e6  # RAPL reports microjoules
RAPL_ROOT = Path("/sys/class/powercap")


@dataclass(frozen=True)
class EnergyReading:
    """Joules spent by the device over the region, and by whom they were counted."""

    source: str  # "nvml" | "rapl"
    scope: str
    joules: float
    seconds: float


class _Counter:
    """A cumulative energy counter: `read()` in joules since an arbitrary origin, or None when unreadable."""

    source = ""
    scope = ""

    def read(self) -> float | None:
        raise NotImplementedError

    def close(self) -> None:
        return None


class NvmlEnergyCounter(_Counter):
    """nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver loaded (Volta and newer)."""

    source = "nvml"

    def __init__(self, nvml: Any, handle: Any, index: int) -> None:
        self._nvml = nvml
        self._handle = handle
        self.scope = f"GPU {index} (the whole board)"

    def read(self) -> float | None:
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / MJ_PER_J
        except Exception:  # NVMLError_NotSupported on pre-Volta boards and some virtual GPUs
            return None

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass


class RaplEnergyCounter(_Counter):
    """Sum of the package domains' energy_uj (intel-rapl:N; AMD's packages appear under the same name),
    each unwrapped with its max_energy_range_uj."""

    source = "rapl"

    def __init__(self, domains: list[Path]) -> None:
        self._domains = domains
        self._last: list[int | None] = [None] * len(domains)
        self._total_uj = [0] * len(domains)
        names = ", ".join(_domain_name(d) for d in domains)
        self.scope = f"CPU {names} (whole packages, every process on them)"

    def read(self) -> float | None:
        for i, domain in enumerate(self._domains):
            try:
                now = int((domain / "energy_uj").read_text())
            except (OSError, ValueError):  # since 2020 most kernels make energy_uj readable by root only
                return None
            last = self._last[i]
            if last is not None:
                delta = now - last
                if delta < 0:  # the counter wrapped
                    delta += _max_range_uj(domain)
                self._total_uj[i] += delta
            self._last[i] = now
        return sum(self._total_uj) / UJ_PER_J


def _domain_name(domain: Path) -> str:
    try:
        return (domain / "name").read_text().strip()
    except OSError:
        return domain.name


def _max_range_uj(domain: Path) -> int:
    try:
        return int((domain / "max_energy_range_uj").read_text())
    except (OSError, ValueError):
        return 0


def rapl_package_domains(root: Path = RAPL_ROOT) -> list[Path]:
    """Top-level RAPL package domains (intel-rapl:0, intel-rapl:1, ...; not their core/dram subdomains)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1 and (p / "energy_uj").exists())


def energy_counter(device: torch.device, rapl_root: Path = RAPL_ROOT) -> _Counter | None:
    """The counter that covers `device`, or None where the machine exposes none."""
    if device.type == "cuda":
        nvml = import_pynvml()
        if nvml is None:
            return None
        try:
            nvml.nvmlInit()
        except Exception:
            return None
        try:
            handle = nvml_handle(nvml, device)
        except Exception:
            NvmlEnergyCounter(nvml, None, 0).close()
            return None
        index = device.index if device.index is not None else 0
        return NvmlEnergyCounter(nvml, handle, index)
    domains = rapl_package_domains(rapl_root)
    return RaplEnergyCounter(domains) if domains else None


class EnergyMeter:
    """Context manager around the measured region; `reading` is None when no counter could be read."""

    def __init__(self, device: torch.device, rapl_root: Path = RAPL_ROOT) -> None:
        self.device = device
        self.rapl_root = rapl_root
        self.reading: EnergyReading | None = None
        self._counter: _Counter | None = None
        self._start_j: float | None = None
        self._start_s = 0.0

    def __enter__(self) -> EnergyMeter:
        self._counter = energy_counter(self.device, self.rapl_root)
        if self._counter is not None:
            self._start_j = self._counter.read()
        self._start_s = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        seconds = time.perf_counter() - self._start_s
        counter = self._counter
        if counter is None:
            return
        try:
            end_j = counter.read() if exc_type is None else None
            if self._start_j is not None and end_j is not None and end_j >= self._start_j:
                self.reading = EnergyReading(counter.source, counter.scope, end_j - self._start_j, seconds)
        finally:
            counter.close()
