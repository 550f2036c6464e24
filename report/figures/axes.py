"""Axis scales every figure shares: powers of two for the swept grids, plain-number log axes, an empty panel."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def power_of_two_axis(ax, axis: str, values: Sequence[float]) -> None:
    """Log base-2 scale with a tick at each swept value (the grids are powers of two)."""
    ticks = sorted({float(v) for v in values})
    if axis == "x":
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    else:
        ax.set_yscale("log", base=2)
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])


def empty_panel(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#666666",
            wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def plain_log_axis(ax, axis: str = "y") -> None:
    """Log scale labelled in plain numbers (0.05, not 5 x 10^-2); over a short range the 2s and 5s too."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_locator(LogLocator(base=10))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    target.set_minor_formatter(_MinorLogLabels(target))


class _MinorLogLabels:
    """Labels 2 and 5 x 10^k (and 3 on a range under a decade and a half); nothing on long ranges."""

    def __init__(self, axis) -> None:
        self.axis = axis

    def __call__(self, value: float, pos=None) -> str:
        import math

        low, high = sorted(self.axis.get_view_interval())
        if value <= 0 or low <= 0:
            return ""
        decades = math.log10(high / low)
        mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
        if (decades < 1.5 and mantissa in (2, 3, 5)) or (decades < 3 and mantissa in (2, 5)):
            return f"{value:g}"
        return ""


def value_axis(ax, values: Iterable[float | None], axis: str = "y", *, log_above_ratio: float = 10.0) -> str:
    """Log (plain labels) when the values span more than `log_above_ratio`, else linear; returns the scale.

    A log axis over a narrow range can show no labelled tick at all (0.0011-0.0013 s), and bars on a log axis
    exaggerate small differences; a wide range on a linear axis hides the small values."""
    positive = [float(v) for v in values if v is not None and not math.isnan(v) and v > 0]
    if positive and max(positive) / min(positive) > log_above_ratio:
        plain_log_axis(ax, axis)
        return "log"
    target = ax.yaxis if axis == "y" else ax.xaxis
    from matplotlib.ticker import ScalarFormatter

    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    target.set_major_formatter(formatter)
    if axis == "y":
        ax.set_ylim(bottom=0)
    return "linear"
