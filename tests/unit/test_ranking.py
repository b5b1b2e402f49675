"""Recall ranking (R2): over-fetch, cosine mapping, stage-1 filter and stage-2 score."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.models.rules.ranking import Ranked, RankInput, cosine_to_relevance, overfetch_limit, rank
from engram.models.settings import RecallSettings, Settings

pytestmark = pytest.mark.unit

RECALL = Settings().recall


def test_overfetch_is_four_times_top_k_but_at_least_60() -> None:
    assert overfetch_limit(10, RECALL) == 60
    assert overfetch_limit(15, RECALL) == 60
    assert overfetch_limit(16, RECALL) == 64
    assert overfetch_limit(100, RECALL) == 400
    assert overfetch_limit(5, RecallSettings(overfetch_factor=2, overfetch_min=8)) == 10


def test_cosine_mapping_is_linear_and_clipped() -> None:
    settings = RecallSettings(cosine_floor=0.2, cosine_ceiling=0.6)
    assert cosine_to_relevance(0.2, settings) == 0.0
    assert cosine_to_relevance(0.4, settings) == pytest.approx(0.5)
    assert cosine_to_relevance(0.6, settings) == pytest.approx(1.0)
    assert cosine_to_relevance(-0.9, settings) == 0.0
    assert cosine_to_relevance(0.95, settings) == 1.0
    assert cosine_to_relevance(float("nan"), settings) == 0.0
    assert cosine_to_relevance(0.3, RECALL) == pytest.approx(0.5)


@given(st.floats(min_value=-1.0, max_value=1.0), st.floats(min_value=-1.0, max_value=1.0))
def test_cosine_mapping_is_monotonic_and_in_unit_range(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert 0.0 <= cosine_to_relevance(low, RECALL) <= cosine_to_relevance(high, RECALL) <= 1.0


def test_stage_one_drops_low_relevance() -> None:
    items = [RankInput("keep", 0.30, 0.1), RankInput("drop", 0.29, 1.0)]
    result = rank(items, top_k=10, min_relevance=0.3, settings=RECALL)
    assert [r.memory_id for r in result] == ["keep"]


def test_score_is_weighted_sum() -> None:
    [ranked] = rank([RankInput("a", 0.5, 0.8)], top_k=1, min_relevance=0.3, settings=RECALL)
    assert (ranked.memory_id, ranked.relevance, ranked.weight) == ("a", 0.5, 0.8)
    assert ranked.score == pytest.approx(0.7 * 0.5 + 0.3 * 0.8)
    assert isinstance(ranked, Ranked)


def test_order_follows_the_configured_weights() -> None:
    items = [RankInput("relevant", 0.9, 0.1), RankInput("strong", 0.5, 0.9)]
    default = rank(items, top_k=2, min_relevance=0.3, settings=Settings().recall)
    assert [r.memory_id for r in default] == ["relevant", "strong"]
    weight_heavy = Settings(recall=RecallSettings(relevance_weight=0.3, weight_weight=0.7)).recall
    flipped = rank(items, top_k=2, min_relevance=0.3, settings=weight_heavy)
    assert [r.memory_id for r in flipped] == ["strong", "relevant"]


def test_ties_break_by_relevance_then_id() -> None:
    settings = RecallSettings(relevance_weight=0.5, weight_weight=0.5)
    items = [RankInput("b", 0.5, 0.5), RankInput("a", 0.5, 0.5), RankInput("c", 0.6, 0.4)]
    result = rank(items, top_k=3, min_relevance=0.0, settings=settings)
    assert [r.memory_id for r in result] == ["c", "a", "b"]


def test_top_k_cut() -> None:
    items = [RankInput(f"m{i}", 0.3 + i / 100, 0.5) for i in range(20)]
    result = rank(iter(items), top_k=5, min_relevance=0.3, settings=RECALL)
    assert [r.memory_id for r in result] == ["m19", "m18", "m17", "m16", "m15"]
    assert rank(items, top_k=0, min_relevance=0.3, settings=RECALL) == []


@given(
    st.lists(
        st.builds(
            RankInput,
            memory_id=st.text(min_size=1, max_size=4),
            relevance=st.floats(min_value=0, max_value=1),
            weight=st.floats(min_value=0, max_value=1),
        ),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=40),
    st.floats(min_value=0, max_value=1),
)
def test_rank_properties(items: list[RankInput], top_k: int, min_relevance: float) -> None:
    result = rank(items, top_k=top_k, min_relevance=min_relevance, settings=RECALL)
    passing = [i for i in items if i.relevance >= min_relevance]
    assert len(result) == min(top_k, len(passing))
    assert all(r.relevance >= min_relevance for r in result)
    scores = [r.score for r in result]
    assert scores == sorted(scores, reverse=True)
    expected = sorted(
        (RECALL.relevance_weight * i.relevance + RECALL.weight_weight * i.weight for i in passing),
        reverse=True,
    )
    assert scores == expected[:top_k]
