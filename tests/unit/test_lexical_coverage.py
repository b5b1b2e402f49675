"""Lexical coverage (``actors.recall.lexical_coverage``): the share of a query's idf a memory holds,
and how a query word that no memory holds counts in a mixed-language store (#31)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from engram.actors.lexical import Bm25Index, tokenize
from engram.actors.recall import lexical_coverage
from engram.actors.snapshot import UserSnapshot, assemble
from tests.support.memories import build_memory

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


def _snapshot(contents: list[str]) -> UserSnapshot:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    memories = [build_memory(now, memory_id=f"m{i}", user_id="u1", content=c) for i, c in enumerate(contents)]
    return assemble(1, 0.0, memories, [np.ones(4, dtype=np.float32) / 2 for _ in memories], 4)


def test_a_long_memory_holding_every_query_word_covers_it_as_fully_as_a_short_one() -> None:
    # Recall's lexicon has no length normalisation (actors.snapshot.LENGTH_NORMALISATION): with
    # BM25's b = 0.75 the short memory holding one of the two words ranked above the long one
    # holding both (LoCoMo's evidence turns are often the long ones).
    snapshot = _snapshot(
        [
            "Melanie: We went camping in the mountains last weekend with the kids and roasted "
            "marshmallows around the fire, and the view from the top of the hike was amazing",
            "Melanie: camping is fun",
            "Caroline: I painted a sunset",
        ]
    )
    coverage = lexical_coverage(snapshot.lexicon, tokenize("marshmallows camping"))
    assert coverage[0] == pytest.approx(1.0)
    assert coverage[0] > coverage[1] > coverage[2] == 0.0
    textbook = Bm25Index([tokenize(m.content or "") for m in snapshot.memories])
    assert snapshot.lexicon.b == 0.0 and textbook.b == 0.75
