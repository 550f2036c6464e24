"""The Document as Markdown beside report.html: figures linked by their path relative to the sweep directory."""

from __future__ import annotations

from report.document import Block, Document, FigureBlock, Paragraph, Preformatted, Table
from report.html import figure_heading


def render_markdown(document: Document) -> str:
    lines = [f"# {document.title}", "", f"_{document.subtitle}_", ""]
    lines += [line for warning in document.warnings for line in (f"> **Warning:** {warning}", "")]
    lines += ["**Verdict**", "", *(f"- {s}" for s in document.verdict), ""] if document.verdict else []
    for section in document.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            lines += _block(block) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [f"> **Warning:** {block.text}" if block.warning else block.text]
    if isinstance(block, Table):
        out = [f'<a id="{block.anchor}"></a>', ""] if block.anchor else []
        out += [f"*{block.caption}*", ""] if block.caption else []
        out.append("| " + " | ".join(_cell(c) for c in block.columns) + " |")
        out.append("|" + "|".join("---" for _ in block.columns) + "|")
        for i, row in enumerate(block.rows):
            targets = block.links[i] if block.links else (None,) * len(row)
            cells = [f"[{_cell(v)}](#{t})" if t else _cell(v) for v, t in zip(row, targets)]
            out.append("| " + " | ".join(cells) + " |")
        return out
    if isinstance(block, FigureBlock):
        heading = figure_heading(block)
        if block.relative_png is None:
            return [f"**{heading}: skipped.** {block.reason or ''}"]
        return [f"### {heading}", "", f"![{heading}]({block.relative_png})", "",
                f"{block.shows} {block.caption} ([SVG]({block.relative_svg}))"]
    if isinstance(block, Preformatted):
        return [f"<details><summary>{block.summary}</summary>", "", "```", block.text.rstrip(), "```", "",
                "</details>"]
    raise TypeError(f"unknown block {type(block).__name__}")
