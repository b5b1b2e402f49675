"""Lexical coverage (``actors.recall.lexical_coverage``): the share of a query's idf a memory holds,
and how a query word that no memory holds counts in a mixed-language store (#31)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engram.actors.lexical import Bm25Index, tokenize
from engram.actors.recall import lexical_coverage

pytestmark = pytest.mark.unit

DOCS = ["Keeps two goldfish in the living room", "Has a brother who lives in Singapore", "Likes green tea"]


def _index() -> Bm25Index:
    return Bm25Index([tokenize(d) for d in DOCS])


def test_an_unseen_query_word_counts_for_nothing_by_default() -> None:
    # "where" is a stop word; "live" is held, "country" is held by no memory.
    index = _index()
    alone = lexical_coverage(index, tokenize("live"))
    with_unseen = lexical_coverage(index, tokenize("live country"))
    assert np.allclose(alone, with_unseen)
    assert with_unseen.max() == pytest.approx(alone.max())


def test_counted_an_unseen_word_lowers_every_coverage_by_its_idf_share() -> None:
    index = _index()
    tokens = tokenize("live country")
    plain = lexical_coverage(index, tokens)
    counted = lexical_coverage(index, tokens, count_unseen=True)
    held = index.idf(tokens[0])
    assert held > 0 and index.idf(tokens[1]) == 0.0
    assert index.unseen_idf() == pytest.approx(math.log1p((len(DOCS) + 0.5) / 0.5))
    assert np.allclose(counted, np.clip(index.scores(tokens) / (held + index.unseen_idf()), 0, 1))
    assert counted.max() < 0.5 < plain.max()


def test_counting_unseen_words_changes_nothing_when_every_word_is_held() -> None:
    index = _index()
    tokens = tokenize("goldfish brother")
    assert np.allclose(lexical_coverage(index, tokens), lexical_coverage(index, tokens, count_unseen=True))


def test_a_query_of_unseen_words_only_covers_nothing_either_way() -> None:
    index = _index()
    for count in (False, True):
        assert not lexical_coverage(index, tokenize("volcano"), count_unseen=count).any()
