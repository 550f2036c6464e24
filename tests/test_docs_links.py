"""Every relative link in README.md and docs/*.md resolves: the file exists, and a #fragment names a heading.

The README is short and sends a reader to docs/ pages by link, so a moved or renamed page or heading must
fail here rather than leave a dead link. Anchors follow GitHub's rules for heading ids: the heading's text
(inline markup dropped) lower-cased, every character that is not a letter, digit, space, '-' or '_'
removed, spaces made hyphens, and a repeated id suffixed -1, -2, ...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks: a '#' or '[..](..)' inside a fence is code, not markdown."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def _heading_text(raw: str) -> str:
    """A heading's rendered text: code spans kept as their content, links as their text, '*' emphasis and escapes dropped."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"\*+|\\", "", text)


def github_slug(text: str) -> str:
    """GitHub's id for a heading's rendered text (without the duplicate suffix)."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading id GitHub gives the page, duplicates suffixed -1, -2, ... in document order."""
    seen: dict[str, int] = {}
    ids = set()
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        if match := HEADING.match(line):
            slug = github_slug(_heading_text(match.group(2)))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def links(page: Path) -> list[str]:
    """The targets of the page's markdown links and images outside code (fences and code spans)."""
    targets = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        targets += LINK.findall(CODE_SPAN.sub("", line))
    return targets


def test_slugs_follow_githubs_rules() -> None:
    assert github_slug(_heading_text("The answer, as measured on an NVIDIA H200")) == "the-answer-as-measured-on-an-nvidia-h200"
    assert github_slug(_heading_text("Samplers (`workers/samplers/`)")) == "samplers-workerssamplers"
    assert github_slug(_heading_text("One short, offline lease")) == "one-short-offline-lease"
    assert github_slug(_heading_text("Why LLaDA's likelihood is a bound")) == "why-lladas-likelihood-is-a-bound"
    assert github_slug(_heading_text("snake_case and **bold**")) == "snake_case-and-bold"


def test_duplicate_headings_get_numbered_ids(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"notes", "notes-1", "notes-2"}


def test_links_outside_code_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("See [a](a.md#x) and ![fig](f.png).\n`[not](code.md)`\n```\n[no](fence.md)\n```\n", encoding="utf-8")
    assert links(page) == ["a.md#x", "f.png"]


def test_the_readme_sends_readers_to_docs() -> None:
    targets = links(ROOT / "README.md")
    assert "docs/README.md" in targets
    assert len(PAGES) >= 13  # the README, the index and a page per topic


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading with id #{fragment} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
