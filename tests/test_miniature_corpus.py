"""The corpus extractor on constructed Sphinx pages: prose kept, code and boilerplate dropped, prompts held out."""

from __future__ import annotations

from pathlib import Path

import pytest

from miniature.corpus import (
    Corpus,
    CorpusError,
    Page,
    deb_version,
    extract_pages,
    is_excluded,
    is_heldout,
    page_paragraphs,
    read_corpus,
    split_pages,
    write_corpus,
)

PROSE = "This paragraph explains how the interpreter reads a source file and what it does next."


def sphinx_page(*body: str, outside: str = "<p>Navigation text outside the main body of this page.</p>") -> str:
    return (
        f"<html><body><div class='related'>{outside}</div>"
        "<div class='document'><div class='body' role='main'>"
        + "".join(body)
        + "</div></div></body></html>"
    )


def test_paragraphs_inside_the_body_only_without_code_or_tables() -> None:
    html = sphinx_page(
        f"<h1>Title words that are a heading, not a paragraph</h1><p>{PROSE}</p>",
        "<div class='highlight'><pre><span>&gt;&gt;&gt; import json  # code is never prose</span></pre></div>",
        "<table><tr><td><p>A cell of a table with enough words to count as prose.</p></td></tr></table>",
        "<div class='admonition note'><p class='admonition-title'>Note</p><p>Inside a note, the text is prose as well.</p></div>",
        "<p>Inline <code class='literal'><span>json.dumps()</span></code> stays, &amp; entities decode.</p>",
    )
    paragraphs = page_paragraphs(html)
    assert paragraphs == [
        PROSE,
        "Inside a note, the text is prose as well.",
        "Inline json.dumps() stays, & entities decode.",
    ]


def _write(root: Path, relative: str, *paragraphs: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sphinx_page(*(f"<p>{p}</p>" for p in paragraphs)), encoding="utf-8")


def test_pages_exclude_the_prompt_sources_indexes_boilerplate_and_short_lines(tmp_path: Path) -> None:
    boiler = "Copyright notice and licence text that every one of these pages repeats verbatim."
    _write(tmp_path, "library/a.html", PROSE, boiler, "Too short to keep.")
    _write(tmp_path, "library/b.html", "Another page has its own explanation of the module it documents.", boiler)
    _write(tmp_path, "reference/c.html", "A third page describes the grammar in some detail for the reader.", boiler)
    _write(tmp_path, "tutorial/interpreter.html", "The tutorial text that evaluation prompts were cut from, held out.")
    _write(tmp_path, "howto/logging.html", "A HOWTO page that evaluation prompts were cut from, held out too.")
    _write(tmp_path, "genindex-A.html", "An index page lists names and is not prose at all, however long.")
    pages = extract_pages(tmp_path)
    assert [p.path for p in pages] == ["library/a.html", "library/b.html", "reference/c.html"]
    assert pages[0].paragraphs == (PROSE,)
    assert all(boiler not in p.paragraphs for p in pages)
    assert is_excluded("tutorial/x.html") and is_excluded("howto/y.html") and not is_excluded("library/json.html")


def test_every_evaluation_prompt_page_is_outside_the_training_text() -> None:
    """The shipped prompts come from tutorial/ and howto/ (specs/data/README.md): both are excluded."""
    readme = (Path(__file__).resolve().parents[1] / "specs" / "data" / "README.md").read_text(encoding="utf-8")
    assert "`tutorial/*.rst`, `howto/*.rst`" in readme
    assert is_excluded("tutorial/index.html") and is_excluded("howto/curses.html")


def test_heldout_split_is_a_fixed_function_of_the_page_path() -> None:
    pages = [Page(f"library/m{i}.html", (PROSE,)) for i in range(400)]
    corpus = split_pages(pages, {"package": "p", "version": "1", "deb_sha256": "0"})
    assert 0 < len(corpus.heldout) < 40
    assert {p.path for p in corpus.heldout} == {p.path for p in pages if is_heldout(p)}
    assert set(corpus.train).isdisjoint(corpus.heldout)


def test_corpus_round_trips_with_its_checksum(tmp_path: Path) -> None:
    corpus = Corpus(
        train=(Page("library/a.html", (PROSE, "Second paragraph of the first page, with words.")),),
        heldout=(Page("library/b.html", ("Held-out prose that the loss curve is measured on.",)),),
        source={"package": "python3.11-doc", "version": "3.11.2-6", "deb_sha256": "ab" * 32},
    )
    write_corpus(corpus, tmp_path)
    again = read_corpus(tmp_path)
    assert again == corpus and again.sha256() == corpus.sha256()


def test_deb_version_from_the_file_name() -> None:
    assert deb_version(Path("python3.11-doc_3.11.2-6+deb12u9_all.deb")) == "3.11.2-6+deb12u9"
    assert deb_version(Path("pkg_1%3a2.0-1_all.deb")) == "1:2.0-1"
    with pytest.raises(CorpusError, match="not a Debian package file name"):
        deb_version(Path("notes.deb"))


def test_train_command_names_a_missing_package_file_in_one_line(tmp_path: Path, capsys) -> None:
    from miniature.cli import main

    missing = tmp_path / "python3.11-doc_0_all.deb"
    assert main(["--work-dir", str(tmp_path / "work"), "--deb", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(missing) in err
