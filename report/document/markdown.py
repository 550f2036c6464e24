"""The Document as Markdown beside report.html: figures linked by their path relative to the sweep directory.

The Document's text is plain text wherever it came from: a spec's description, departures, amendments, comments,
paths and model names, a run's error, the package's own words. So every piece of it passes through `plain` on its
way out, as report/document/html.py escapes every piece for HTML: nothing in it becomes a tag, a link, an image or a block
in a Markdown viewer, and the only markup is what this module writes around it."""

from __future__ import annotations

import re
from html import escape

from report.document.content import Block, Document, FigureBlock, Paragraph, Preformatted, Table, printable
from report.document.html import figure_heading

# A `]` that would close a link's or image's text before its destination, reference or definition.
_LINK_CLOSE = re.compile(r"\](?=[(\[:])")
# What opens a block at the start of a line: a heading, quote, list item, thematic break, fence or table row.
_BLOCK_OPENER = re.compile(r"[#>+\-*=_~`|]|(?P<number>\d{1,9})(?=[.)])")
_FENCE = "```"


def plain(text: str, *, block: bool = False) -> str:
    """`text` as Markdown shows it, never as markup: one line, no control character, a backslash as itself, `&` and
    `<` as entities (no raw HTML, no autolink), a `]` that would close a link or an image before its destination
    escaped (the only destinations are the ones this module writes); `block`: at the start of a block, where a `#`,
    `>`, `-`, a fence or `1.` would open one, that is escaped too."""
    text = _one_line(text).replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    text = _LINK_CLOSE.sub(r"\\]", text)
    opener = _BLOCK_OPENER.match(text.lstrip()) if block else None
    if opener is not None:  # '\# ...', '1\. ...': escaped where it would open a block
        text = text.lstrip()
        at = opener.end() if opener["number"] else 0
        text = f"{text[:at]}\\{text[at:]}"
    return text


def _one_line(text: str) -> str:
    return " ".join(printable(text).splitlines())


def render_markdown(document: Document) -> str:
    lines = [f"# {plain(document.title)}", "", f"_{plain(document.subtitle)}_", ""]
    lines += [line for warning in document.warnings for line in (f"> **Warning:** {plain(warning)}", "")]
    lines += (["**Verdict**", "", *(f"- {plain(s, block=True)}" for s in document.verdict), ""]
              if document.verdict else [])
    for section in document.sections:
        lines += [f"## {plain(section.title)}", ""]
        for block in section.blocks:
            lines += _block(block) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _cell(text: str) -> str:
    return plain(text).replace("|", "\\|")


def _block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [f"> **Warning:** {plain(block.text)}" if block.warning else plain(block.text, block=True)]
    if isinstance(block, Table):
        out = [f'<a id="{escape(block.anchor)}"></a>', ""] if block.anchor else []
        out += [f"*{plain(block.caption)}*", ""] if block.caption else []
        out.append("| " + " | ".join(_cell(c) for c in block.columns) + " |")
        out.append("|" + "|".join("---" for _ in block.columns) + "|")
        for i, row in enumerate(block.rows):
            targets = block.links[i] if block.links else (None,) * len(row)
            cells = [f"[{_cell(v)}](#{escape(t)})" if t else _cell(v) for v, t in zip(row, targets)]
            out.append("| " + " | ".join(cells) + " |")
        return out
    if isinstance(block, FigureBlock):
        heading = figure_heading(block)
        if block.relative_png is None:
            return [f"**{plain(heading)}: skipped.** {plain(block.reason or '')}"]
        return [f"### {plain(heading)}", "", f"![{plain(heading)}]({block.relative_png})", "",
                f"{plain(block.shows, block=True)} {plain(block.caption)} ([SVG]({block.relative_svg}))"]
    if isinstance(block, Preformatted):
        return [f"<details><summary>{escape(_one_line(block.summary))}</summary>", "", *_fenced(block.text),
                "", "</details>"]
    raise TypeError(f"unknown block {type(block).__name__}")


def _fenced(text: str) -> list[str]:
    """A fenced code block no line of `text` can close: its fence is longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(len(_FENCE), longest + 1)
    return [fence, printable(text.rstrip()), fence]
