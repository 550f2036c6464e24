"""Degeneracy of one continuation: distinct-1, distinct-2 and the repeated-bigram rate over its words."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Words and single punctuation marks, lower-cased: the same unit for both models whatever their tokenizer,
# so LLaMA's and LLaDA's figures are comparable (token-level counts would depend on the vocabulary).
_WORD = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> list[str]:
    """The continuation as lower-cased words and punctuation marks."""
    return _WORD.findall(text.lower())


def ngrams(units: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(units[i : i + n]) for i in range(len(units) - n + 1)]


def distinct_n(units: Sequence[str], n: int) -> float | None:
    """Unique n-grams / n-grams (Li et al. 2016, "A Diversity-Promoting Objective"); None with no n-gram."""
    grams = ngrams(units, n)
    return len(set(grams)) / len(grams) if grams else None


def repeated_ngram_rate(units: Sequence[str], n: int) -> float | None:
    """Share of n-gram occurrences repeating an earlier n-gram of the text (seq-rep-n, Welleck et al. 2019).

    Per text this is 1 - distinct-n; it is kept under its own name because the issue asks for the figure
    readers know from degeneration studies. None with no n-gram.
    """
    grams = ngrams(units, n)
    if not grams:
        return None
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for gram in grams:
        repeats += gram in seen
        seen.add(gram)
    return repeats / len(grams)


@dataclass(frozen=True)
class Degeneracy:
    repeated_bigram_rate: float | None
    distinct_1: float | None
    distinct_2: float | None


def degeneracy(text: str) -> Degeneracy:
    """The three degeneracy figures of one continuation (None where the text is too short to have them)."""
    units = words(text)
    return Degeneracy(
        repeated_bigram_rate=repeated_ngram_rate(units, 2),
        distinct_1=distinct_n(units, 1),
        distinct_2=distinct_n(units, 2),
    )
