"""The benches' shared protocol: contenders alternate who goes first, warm-up rounds are dropped, and the
ratio is the median of per-round ratios. Also: the forward bench finds the committed miniature pair."""

from __future__ import annotations

import pytest

from workers.measure.bench_forward import MINIATURE
from workers.measure.side_by_side import Comparison, interleaved_rounds


def test_rounds_alternate_the_order_and_drop_the_warm_up() -> None:
    calls: list[str] = []
    ticks = iter(range(100))

    def contender(name: str):
        def run() -> float:
            calls.append(name)
            return float(next(ticks))

        return run

    samples = interleaved_rounds({"a": contender("a"), "b": contender("b")}, warmup=1, rounds=3)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    # Round 0 (ticks 0, 1) is the warm-up; then b, a / a, b / b, a.
    assert samples == {"a": [3.0, 4.0, 7.0], "b": [2.0, 5.0, 6.0]}


def test_the_ratio_is_the_median_of_paired_rounds_and_the_goal_is_optional() -> None:
    # A baseline round that ran fast (0.5 s) is one ratio of three: the median of the paired ratios keeps 0.5.
    c = Comparison("x", ours=[1.0, 1.0, 1.0], baseline=[2.0, 2.0, 0.5], tokens_equal=True, goal=0.6)
    assert c.ratio == pytest.approx(0.5) and c.ratio_of_medians == pytest.approx(0.5)
    assert c.met
    assert not Comparison("x", [1.0], [1.0], tokens_equal=True, goal=0.9).met
    assert not Comparison("x", [1.0], [2.0], tokens_equal=False, goal=0.9).met
    assert Comparison("x", [3.0], [1.0], tokens_equal=True).met  # no goal: only the tokens are judged


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_the_forward_bench_reads_the_committed_miniature_models(arch: str) -> None:
    assert (MINIATURE / arch / "config.json").is_file()
