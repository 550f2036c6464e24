"""Peak-memory trackers around the measured region (GPU allocator peaks; CPU peak RSS growth).

GPU: `reset_peak_memory_stats` before the region, then `max_memory_allocated` (tensors alive at the worst
moment: weights + activations + KV cache) and `max_memory_reserved` (what the caching allocator held from
the driver, the number that decides an OOM). `memory_allocated` at the start is kept as the baseline: with
only the measured model on the device (workers/runner.py parks the rest), it is that model's weights and
buffers, so peak_allocated - baseline is what the generation itself needed. Each run starts from
`free_device_memory` (collect, empty the cache, reset the peaks), so neither earlier runs nor their quality
phase leave blocks behind in `max_memory_reserved`; the tracker's own reset after the warm-ups then keeps
them out of the peaks (their blocks stay cached, so the measured repetitions allocate as a warm run would).

CUDA graphs hide memory from those peaks: a replay allocates nothing, so the intermediates it writes in its
graph's private pool (~5 GB for LLaDA's forward at B = 64, L = 768) never count as allocated, and
peak - baseline reads near zero. At the end of the region the tracker therefore reads the allocator's segments
(`torch.cuda.memory_snapshot`) and sums those owned by a private pool (a pool id other than (0, 0): the graph
variants' pools and reduce-overhead's cudagraph trees): `graph_pool_bytes` reserved, of which
`graph_pool_allocated_bytes` are live tensors (static outputs, already allocated). `Memory.peak_in_use_bytes`
adds the rest, the replays' working space, to the allocated peak. `device_memory` is the one seam to the
device: the CPU tests fake it.

CPU: there is no allocator to ask, so the tracker measures the process's resident set. It reports
`peak_rss_delta_bytes` = (highest RSS during the region) - (RSS when the region started): the memory the
generation added (activations, KV cache, allocator caching, thread stacks), not counting the weights that
were resident before. Memory freed earlier but still held by malloc is first returned to the OS
(`malloc_trim`), so the region's own needs show as growth rather than hiding in reused free lists. On
Linux the kernel's own high-water mark is reset at the start by writing "5" to
/proc/self/clear_refs and read back from VmHWM at the end, which misses no short spike. Where that is not
allowed a sampling thread polls /proc/self/statm every millisecond (can miss spikes shorter than that);
elsewhere `ru_maxrss` growth is used, which is zero unless the region beat the process's lifetime peak.
That growth is what malloc kept or returned as much as what the generation needed (identical shapes differ by
tens of MiB from run to run), so on CPU the model's memory is measured a second way, outside the timed region:
`tensor_peak_bytes` runs one more generation under torch's profiler, whose allocator reports every tensor
allocation and free, and takes the highest running total above what was alive before it. The same shapes
allocate the same bytes, so it repeats.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import re
import resource
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import torch
from torch.profiler import ProfilerActivity, profile

from specs.results import Memory

_PROC_STATUS = Path("/proc/self/status")
_PROC_CLEAR_REFS = Path("/proc/self/clear_refs")
_PROC_STATM = Path("/proc/self/statm")
_RESET_PEAK_RSS = "5"  # proc(5): "5" resets the peak resident set size ("high water mark")
_SAMPLE_PERIOD_S = 0.001
_KIB = 1024


def _status_kib(field: str) -> int | None:
    try:
        text = _PROC_STATUS.read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", text, re.MULTILINE)
    return int(match.group(1)) * _KIB if match else None


def current_rss_bytes() -> int | None:
    """Resident set size now (Linux), else None."""
    try:
        pages = int(_PROC_STATM.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _maxrss_bytes() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if sys.platform == "darwin" else usage * _KIB  # bytes on macOS, KiB on Linux


class _RssSampler(threading.Thread):
    """Fallback: poll the RSS on a daemon thread and keep the maximum."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.peak = current_rss_bytes() or 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(_SAMPLE_PERIOD_S):
            self.peak = max(self.peak, current_rss_bytes() or 0)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return max(self.peak, current_rss_bytes() or 0)


