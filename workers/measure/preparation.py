"""Preparation time: what a run spends making its step forwards replayable, and the guard that none of it is timed.

A compiled or captured variant prepares each input signature of its step forward once: LLaMA's `compile`
decode traces and compiles (inductor), then on CUDA runs the compiled step once in cudagraph trees' warm-up
mode, once while recording its graph, and once replayed; LLaDA's `graph` forwards run their eager side-stream
forwards, capture, and replay once (a CPU: one eager forward, then inductor's compilation). Preparation is
all of that, for both models alike: the wall time (device synchronised) from a signature's first call until
it has replayed once, summed over signatures. It is recorded as the run's `preparation_s` and happens only
in the warm-ups.

A timed repetition must never prepare anything: a capture or compilation inside a CUDA-event interval would
be published as a step time. While `frozen()` (the scenario's repetitions), a prepared forward's
`preparing()` raises `PreparationInTimedRegion` before doing anything, naming what it would have prepared;
and any torch.compile or cudagraph-tree recording that the forwards' own bookkeeping does not see (a dynamo
recompilation on a guard failure) is caught through dynamo's compilation callbacks and fails the run when the
frozen region ends. Either way the run's status is an error, never a silent number.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


class PreparationInTimedRegion(RuntimeError):
    """A compilation or graph capture was about to happen (or happened) inside a timed repetition."""


@dataclass
class Preparation:
    """One run's preparation ledger: seconds spent, what was prepared, and whether preparing is allowed now."""

    seconds: float = 0.0
    prepared: list[str] = field(default_factory=list)  # each prepared signature, in words
    _frozen: bool = False
    _stray: list[str] = field(default_factory=list)  # compilations seen by dynamo's callbacks while frozen

    @property
    def is_frozen(self) -> bool:
        return self._frozen

    @contextmanager
    def preparing(self, what: str, device: torch.device) -> Iterator[None]:
        """Time the preparation of `what` (a signature, in words): its wall time up to a device sync is added.
        Raises `PreparationInTimedRegion` without running the body while frozen."""
        if self._frozen:
            raise PreparationInTimedRegion(
                f"{what} would be compiled or captured inside a timed repetition; the warm-ups must prepare every "
                "shape the repetitions use (workers/measure/scenario.py), so this run's step times are refused"
            )
        start = time.perf_counter()
        yield
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.seconds += time.perf_counter() - start
        self.prepared.append(what)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The timed region: any preparation in it is an error of the run (see the module docstring)."""
        handler = _callback_handler()
        if handler is not None:
            handler.register_start_callback(self._seen)
        self._frozen, self._stray = True, []
        try:
            yield
        finally:
            self._frozen = False
            if handler is not None:
                handler.remove_start_callback(self._seen)
        if self._stray:
            raise PreparationInTimedRegion(
                f"torch compiled or recorded inside a timed repetition ({', '.join(self._stray)}); a guard that "
                "failed between warm-up and repetition recompiles: the step times include it and are refused"
            )

    def _seen(self, *args: object) -> None:
        """dynamo's start-of-compilation callback (torch >= 2.7 passes the trigger and compile id; older, none)."""
        if not self._frozen:
            return
        trigger = getattr(args[0], "callback_trigger", None) if args else None
        compile_id = getattr(args[0], "compile_id", None) if args else None
        name = getattr(trigger, "name", "dynamo compilation").lower()
        self._stray.append(f"{name} {compile_id}" if compile_id is not None else name)


def _callback_handler() -> object | None:
    """dynamo's compilation callback registry, where this torch has one."""
    import torch._dynamo  # noqa: F401  (torch does not import dynamo until something compiles)

    handler = getattr(torch._dynamo, "callback_handler", None)
    return handler if hasattr(handler, "register_start_callback") else None
