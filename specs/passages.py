"""Passages of a local prompt file and the rule that turns them into prompts of a given length (no torch).

Prompt id i is the i-th *eligible* passage: one with at least prompt + generation whitespace-separated
words (a count no tokenizer enters, so both models of a sweep get the same passages). With
`prompts.join_passages: true` a prompt may also be several consecutive passages joined by a blank line:
passages are taken in file order and joined until the span has enough words, then the next span starts
at the following passage. A passage long enough on its own is a span of one, so joining changes nothing
for lengths every passage reaches. The planner counts spans with this module before any model loads,
and the workers cut prompts from the same spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from specs.safefile import PROMPTS_MAX_BYTES, UnsafeFileError, read_text

LOCAL_SUFFIXES = (".txt", ".jsonl")
PASSAGE_SEPARATOR = "\n\n"
_BLANK_LINE = re.compile(r"\n\s*\n")


class PassageError(ValueError):
    """A local prompt file that cannot be read or parsed; the message names the file (and line)."""


def is_local(dataset: str) -> bool:
    """A .txt/.jsonl path or an existing file: read here; anything else is a hub dataset."""
    return dataset.endswith(LOCAL_SUFFIXES) or Path(dataset).is_file()


def local_passages(path: Path, text_field: str = "text") -> Iterator[str]:
    """Blank-line separated blocks of a .txt, or the `text_field` of each row of a .jsonl, in file order."""
    try:
        text = read_text(path, PROMPTS_MAX_BYTES, follow=True)  # never a FIFO or a device, never unbounded
    except UnsafeFileError as exc:
        raise PassageError(f"prompts.dataset: {exc}") from None
    except OSError as exc:
        raise PassageError(f"prompts.dataset: cannot read {str(path)!r} ({exc.strerror or exc})") from None
    if path.suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PassageError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
            if not isinstance(row, dict) or not isinstance(row.get(text_field), str):
                raise PassageError(f"{path}:{number}: no string field {text_field!r} (set prompts.text_field)")
            passage = row[text_field].strip()
            if passage:
                yield passage
        return
    for block in _BLANK_LINE.split(text):
        passage = block.strip()
        if passage:
            yield passage


def eligible_spans(passages: Iterable[str], words: int, *, join: bool) -> Iterator[str]:
    """The texts prompt ids index, in order: passages with >= `words` words, or (join) consecutive
    passages joined by a blank line until they have that many."""
    pending: list[str] = []
    count = 0
    for passage in passages:
        n = len(passage.split())
        if not join:
            if n >= words:
                yield passage
            continue
        pending.append(passage)
        count += n
        if count >= words:
            yield PASSAGE_SEPARATOR.join(pending)
            pending, count = [], 0


def count_spans(passages: Iterable[str], words: int, *, join: bool, enough: int) -> int:
    """How many eligible spans exist, counting no further than `enough`."""
    found = 0
    for _ in eligible_spans(passages, words, join=join):
        found += 1
        if found >= enough:
            break
    return found


def shortage_message(dataset: str, found: int, words: int, needed: int, *, join: bool) -> str:
    """One line: what is missing and the three ways out."""
    unit = "spans of joined passages" if join else "passages"
    hint = "" if join else "set prompts.join_passages: true (consecutive passages joined), or "
    return (
        f"prompts.count: {dataset} has only {found} {unit} of at least {words} words "
        f"(prompt + generation tokens); the grid needs {needed}. {hint.capitalize()}use shorter grid lengths, "
        "a lower prompts.count, or a dataset with longer passages"
    )
