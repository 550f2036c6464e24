"""The models a worker keeps loaded between runs, within a memory budget, least recently used out first.

The plan interleaves the compared models at every grid point, so a worker that held one model at a time would
reload at nearly every run. It keeps every model it loads resident instead (measured models and the perplexity
evaluator alike), and evicts the least recently used only when the resident weights would exceed the budget,
never a model the current run needs; a model loaded again after an eviction is a reload, and the worker says so.

Where the weights wait: on a GPU, a run's model is alone on the device while it is measured (the others wait in
host memory and come back for their own runs, a copy rather than a reload), so every peak, OOM wall and
activation estimate describes the measured model alone, as it did when a worker held one model. So on both
devices the resident weights live in host memory, and the budget is a share of the host's: half of what is
available plus what the resident models already take (`HOST_SHARE`), unless a caller gives one.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Collection
from pathlib import Path

import torch

from specs.schema import Controls, ModelSpec
from workers.measure.memory import free_device_memory
from workers.models.loading import LoadedModel

ModelKey = tuple[ModelSpec, str, str, str]  # spec, dtype, attention, device
HOST = torch.device("cpu")  # where models that are not being measured wait
HOST_SHARE = 0.5  # of the host memory available to resident models: the rest is the runs' own
_MEMINFO = Path("/proc/meminfo")


def model_key(spec: ModelSpec, controls: Controls, device: torch.device) -> ModelKey:
    return (spec, controls.dtype, controls.attention, str(device))


def available_host_bytes() -> int:
    """Memory the host can still give (Linux MemAvailable: free plus reclaimable caches), else its free pages."""
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


class ResidentModels:
    """Loaded models by key, least recently used first; `budget_bytes` bounds their weights (None: the host's)."""

    def __init__(self, budget_bytes: int | None = None) -> None:
        self._models: OrderedDict[ModelKey, LoadedModel] = OrderedDict()
        self._budget_bytes = budget_bytes
        self._evicted: set[ModelKey] = set()

    def __contains__(self, key: ModelKey) -> bool:
        return key in self._models

    @property
    def weights_bytes(self) -> int:
        return sum(m.weights_bytes for m in self._models.values())

    def budget_bytes(self) -> int:
        if self._budget_bytes is not None:
            return self._budget_bytes
        return int(HOST_SHARE * (available_host_bytes() + self.weights_bytes))

    def was_evicted(self, key: ModelKey) -> bool:
        """Whether this worker loaded the model before and evicted it: loading it now is a reload."""
        return key in self._evicted

    def use(self, key: ModelKey, *, alone: bool) -> LoadedModel | None:
        """The resident model, marked as just used and on its device; None when it is not resident. `alone`: every
        other resident model leaves a GPU first (the model is about to be measured, or loaded)."""
        if alone:
            self.park_except(key)
        loaded = self._models.get(key)
        if loaded is None:
            return None
        self._models.move_to_end(key)
        loaded.model.to(loaded.device)  # back from the host, where it may have waited
        return loaded

    def add(self, key: ModelKey, loaded: LoadedModel, *, keep: Collection[ModelKey] = ()) -> list[str]:
        """Hold a freshly loaded model; evict the least recently used others (never those in `keep`) while the
        resident weights exceed the budget. Returns a line for each eviction."""
        self._models[key] = loaded
        self._evicted.discard(key)
        notes = []
        budget = self.budget_bytes()
        for other in [k for k in self._models if k != key and k not in keep]:
            if self.weights_bytes <= budget:
                break
            notes.append(
                f"evicted {other[0].name}: the resident models' {self.weights_bytes / 2**20:.3g} MiB of weights "
                f"exceed the worker's budget of {budget / 2**20:.3g} MiB"
            )
            self.drop(other)
            self._evicted.add(other)
        return notes

    def drop(self, key: ModelKey) -> None:
        loaded = self._models.pop(key, None)
        if loaded is not None:
            device = loaded.device
            del loaded
            free_device_memory(device)

    def park_except(self, key: ModelKey | None) -> None:
        """On a GPU, move every resident model but `key` to the host, so that one is alone on the device."""
        devices = set()
        for other, loaded in self._models.items():
            if other != key and loaded.device.type == "cuda":
                loaded.model.to(HOST)
                devices.add(loaded.device)
        for device in devices:
            free_device_memory(device)
