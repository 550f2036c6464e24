"""Timers: context managers around calls that keep raw samples (CUDA events on GPU, perf_counter_ns on CPU).

On CPU each interval also reads the process's CPU time (`process_time_ns`, every thread's user and system time),
so a repetition's wall time can be set against the time the process actually had the cores: where the wall far
exceeds it, the process waited for a core (descheduled, or sharing the cores with other work) and the sample
measures the machine's load as much as the model (report/table/sessions.py flags such sessions). On GPU the host's CPU
time says nothing of the device's, so the CUDA timer reads none. `load_average` reads the machine's load around a
run's repetitions.

Model and sampler code never time themselves (STYLE 4): the scenario wraps `timer.measure()` around each
call it wants timed and reads every interval once the measured region is over. On GPU reading is deferred
on purpose: `Interval.seconds()` synchronises, so resolving all intervals after the region keeps host
syncs out of the hot loop (gpt-fast does the same), while the events themselves are recorded in stream
order and so time the GPU work, not the Python that queued it (study section 3.2).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Literal, Protocol

import torch

TimerKind = Literal["cuda_event", "perf_counter"]

NS_PER_S = 1e9
MS_PER_S = 1e3


class Interval(Protocol):
    """One timed region; `seconds()` may block until the device has finished it."""

    def seconds(self) -> float: ...

    def cpu_seconds(self) -> float | None: ...


class Timer(Protocol):
    """What the scenario needs from a timer: a name for the artifact and a context manager per region."""

    kind: TimerKind

    def measure(self) -> AbstractContextManager[Interval]: ...

    def synchronize(self) -> None: ...


class _HostInterval:
    """A perf_counter_ns interval with the process CPU time spent in it; complete as soon as its region exits."""

    __slots__ = ("cpu_end_ns", "cpu_start_ns", "end_ns", "start_ns")

    def __init__(self) -> None:
        self.start_ns = self.cpu_start_ns = 0
        self.end_ns: int | None = None
        self.cpu_end_ns: int | None = None

    def seconds(self) -> float:
        if self.end_ns is None:
            raise RuntimeError("interval read before its region finished")
        return (self.end_ns - self.start_ns) / NS_PER_S

    def cpu_seconds(self) -> float:
        """CPU time of every thread of the process over the region (user and system)."""
        if self.cpu_end_ns is None:
            raise RuntimeError("interval read before its region finished")
        return (self.cpu_end_ns - self.cpu_start_ns) / NS_PER_S


class PerfCounterTimer:
    """CPU timer: the host clock is the device clock, so nothing needs synchronising."""

    kind: TimerKind = "perf_counter"

    @contextmanager
    def measure(self) -> Iterator[_HostInterval]:
        interval = _HostInterval()
        interval.cpu_start_ns = time.process_time_ns()
        interval.start_ns = time.perf_counter_ns()
        try:
            yield interval
        finally:
            interval.end_ns = time.perf_counter_ns()
            interval.cpu_end_ns = time.process_time_ns()

    def synchronize(self) -> None:
        return None


class _EventInterval:
    """A pair of CUDA events; reading it waits for the end event (a synchronize, then elapsed_time)."""

    __slots__ = ("_seconds", "end", "start")

    def __init__(self, start: torch.cuda.Event, end: torch.cuda.Event) -> None:
        self.start = start
        self.end = end
        self._seconds: float | None = None

    def seconds(self) -> float:
        if self._seconds is None:
            # elapsed_time is only defined once both events have completed on the device.
            self.end.synchronize()
            self._seconds = self.start.elapsed_time(self.end) / MS_PER_S
        return self._seconds

    def cpu_seconds(self) -> None:
        """None: the host's CPU time is not the device's (the events time the GPU's work)."""
        return None


class CudaEventTimer:
    """GPU timer: events recorded on the current stream around the region (study section 3.2)."""

    kind: TimerKind = "cuda_event"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    @contextmanager
    def measure(self) -> Iterator[_EventInterval]:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        interval = _EventInterval(start, end)
        start.record()
        try:
            yield interval
        finally:
            end.record()

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)


def timer_for(device: torch.device) -> PerfCounterTimer | CudaEventTimer:
    """The timer that measures work on `device` correctly."""
    if device.type == "cuda":
        return CudaEventTimer(device)
    return PerfCounterTimer()


def load_average() -> tuple[float, float, float] | None:
    """The machine's 1-, 5- and 15-minute load averages (runnable tasks; None where the OS keeps none)."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return None
    return one, five, fifteen


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS says, else every CPU)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
