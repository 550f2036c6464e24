"""The report as data: sections of paragraphs, tables, figures and preformatted text, rendered to HTML and
Markdown by report/document/html.py and report/document/markdown.py; plus the number formats every table uses."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Paragraph:
    text: str
    warning: bool = False  # drawn as a callout (unverified artifacts, missing analyses)


# Figures are saved at this resolution; the HTML shows them at 96 CSS pixels per inch.
PNG_DPI = 150

# Tables longer than this fold away behind their caption (per-run tables of a large sweep).
FOLD_ROWS = 12


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    fold: bool | None = None  # None: fold when longer than FOLD_ROWS
    anchor: str | None = None  # an id other tables link to
    links: tuple[tuple[str | None, ...], ...] | None = None  # per cell: the anchor it links to, or None

    @property
    def folded(self) -> bool:
        return len(self.rows) > FOLD_ROWS if self.fold is None else self.fold


@dataclass(frozen=True)
class FigureBlock:
    """A written figure (png set) or a skipped one (reason set)."""

    number: int
    title: str
    hardware: str
    caption: str
    shows: str
    png: Path | None = None  # absolute path of the PNG
    relative_png: str | None = None  # path relative to the sweep directory (Markdown)
    relative_svg: str | None = None
    reason: str | None = None  # why it was skipped
    display_number: int = 0  # its number in the report, in reading order
    png_data: bytes | None = field(default=None, repr=False)  # the PNG as drawn, before it is written


@dataclass(frozen=True)
class Preformatted:
    text: str
    summary: str  # a collapsible block's label


Block = Paragraph | Table | FigureBlock | Preformatted


@dataclass
class Section:
    anchor: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section]
    warnings: list[str] = field(default_factory=list)  # above everything, under the title (unverified artifacts)
    verdict: list[str] = field(default_factory=list)  # report/answer/verdict/short.py: the answer in sentences, before any table


# ------------------------------------------------------------------ formats

# Control characters but tab and newline: an escape sequence in a spec's text would act on a terminal that shows it.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with each control character but tab and newline written as `\\xNN`: shown, never acted on."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def fmt_float(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}g}"


def fmt_rate(value: float | None) -> str:
    """Tokens per second: whole numbers with thousands separators from 100 up, else 3 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def fmt_seconds(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def fmt_bytes(value: float | None) -> str:
    if value is None:
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.3g} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.3g} TiB"


def fmt_value(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return fmt_float(value)
    return str(value)
