"""Nothing a spec (or a run file) says runs in a viewer: every piece of the report's text is plain text in
report.md and report.html, whatever field it came from. report.md is checked as a Markdown viewer that renders
inline HTML shows it (markdown-it, CommonMark with tables), report.html as a browser parses it: no tag, attribute
or link the package did not write, and the hostile text still there to read."""

from __future__ import annotations

import dataclasses
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from report_fixtures import SMOKE_LIKE, reseal, write_sweep

from report.document import render
from report.document.content import Document, FigureBlock, Paragraph, Preformatted, Section, Table
from report.document.html import render_html
from report.document.markdown import render_markdown
from report.answer.verdict.short import verdict_text
from specs.artifacts import SweepLayout, verify

markdown_it = pytest.importorskip("markdown_it")

# Raw HTML, an autolink, a link and an image (inline, by reference and by definition), a fence and block openers
# after a blank line, a backslash before a link's end, and a terminal escape sequence.
HOSTILE = ("[r]: javascript:alert(0)\n<script>alert(1)</script> <img src=x onerror=alert(2)> "
           "[click](javascript:alert(3)) ![x](http://evil.example/x.png) <https://evil.example/4> [r] "
           "a\\](javascript:alert(5)) &lt;b&gt;\n\n<iframe src=javascript:alert(6)></iframe>\n\n"
           "```\n# heading\n- item\n1. item\n\x1b]52;c;ZXZpbA==\x07 <svg onload=alert(7)>")
# What the package writes around the text, and where its links and images point.
OWN_TAGS = {"h1", "h2", "h3", "p", "em", "strong", "ul", "li", "blockquote", "table", "thead", "tbody", "tr", "th",
            "td", "a", "img", "details", "summary", "pre", "code", "html", "head", "meta", "title", "style", "body",
            "main", "nav", "section", "caption", "figure", "figcaption", "div", "br"}


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text between them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _inert(html: str) -> str:
    """The text a viewer shows of `html`, after checking that nothing in it runs or loads: only the package's own
    tags, no event handler, links only to the report's anchors and figures, images only the report's."""
    parser = _Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert tag in OWN_TAGS, (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "a":
            assert (attrs.get("href") or "#").startswith(("#", "figures/")), attrs
        if tag == "img":
            assert (attrs.get("src") or "").startswith(("figures/", "data:image/png;base64,")), attrs
    return "".join(parser.text)


def _viewed(markdown: str) -> str:
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _shows_it(text: str) -> None:
    for piece in ("<script>alert(1)</script>", "onerror=alert(2)", "javascript:alert(3)", "<svg onload=alert(7)>"):
        assert piece in text


def test_every_block_of_the_document_shows_hostile_text_and_runs_none_of_it() -> None:
    figure = FigureBlock(1, HOSTILE, HOSTILE, HOSTILE, HOSTILE, png=Path("/x.png"), relative_png="figures/x.png",
                         relative_svg="figures/x.svg", display_number=1, png_data=b"\x89PNG\r\n\x1a\n" + bytes(16))
    skipped = FigureBlock(2, HOSTILE, "", HOSTILE, HOSTILE, reason=HOSTILE)
    table = Table((HOSTILE, "b"), ((HOSTILE, HOSTILE), ("1", HOSTILE)), HOSTILE, anchor="t",
                  links=((None, "t"), ("t", None)))
    blocks = [Paragraph(HOSTILE), Paragraph(HOSTILE, warning=True), table, figure, skipped,
              Preformatted(HOSTILE + "\n````\n~~~\n" + HOSTILE, HOSTILE)]
    document = Document(HOSTILE, HOSTILE, [Section("s", HOSTILE, blocks)], warnings=[HOSTILE], verdict=[HOSTILE])
    markdown = render_markdown(document)
    assert "\x1b" not in markdown and "\\x1b]52;c;ZXZpbA==\\x07" in markdown  # shown, never sent to a terminal
    _shows_it(_inert(_viewed(markdown)))
    _shows_it(_inert(render_html(document)))


def test_the_terminals_verdict_shows_control_characters_rather_than_sending_them() -> None:
    text = verdict_text(["judged by \x1b]52;c;ZXZpbA==\x07 at \x1b[2J once"], Path("report.md"), Path("findings.json"), "report: x")
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text


def test_a_specs_text_in_every_field_that_reaches_the_report_stays_text(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "draw_figures", lambda *args, **kwargs: ([], [], ()))
    grid = dataclasses.replace(SMOKE_LIKE, name="hostile", generation_lengths=(32,), steps=(8, 32), extra_failures=True)
    layout = SweepLayout(write_sweep(tmp_path, grid))
    spec = yaml.safe_load(layout.spec.read_text(encoding="utf-8"))
    spec.update(description=HOSTILE, departures={"warmup": HOSTILE, "precision": HOSTILE}, amendments=[HOSTILE])
    spec["controls"].update(device="auto", hardware={"gpu": HOSTILE})
    spec["prompts"]["dataset"] = HOSTILE
    spec["models"][1]["source"] = {"checkpoint": HOSTILE}
    spec["quality"]["bertscore"]["model"] = HOSTILE
    one_line = HOSTILE.replace("\n", " ")
    text = yaml.safe_dump(spec, sort_keys=False).replace("  warmup: 2\n", f"  warmup: 2  # {one_line}\n", 1)
    layout.spec.write_text(f"# {one_line}\n{text}", encoding="utf-8")
    for path in layout.run_files().values():  # a failed run's error names what it was given
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["status"] == "error":
            data["error"] = HOSTILE
            path.write_text(json.dumps(data), encoding="utf-8")
    reseal(layout.root)
    assert not verify(layout)
    outputs = render.render_report(layout.root, echo=False)
    markdown = outputs.markdown.read_text(encoding="utf-8")
    assert markdown.count("javascript:alert(3)") >= 8  # description, departures, amendments, gpu, dataset, ...
    shown = _inert(_viewed(markdown))
    _shows_it(shown)
    _shows_it(_inert(outputs.html.read_text(encoding="utf-8")))
