"""The evolution set (#31) against the deterministic decisions: a changed value told in everyday
words supersedes, a fact that adds to another is added beside it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.actors.evolution_rules import Candidate, NewFact, decide
from engram.loadtest.evolution_cases import ADDED, CHANGED, Pair

pytestmark = pytest.mark.unit
WHEN = datetime(2026, 3, 1, tzinfo=UTC)


def _decided(pair: Pair) -> str:
    stored = Candidate("0", "m" * 32, pair.old, "old-hash", cosine=0.6, valid_at=WHEN)
    return decide(NewFact(pair.new, "new-hash", WHEN), [stored]).event


def test_the_set_is_large_and_bilingual() -> None:
    assert len(CHANGED) >= 40 and len(ADDED) >= 20
    for pairs in (CHANGED, ADDED):
        chinese = [p for p in pairs if any("\u4e00" <= ch <= "\u9fff" for ch in p.new)]
        assert 0 < len(chinese) < len(pairs)


@pytest.mark.parametrize("pair", CHANGED, ids=lambda p: p.new[:40])
def test_a_changed_value_supersedes_in_any_wording(pair: Pair) -> None:
    assert _decided(pair) == "SUPERSEDE"


@pytest.mark.parametrize("pair", ADDED, ids=lambda p: p.new[:40])
def test_an_additive_fact_is_added(pair: Pair) -> None:
    assert _decided(pair) == "ADD"
