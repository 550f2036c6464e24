"""Two contenders timed side by side in one process: the benches' shared protocol.

Each round runs every contender once, the order reversed every other round, so that drift in the machine's
speed (a warm cache, a clock that boosts, a neighbour's burst of load) hits both alike; the ratio is the
median over rounds of the two timed back to back, so one spoiled round cannot decide it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class BenchShape:
    """The generation a bench times: batch, lengths, LLaDA's schedule, and the seed of its random prompts."""

    batch: int = 4
    prompt_length: int = 32  # the longest prompt where a bench pads the others
    gen_length: int = 64  # LLaDA's generation length and the AR loop's new tokens
    block_length: int = 16
    steps: int = 32
    seed: int = 0


@dataclass(frozen=True)
class Comparison:
    """Raw samples of two contenders timed side by side, and whether their tokens agreed."""

    name: str
    ours: list[float]
    baseline: list[float]
    tokens_equal: bool
    goal: float | None = None  # the ratio ours / baseline must not exceed it; None: reported, not judged

    @property
    def ratio(self) -> float:
        """Median over rounds of ours / baseline (the two timed back to back in each round)."""
        return statistics.median(o / b for o, b in zip(self.ours, self.baseline, strict=True))

    @property
    def ratio_of_medians(self) -> float:
        return statistics.median(self.ours) / statistics.median(self.baseline)

    @property
    def met(self) -> bool:
        return self.tokens_equal and (self.goal is None or self.ratio <= self.goal)


def interleaved_rounds(
    contenders: Mapping[str, Callable[[], float]], *, warmup: int, rounds: int
) -> dict[str, list[float]]:
    """Seconds per contender and round; each callable returns the seconds it measured. Warm-up rounds run
    (in the same alternating order) and are dropped."""
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(warmup + rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            seconds = contenders[name]()
            if round_ >= warmup:
                samples[name].append(seconds)
    return samples
