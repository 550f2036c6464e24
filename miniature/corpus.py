"""The training corpus: paragraph prose from the HTML of Debian's python3.11-doc, rebuilt offline.

The package is fetched with `apt-get download` and unpacked with `dpkg -x` (never installed). Every page's
`<p>` text inside Sphinx's main body is kept; code blocks, tables, navigation and headings are not
paragraphs and drop out. Paragraphs that recur on several pages are boilerplate and are dropped too.
The tutorial and HOWTO pages are left out whole: `specs/data/prompts.txt` was cut from them, so every
evaluation prompt is held out from training. A further seeded share of pages is the held-out split whose
loss the training log reports.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from specs.artifacts import sha256_file

DEB_PACKAGE = "python3.11-doc"
HTML_ROOT = Path("usr/share/doc/python3.11/html")
# Pages the evaluation prompts come from (specs/data/README.md), and pages that are indexes, not prose.
EXCLUDED_DIRS = ("tutorial/", "howto/")
EXCLUDED_PAGES = re.compile(r"^(genindex.*|search|py-modindex|contents|index|copyright|license|download)\.html$")
MIN_PARAGRAPH_WORDS = 8
BOILERPLATE_PAGES = 3  # a paragraph on this many pages or more is boilerplate
HELDOUT_SHARE = 0.04


@dataclass(frozen=True)
class Page:
    path: str  # relative to the HTML root, e.g. "library/json.html"
    paragraphs: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


class _ParagraphParser(html.parser.HTMLParser):
    """Collects the text of every <p> inside the Sphinx body, outside <pre> and tables."""

    _SKIPPED = {"pre", "table", "script", "style"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._body_depth: int | None = None  # div depth at which the body started
        self._div_depth = 0
        self._skip = 0
        self._in_p = False
        self._skip_p = False
        self._buffer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "div":
            self._div_depth += 1
            if self._body_depth is None and attributes.get("role") == "main":
                self._body_depth = self._div_depth
        elif tag in self._SKIPPED:
            self._skip += 1
        elif tag == "p" and self._body_depth is not None:
            self._in_p, self._buffer = True, []
            self._skip_p = (attributes.get("class") or "") in {"admonition-title", "rubric"}

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            if self._body_depth == self._div_depth:
                self._body_depth = None
            self._div_depth -= 1
        elif tag in self._SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag == "p" and self._in_p:
            self._in_p = False
            text = " ".join("".join(self._buffer).split())
            if text and not self._skip_p:
                self.paragraphs.append(text)

    def handle_data(self, data: str) -> None:
        if self._in_p and not self._skip:
            self._buffer.append(data)


def page_paragraphs(html_text: str) -> list[str]:
    """Prose paragraphs of one Sphinx page: `<p>` text in the main body, whitespace collapsed."""
    parser = _ParagraphParser()
    parser.feed(html_text)
    parser.close()
    return [p.replace("\u00b6", "").strip() for p in parser.paragraphs]


def is_excluded(relative: str) -> bool:
    return relative.startswith(EXCLUDED_DIRS) or bool(EXCLUDED_PAGES.match(relative))


def extract_pages(html_root: Path) -> list[Page]:
    """Every kept page's prose, boilerplate removed, in path order (deterministic)."""
    raw: dict[str, list[str]] = {}
    for path in sorted(html_root.rglob("*.html")):
        relative = path.relative_to(html_root).as_posix()
        if relative.startswith("_") or is_excluded(relative):
            continue
        kept = [p for p in page_paragraphs(path.read_text(encoding="utf-8")) if len(p.split()) >= MIN_PARAGRAPH_WORDS]
        raw[relative] = kept
    seen_on = Counter(p for paragraphs in raw.values() for p in set(paragraphs))
    pages = []
    for relative, paragraphs in raw.items():
        unique = tuple(dict.fromkeys(p for p in paragraphs if seen_on[p] < BOILERPLATE_PAGES))
        if unique:
            pages.append(Page(relative, unique))
    return pages


