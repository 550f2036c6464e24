"""Timers: context managers around calls that keep raw samples (CUDA events on GPU, perf_counter_ns on CPU).

Model and sampler code never time themselves (STYLE 4): the scenario wraps `timer.measure()` around each
call it wants timed and reads every interval once the measured region is over. On GPU reading is deferred
on purpose: `Interval.seconds()` synchronises, so resolving all intervals after the region keeps host
syncs out of the hot loop (gpt-fast does the same), while the events themselves are recorded in stream
order and so time the GPU work, not the Python that queued it (study section 3.2).
"""

from __future__ import annotations

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


class Timer(Protocol):
    """What the scenario needs from a timer: a name for the artifact and a context manager per region."""

    kind: TimerKind

    def measure(self) -> AbstractContextManager[Interval]: ...

    def synchronize(self) -> None: ...


class _HostInterval:
    """A perf_counter_ns interval; complete as soon as its region exits."""

    __slots__ = ("end_ns", "start_ns")

    def __init__(self) -> None:
        self.start_ns = 0
        self.end_ns: int | None = None

    def seconds(self) -> float:
        if self.end_ns is None:
            raise RuntimeError("interval read before its region finished")
        return (self.end_ns - self.start_ns) / NS_PER_S


class PerfCounterTimer:
    """CPU timer: the host clock is the device clock, so nothing needs synchronising."""

    kind: TimerKind = "perf_counter"

    @contextmanager
    def measure(self) -> Iterator[_HostInterval]:
        interval = _HostInterval()
        interval.start_ns = time.perf_counter_ns()
        try:
            yield interval
        finally:
            interval.end_ns = time.perf_counter_ns()

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
