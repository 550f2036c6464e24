"""The set-up and finish every figure shares: which runs it may show (one hardware's), its axes, the Panel data
of each panel, then its legend, title and caption with the FigureData attached."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import polars as pl
from matplotlib.figure import Figure

from report.figures.common import (
    Cell,
    FigureData,
    Panel,
    Series,
    attach,
    caption,
    figure_legend,
    length_groups,
    length_title,
    new_figure,
    one_hardware,
)
from report.table.flat import vanilla_runs


@dataclass
class Frame:
    """One figure as it is drawn: its name, the runs it may show, its hardware, its axes and the Panel data of
    each panel labelled so far."""

    name: str
    runs: pl.DataFrame
    hardware: str
    fig: Figure | None = None
    axes: list = field(default_factory=list)
    panels: list[Panel] = field(default_factory=list)

    @classmethod
    def of(cls, name: str, df: pl.DataFrame, *, vanilla: bool = False) -> Frame:
        """Figure `name` over df's single hardware (`one_hardware`); with `vanilla`, over its vanilla runs only: a
        figure of LLaMA against LLaDA leaves the variants to figures of their own."""
        runs = vanilla_runs(df) if vanilla else df
        return cls(name, runs, one_hardware(runs, name))

    def draw(self, panels: int, **layout) -> list:
        """The figure's axes, laid out by `new_figure`."""
        self.fig, self.axes = new_figure(panels, **layout)
        return self.axes

    def panel(self, ax, title: str, xlabel: str, ylabel: str, xscale: str, yscale: str,
              series: Iterable[Series] = (), *, cells: Iterable[Cell] = (), title_size: float | None = None,
              note: str | None = None) -> None:
        """Labels a drawn panel and records what it shows."""
        ax.set_title(title, **({"fontsize": title_size} if title_size else {}))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        self.panels.append(Panel(title, xlabel, ylabel, xscale, yscale, tuple(series), tuple(cells), note))

    def finish(self, title: str | None, notes: Sequence[str], captioned: pl.DataFrame | str, *,
               warnings: Sequence[str] = (), legend: bool = True,
               color_range: tuple[float, float] | None = None) -> Figure:
        """The figure with one legend for all its panels (unless `legend` is off), its title and its caption:
        `caption` of the runs `captioned`, or that text; `warnings` and `color_range` as in FigureData."""
        assert self.fig is not None, "Frame.finish before Frame.draw"
        if legend:
            figure_legend(self.fig, self.axes)
        if title is not None:
            self.fig.suptitle(title)
        text = captioned if isinstance(captioned, str) else caption(captioned, self.hardware)
        return attach(self.fig, FigureData(self.name, self.hardware, text, tuple(self.panels), tuple(notes),
                                           color_range=color_range, warnings=tuple(warnings)))


@dataclass(frozen=True)
class LengthPanel:
    """The panel of one (prompt, N_out) pair."""

    prompt: int
    generation: int
    title: str

    def of(self, df: pl.DataFrame) -> pl.DataFrame:
        """df's rows at this panel's lengths."""
        return df.filter((pl.col("prompt_length") == self.prompt) & (pl.col("generation_length") == self.generation))


def length_panels(df: pl.DataFrame) -> list[LengthPanel]:
    """A panel per (prompt, N_out) pair in df, in `length_groups`' order, titled by `length_title`."""
    groups = length_groups(df)
    prompts = [p for p, _ in groups]
    return [LengthPanel(p, g, length_title(p, g, prompts)) for p, g in groups]
