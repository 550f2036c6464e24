"""Degeneracy figures: hand-counted values and invariants over arbitrary texts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers.quality.degeneracy import degeneracy, distinct_n, repeated_ngram_rate, words


def test_words_split_punctuation_and_lower_case() -> None:
    assert words("The cat, the CAT!") == ["the", "cat", ",", "the", "cat", "!"]


def test_hand_counted_repetitive_text() -> None:
    # a b a b a: unigrams {a, b} of 5; bigrams ab ba ab ba: 2 unique of 4, the last two repeat.
    figures = degeneracy("a b a b a")
    assert figures.distinct_1 == pytest.approx(2 / 5)
    assert figures.distinct_2 == pytest.approx(2 / 4)
    assert figures.repeated_bigram_rate == pytest.approx(2 / 4)


def test_text_without_repeats() -> None:
    figures = degeneracy("one two three four")
    assert (figures.distinct_1, figures.distinct_2, figures.repeated_bigram_rate) == (1.0, 1.0, 0.0)


def test_too_short_texts_have_no_figures() -> None:
    assert degeneracy("").distinct_1 is None
    single = degeneracy("word")
    assert single.distinct_1 == 1.0 and single.distinct_2 is None and single.repeated_bigram_rate is None


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "."]), max_size=40), st.integers(1, 3))
def test_rates_are_shares_and_complementary(units: list[str], n: int) -> None:
    distinct, repeated = distinct_n(units, n), repeated_ngram_rate(units, n)
    if len(units) < n:
        assert distinct is None and repeated is None
    else:
        assert 0 < distinct <= 1 and 0 <= repeated < 1
        assert distinct + repeated == pytest.approx(1.0)