class CpuPeakRss:
    """Peak RSS growth of this process over a region (see the module docstring for the three methods)."""

    def __init__(self) -> None:
        self.method: str = ""
        self.delta_bytes: int | None = None
        self._start = 0
        self._sampler: _RssSampler | None = None
        self._maxrss_start = 0

    def __enter__(self) -> CpuPeakRss:
        gc.collect()
        _release_free_heap()
        start = current_rss_bytes()
        if start is not None and _try_reset_peak_rss():
            self.method, self._start = "vmhwm", start
        elif start is not None:
            self.method, self._start = "sampling", start
            self._sampler = _RssSampler()
            self._sampler.start()
        else:
            self.method, self._maxrss_start = "ru_maxrss", _maxrss_bytes()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.method == "vmhwm":
            peak = _status_kib("VmHWM")
            self.delta_bytes = max(0, peak - self._start) if peak is not None else None
        elif self.method == "sampling" and self._sampler is not None:
            self.delta_bytes = max(0, self._sampler.stop() - self._start)
        else:
            self.delta_bytes = max(0, _maxrss_bytes() - self._maxrss_start)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _release_free_heap() -> None:
    """Give memory that was freed but kept by malloc back to the OS (glibc `malloc_trim`).

    Without it the warm-ups' activations stay resident in malloc's free lists, the measured region reuses
    them, and the RSS never grows: the delta would read zero however much the generation needs.
    """
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def _try_reset_peak_rss() -> bool:
    try:
        _PROC_CLEAR_REFS.write_text(_RESET_PEAK_RSS)
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


_MEMORY_EVENT = "[memory]"  # the profiler's name for an allocator report (bytes: + allocated, - freed)


def tensor_peak_bytes(run: Callable[[], object]) -> int | None:
    """The most bytes of CPU tensors alive at once while `run` ran, above what was alive when it started, from the
    allocator's own reports under torch's profiler (profile_memory). Call it outside any timed region: the
    profiler slows every operator. None where this torch gives the profiler's events no byte counts."""
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # its start and stop each print a line to fd 2, which a sweep would show per run
        prof.start()
    try:
        run()
    finally:
        with _quiet_stderr():
            prof.stop()
    try:
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == _MEMORY_EVENT]
        events.sort(key=lambda e: e.start_ns())
        changes = [int(e.nbytes()) for e in events]
    except AttributeError:  # a torch whose profiler results lack these accessors
        return None
    alive = peak = 0
    for change in changes:
        alive += change
        peak = max(peak, alive)
    return peak


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the duration (the C++ side writes to it directly, past sys.stderr)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


DEFAULT_POOL = (0, 0)  # the caching allocator's own pool; every other id is a private (CUDA graph) pool


def graph_pool_memory(device: torch.device) -> tuple[int, int]:
    """(reserved, allocated) bytes of the private memory pools on `device`: CUDA graphs' working set."""
    reserved = allocated = 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device", index) != index or tuple(segment.get("segment_pool_id", DEFAULT_POOL)) == DEFAULT_POOL:
            continue
        reserved += int(segment["total_size"])
        allocated += int(segment["allocated_size"])
    return reserved, allocated


class MemoryTracker:
    """Context manager around the measured region; `result()` is the artifact's Memory record."""

    def __init__(self, device: torch.device, weights: int) -> None:
        self.device = device
        self.weights = weights
        self.baseline: int | None = None
        self._cpu: CpuPeakRss | None = None
        self._memory: Memory | None = None

    def __enter__(self) -> MemoryTracker:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.baseline = torch.cuda.memory_allocated(self.device)
        else:
            self._cpu = CpuPeakRss().__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.device.type == "cuda":
            if exc_type is None:
                torch.cuda.synchronize(self.device)
            pool_reserved, pool_allocated = graph_pool_memory(self.device)
            self._memory = Memory(
                device="cuda",
                weights_bytes=self.weights,
                peak_allocated_bytes=torch.cuda.max_memory_allocated(self.device),
                peak_reserved_bytes=torch.cuda.max_memory_reserved(self.device),
                baseline_allocated_bytes=self.baseline,
                graph_pool_bytes=pool_reserved,
                graph_pool_allocated_bytes=pool_allocated,
            )
        else:
            assert self._cpu is not None
            self._cpu.__exit__(exc_type, exc, tb)
            self._memory = Memory(device="cpu", weights_bytes=self.weights, peak_rss_delta_bytes=self._cpu.delta_bytes)

    def result(self) -> Memory:
        if self._memory is None:
            raise RuntimeError("memory read before the tracked region finished")
        return self._memory


def memory_at_failure(device: torch.device, weights: int) -> Memory:
    """What the allocator held when an OOM struck; read before anything is freed."""
    if device.type != "cuda":
        return Memory(device="cpu", weights_bytes=weights, peak_rss_delta_bytes=None)
    return Memory(
        device="cuda",
        weights_bytes=weights,
        peak_allocated_bytes=torch.cuda.max_memory_allocated(device),
        peak_reserved_bytes=torch.cuda.max_memory_reserved(device),
        at_failure_allocated_bytes=torch.cuda.memory_allocated(device),
    )


def free_device_memory(device: torch.device) -> None:
    """Drop unreachable tensors and give cached blocks back, so the next run starts from the weights alone."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
