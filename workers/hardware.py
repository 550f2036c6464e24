"""Which device a run uses, how many CPU threads it may take, and whether the hardware meets the spec.

A measurement is only valid on the hardware the spec names (study 4.2.1: never mix A100 and A6000), so the
check runs before any model is loaded and a mismatch becomes `status: refused` with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from specs.schema import Controls, HardwareRequirement
from workers.errors import SpecMismatchError

# Set by the orchestrator when several actors share the CPU cores (e.g. two actors on 2 cores: 1 each),
# so that their thread pools do not oversubscribe the machine.
THREADS_ENV = "LLADA_BENCH_THREADS"


def resolve_device(controls: Controls) -> torch.device:
    """`auto` means the first visible GPU when there is one; asking for `cuda` without one is an error."""
    if controls.device == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if controls.device == "cuda":
        raise SpecMismatchError(
            "controls.device: 'cuda' but no CUDA device is visible on this machine; use 'auto' or 'cpu'"
        )
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    """'cpu', or the GPU's marketing name as CUDA reports it (e.g. 'NVIDIA A100-SXM4-80GB')."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def configure_threads() -> int:
    """Apply LLADA_BENCH_THREADS when set (else keep torch's default); return the thread count in use."""
    value = os.environ.get(THREADS_ENV)
    if value:
        try:
            threads = int(value)
        except ValueError:
            raise SpecMismatchError(f"{THREADS_ENV}={value!r} is not a positive integer") from None
        if threads < 1:
            raise SpecMismatchError(f"{THREADS_ENV}={value!r} is not a positive integer")
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    return torch.get_num_threads()


@dataclass(frozen=True)
class HardwareVerdict:
    """`refusal` stops the run; `mismatch` is what differed (kept even when the spec allows it)."""

    mismatch: str | None
    refusal: str | None


def check_hardware(
    requirement: HardwareRequirement, name: str, other_gpu_processes: bool | None
) -> HardwareVerdict:
    """Compare the device (its name, whether it is shared) with the spec's requirement."""
    problems: list[str] = []
    wanted = requirement.gpu.strip()
    if wanted.lower() != "any":
        if name == "cpu":
            problems.append(f"controls.hardware.gpu requires {wanted!r} but this worker has no GPU")
        elif wanted.lower() not in name.lower():
            problems.append(f"controls.hardware.gpu requires {wanted!r} but the GPU is {name!r}")
    if requirement.exclusive and name != "cpu":
        if other_gpu_processes is None:
            problems.append("controls.hardware.exclusive requires an unshared GPU but NVML is unavailable to check")
        elif other_gpu_processes:
            problems.append("controls.hardware.exclusive requires an unshared GPU but other processes are using it")
    if not problems:
        return HardwareVerdict(mismatch=None, refusal=None)
    mismatch = "; ".join(problems)
    if requirement.allow_mismatch:
        return HardwareVerdict(mismatch=mismatch, refusal=None)
    return HardwareVerdict(mismatch=mismatch, refusal=f"{mismatch} (set controls.hardware.allow_mismatch to measure anyway)")


def device_unusable(device: torch.device) -> str | None:
    """None when a tiny kernel still runs and synchronises on `device`; else why not. A sticky CUDA error
    (illegal memory access, device-side assert, launch failure) makes every later call fail like this."""
    try:
        torch.cuda.synchronize(device)
        probe = torch.ones(1, device=device).add_(1)
        torch.cuda.synchronize(device)
        if float(probe.item()) != 2.0:
            return f"a probe kernel on {device} returned a wrong value"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None