def is_heldout(page: Page, share: float = HELDOUT_SHARE) -> bool:
    """A fixed, seedless split: the page path's hash decides, so adding pages moves no other page."""
    digest = hashlib.sha256(page.path.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


@dataclass(frozen=True)
class Corpus:
    train: tuple[Page, ...]
    heldout: tuple[Page, ...]
    source: dict[str, str]  # package, version, deb_sha256

    def sha256(self) -> str:
        return hashlib.sha256(corpus_jsonl(self).encode()).hexdigest()

    def characters(self) -> int:
        return sum(len(page.text) for page in self.train + self.heldout)


def corpus_jsonl(corpus: Corpus) -> str:
    lines = [json.dumps({"split": "train", "page": p.path, "text": p.text}) for p in corpus.train]
    lines += [json.dumps({"split": "heldout", "page": p.path, "text": p.text}) for p in corpus.heldout]
    return "\n".join(lines) + "\n"


def split_pages(pages: list[Page], source: dict[str, str]) -> Corpus:
    heldout = tuple(p for p in pages if is_heldout(p))
    train = tuple(p for p in pages if not is_heldout(p))
    return Corpus(train=train, heldout=heldout, source=source)


def download_deb(directory: Path, version: str | None = None) -> Path:
    """`apt-get download` the doc package into `directory` (a registry fetch; nothing is installed)."""
    if shutil.which("apt-get") is None:
        raise CorpusError(f"apt-get not found: the corpus is rebuilt from Debian's {DEB_PACKAGE}; pass --deb FILE instead")
    target = f"{DEB_PACKAGE}={version}" if version else DEB_PACKAGE
    result = subprocess.run(["apt-get", "download", target], cwd=directory, capture_output=True, text=True)
    debs = sorted(directory.glob(f"{DEB_PACKAGE}_*.deb"))
    if result.returncode != 0 or not debs:
        raise CorpusError(
            f"apt-get download {target} failed ({result.stderr.strip().splitlines()[-1:] or result.returncode}); "
            "run `apt-get update` first, or pass --deb FILE"
        )
    return debs[-1]


def deb_version(deb: Path) -> str:
    """The version in a .deb file name (name_version_arch.deb, ':' spelled %3a)."""
    parts = deb.name.removesuffix(".deb").split("_")
    if len(parts) != 3:
        raise CorpusError(f"{deb}: not a Debian package file name (name_version_arch.deb)")
    return parts[1].replace("%3a", ":")


def corpus_from_deb(deb: Path) -> Corpus:
    """Unpack the .deb in a temporary folder (dpkg -x) and extract the corpus from its HTML."""
    if not deb.is_file():
        raise CorpusError(f"{deb}: no such file (a {DEB_PACKAGE}_<version>_all.deb from `apt-get download {DEB_PACKAGE}`)")
    if shutil.which("dpkg") is None:
        raise CorpusError("dpkg not found: it unpacks the documentation package (Debian's dpkg)")
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["dpkg", "-x", str(deb), scratch], check=True)
        root = Path(scratch) / HTML_ROOT
        if not root.is_dir():
            raise CorpusError(f"{deb}: no {HTML_ROOT} inside; is it {DEB_PACKAGE}?")
        pages = extract_pages(root)
    source = {"package": DEB_PACKAGE, "version": deb_version(deb), "deb_sha256": sha256_file(deb)}
    return split_pages(pages, source)


def write_corpus(corpus: Corpus, directory: Path) -> Path:
    """corpus.jsonl (one page a line, split named) and corpus.json (its provenance and sha256)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.jsonl").write_text(corpus_jsonl(corpus), encoding="utf-8")
    info = {
        **corpus.source,
        "sha256": corpus.sha256(),
        "pages_train": len(corpus.train),
        "pages_heldout": len(corpus.heldout),
        "characters": corpus.characters(),
        "excluded": [*EXCLUDED_DIRS, EXCLUDED_PAGES.pattern],
    }
    (directory / "corpus.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return directory / "corpus.jsonl"


def read_corpus(directory: Path) -> Corpus:
    info = json.loads((directory / "corpus.json").read_text(encoding="utf-8"))
    train, heldout = [], []
    for line in (directory / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        page = Page(row["page"], tuple(row["text"].split("\n\n")))
        (heldout if row["split"] == "heldout" else train).append(page)
    source = {k: info[k] for k in ("package", "version", "deb_sha256")}
    return Corpus(tuple(train), tuple(heldout), source)


class CorpusError(RuntimeError):
    """The corpus cannot be rebuilt here (no apt-get/dpkg, package unavailable, wrong file)."""
