"""The Document as one self-contained HTML file: inline CSS, figures as base64 data URIs, no script, no URL."""

from __future__ import annotations

import base64
import re
from html import escape

from report.document.content import (
    PNG_DPI,
    Block,
    Document,
    FigureBlock,
    Paragraph,
    Preformatted,
    Section,
    Table,
)

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f; margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 1.8em; margin-bottom: 0.1em; }
h2 { border-bottom: 2px solid #e3e3e8; padding-bottom: 4px; margin-top: 2.2em; }
h3 { margin-top: 1.6em; }
.subtitle { color: #555; margin-top: 0; }
nav ul { columns: 2; list-style: none; padding-left: 0; }
table { border-collapse: collapse; margin: 12px 0 20px; font-size: 0.88em; }
th, td { border: 1px solid #d8d8de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; color: #444; padding-bottom: 4px; }
figure { margin: 18px 0 28px; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.88em; color: #333; }
.skipped { border-left: 4px solid #999; background: #f6f6f6; padding: 8px 12px; margin: 14px 0; }
.warning { border-left: 4px solid #b00020; background: #fff1f1; padding: 8px 12px; }
.verdict { border-left: 4px solid #1f5fbf; background: #f2f6fd; padding: 2px 16px; margin: 16px 0; }
.verdict h2 { border: none; margin: 0.6em 0 0.2em; font-size: 1.2em; }
.verdict ul { padding-left: 1.2em; margin: 0.4em 0 0.8em; }
.verdict li { margin: 0.3em 0; }
details { margin: 12px 0; }
summary { cursor: pointer; color: #333; }
details pre { background: #f7f7f9; padding: 10px; overflow-x: auto; font-size: 0.85em; }
code { font-size: 0.92em; }
"""


def render_html(document: Document) -> str:
    toc = "".join(f'<li><a href="#{s.anchor}">{escape(s.title)}</a></li>' for s in document.sections)
    body = "\n".join(_section(s) for s in document.sections)
    warnings = "".join(f'<p class="warning">{escape(w)}</p>\n' for w in document.warnings)
    sentences = "".join(f"<li>{escape(s)}</li>" for s in document.verdict)
    verdict = (f'<section id="verdict" class="verdict"><h2>Verdict</h2><ul>{sentences}</ul></section>\n'
               if document.verdict else "")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(document.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        f"<h1>{escape(document.title)}</h1>\n<p class=\"subtitle\">{escape(document.subtitle)}</p>\n{warnings}{verdict}"
        f"<nav><ul>{toc}</ul></nav>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _section(section: Section) -> str:
    parts = [f'<section id="{escape(section.anchor)}">', f"<h2>{escape(section.title)}</h2>"]
    parts += [_block(b) for b in section.blocks]
    parts.append("</section>")
    return "\n".join(parts)


def _block(block: Block) -> str:
    if isinstance(block, Paragraph):
        css = ' class="warning"' if block.warning else ""
        return f"<p{css}>{escape(block.text)}</p>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, FigureBlock):
        return _figure(block)
    if isinstance(block, Preformatted):
        return f"<details><summary>{escape(block.summary)}</summary><pre>{escape(block.text)}</pre></details>"
    raise TypeError(f"unknown block {type(block).__name__}")


def _table(table: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    rows = []
    for i, row in enumerate(table.rows):
        targets = table.links[i] if table.links else (None,) * len(row)
        cells = "".join(
            (f'<td class="num">{_cell(v, t)}</td>' if _numeric(v) else f"<td>{_cell(v, t)}</td>")
            for v, t in zip(row, targets)
        )
        rows.append(f"<tr>{cells}</tr>")
    body = f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
    ident = f' id="{escape(table.anchor)}"' if table.anchor else ""
    if table.folded:
        summary = f"{table.caption} ({len(table.rows)} rows)" if table.caption else f"{len(table.rows)} rows"
        return f"<details{ident}><summary>{escape(summary)}</summary><table>{body}</table></details>"
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    return f"<table{ident}>{caption}{body}</table>"


def _cell(text: str, target: str | None) -> str:
    return f'<a href="#{escape(target)}">{escape(text)}</a>' if target else escape(text)


_NUMBER = re.compile(r"\[?[-+]?\d[\d.,]*(e[-+]?\d+)?( ?(µs|ms|s|B|KiB|MiB|GiB|TiB))?(, .*\])?")


def _numeric(text: str) -> bool:
    """Right-align numbers, quantities with a unit and intervals; leave ids and lists left."""
    return bool(_NUMBER.fullmatch(text))


def figure_heading(block: FigureBlock) -> str:
    number = f"Figure {block.display_number}. " if block.png is not None else ""
    return f"{number}{block.title}" + (f" — {block.hardware}" if block.hardware else "")


def _figure(block: FigureBlock) -> str:
    heading = figure_heading(block)
    if block.png is None:
        return (f'<div class="skipped"><strong>{escape(heading)}: skipped.</strong> '
                f"{escape(block.reason or '')}</div>")
    raw = block.png_data if block.png_data is not None else block.png.read_bytes()
    data = base64.b64encode(raw).decode("ascii")
    width = _css_width(raw)
    size = f' width="{width}"' if width else ""
    return (
        f'<figure id="figure-{block.display_number}"><h3>{escape(heading)}</h3>'
        f'<img src="data:image/png;base64,{data}" alt="{escape(heading)}"{size}>'
        f"<figcaption>{escape(block.shows)}<br>{escape(block.caption)}</figcaption></figure>"
    )


def _css_width(png: bytes) -> int | None:
    """The figure's width in CSS pixels (96 per inch) from the PNG header, so a small figure stays small."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        return None
    pixels = int.from_bytes(png[16:20], "big")
    return round(pixels * 96 / PNG_DPI)
