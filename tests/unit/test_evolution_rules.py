"""Deterministic evolution (W4, W5): duplicates, same meaning, contradictions, merges, ADD."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.actors.evolution_rules import Candidate, NewFact, RuleDecision, contradicts, decide

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _old(text: str, cosine: float = 0.8, ref: str = "0", content_hash: str | None = None) -> Candidate:
    return Candidate(ref, f"mem-{ref}", text, content_hash or f"hash:{text}", cosine, NOW)


def _new(text: str, content_hash: str | None = None) -> NewFact:
    return NewFact(text, content_hash or f"hash:{text}", NOW)


def _decide(old: str, new: str, cosine: float = 0.8) -> RuleDecision:
    return decide(_new(new), [_old(old, cosine)])


def test_same_hash_is_a_duplicate() -> None:
    candidate = _old("Likes tea", content_hash="h1")
    decision = decide(_new("likes tea.", content_hash="h1"), [_old("Lives in Paris", 0.9, "1"), candidate])
    assert (decision.event, decision.target, decision.reason) == ("NONE", candidate, "duplicate content")


def test_high_cosine_is_a_semantic_duplicate() -> None:
    decision = _decide("Enjoys hiking in the Alps", "Goes hiking in the Alps", cosine=0.97)
    assert decision.event == "NONE"
    assert decision.reason.startswith("semantic duplicate")
    assert _decide("Enjoys hiking", "Goes hiking", cosine=0.94).event == "ADD"
    assert decide(_new("Goes hiking"), [_old("Enjoys hiking", 0.94)], dedup_threshold=0.9).event == "NONE"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Likes cheese pizza", "Loves cheese pizza"),
        ("Likes cheese pizza", "Enjoys the cheese pizza!"),
        ("Likes cheese pizza and chicken pizza", "Loves chicken pizza"),
        ("喜欢芝士披萨", "爱芝士披萨"),
        ("Lives in Beijing", "住在北京"),
        ("住在北京市朝阳区", "住在北京"),
    ],
)
def test_same_meaning_is_none(old: str, new: str) -> None:
    decision = _decide(old, new)
    assert decision.event == "NONE"
    assert decision.reason.startswith("same meaning")
    assert decision.target is not None


@pytest.mark.parametrize(
    ("old", "new", "merged"),
    [
        ("likes cheese pizza", "likes chicken pizza", "likes cheese pizza and chicken pizza"),
        ("Likes cheese pizza", "Loves chicken pizza", "Likes cheese pizza and chicken pizza"),
        (
            "Likes cheese pizza and chicken pizza",
            "Likes veggie pizza",
            "Likes cheese pizza, chicken pizza and veggie pizza",
        ),
        ("喜欢芝士披萨", "喜欢鸡肉披萨", "喜欢芝士披萨和鸡肉披萨"),
        ("喜欢红茶", "喜欢绿茶", "喜欢红茶和绿茶"),
    ],
)
def test_related_preferences_are_merged(old: str, new: str, merged: str) -> None:
    decision = _decide(old, new)
    assert decision.event == "UPDATE"
    assert decision.merged_text == merged
    assert decision.target is not None
    assert decision.target.text == old


@pytest.mark.parametrize(
    ("old", "new", "attribute"),
    [
        ("Lives in Beijing", "Moved to Hangzhou", "residence"),
        ("住在北京", "搬到了杭州", "residence"),
        ("Lives in Beijing", "搬到了杭州", "residence"),
        ("Works at Google", "Works at Meta", "employer"),
        ("Is a software engineer", "Works as a product manager", "job"),
        ("Is 30 years old", "Is 31 years old", "age"),
        ("Favorite color is blue", "Favorite color is green", "favorite"),
        ("Is single", "Got married", "relationship"),
    ],
)
def test_changed_attributes_supersede(old: str, new: str, attribute: str) -> None:
    decision = _decide(old, new)
    assert decision.event == "SUPERSEDE"
    assert decision.target is not None
    assert decision.target.text == old
    assert attribute in decision.reason


def test_reversed_preference_supersedes() -> None:
    assert _decide("Likes cheese pizza", "Dislikes cheese pizza").event == "SUPERSEDE"
    assert _decide("喜欢香菜", "讨厌香菜").event == "SUPERSEDE"
    assert _decide("Hates olives", "Loves olives").reason == "preference reversed"


def test_more_specific_attribute_updates() -> None:
    decision = _decide("住在北京", "住在北京市朝阳区")
    assert (decision.event, decision.merged_text) == ("UPDATE", "住在北京市朝阳区")
    assert _decide("Is an engineer", "Is a software engineer").event == "UPDATE"
    # Names and ages do not nest: a shorter name is another name.
    assert _decide("Name is John", "Name is Jo").event == "SUPERSEDE"
    assert _decide("Is 30 years old", "Is 3 years old").event == "SUPERSEDE"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Likes sushi", "Likes cheese pizza"),
        ("Likes pizza", "Likes cheese pizza"),
        ("Lives in Beijing", "Works at Google"),
        ("Name is John", "Has a dog"),
        ("喜欢火锅", "喜欢烧烤"),
    ],
)
def test_unrelated_facts_are_added(old: str, new: str) -> None:
    decision = _decide(old, new)
    assert (decision.event, decision.target, decision.merged_text) == ("ADD", None, None)


def test_no_candidates_is_add() -> None:
    assert decide(_new("Likes tea"), []).event == "ADD"


def test_the_most_similar_matching_candidate_is_chosen() -> None:
    far = _old("Lives in Shanghai", 0.6, "far")
    near = _old("Lives in Beijing", 0.9, "near")
    unrelated = _old("Likes tea", 0.93, "tea")
    decision = decide(_new("Moved to Hangzhou"), [far, unrelated, near])
    assert decision.event == "SUPERSEDE"
    assert decision.target == near


def test_reasons_do_not_quote_user_content() -> None:
    decisions = [
        _decide("Favorite band is Secret Band", "Favorite band is Hidden Band"),
        _decide("Likes secret pizza", "Likes hidden pizza"),
        _decide("Lives in Secretville", "Moved to Hiddentown"),
    ]
    for decision in decisions:
        assert "secret" not in decision.reason.casefold()
        assert "hidden" not in decision.reason.casefold()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Lives in Beijing", "Moved to Hangzhou"),
        ("住在北京", "搬到了杭州"),
        ("Likes cheese pizza", "Dislikes cheese pizza"),
        ("喜欢吃香菜", "不吃香菜"),
        ("Name is John", "Name is Jack"),
        ("Works at Google", "在腾讯工作"),
    ],
)
def test_contradictions(a: str, b: str) -> None:
    assert contradicts(a, b)
    assert contradicts(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Likes cheese pizza", "Loves cheese pizza"),
        ("Likes cheese pizza", "Likes chicken pizza"),
        ("Likes cheese pizza", "Dislikes olives"),
        ("Lives in Beijing", "住在北京"),
        ("Lives in Beijing", "Works at Google"),
        ("Is a software engineer", "Likes tea"),
        ("Has a dog", "Has a cat"),
    ],
)
def test_non_contradictions(a: str, b: str) -> None:
    assert not contradicts(a, b)


FACTS = [
    "Likes cheese pizza",
    "Loves chicken pizza",
    "Dislikes cheese pizza",
    "Lives in Beijing",
    "Moved to Hangzhou",
    "住在北京",
    "搬到了杭州",
    "喜欢芝士披萨",
    "喜欢鸡肉披萨",
    "讨厌芝士披萨",
    "Works at Google",
    "Name is John",
    "Has a dog",
    "Is 30 years old",
]


@given(st.sampled_from(FACTS), st.sampled_from(FACTS))
def test_contradicts_is_symmetric(a: str, b: str) -> None:
    assert contradicts(a, b) == contradicts(b, a)


@given(
    st.sampled_from(FACTS),
    st.lists(st.tuples(st.sampled_from(FACTS), st.floats(min_value=-1.0, max_value=1.0)), max_size=10),
)
def test_decisions_only_cite_given_candidates(new: str, olds: list[tuple[str, float]]) -> None:
    candidates = [_old(text, cosine, str(i)) for i, (text, cosine) in enumerate(olds)]
    decision = decide(_new(new), candidates)
    if decision.event == "ADD":
        assert decision.target is None
    else:
        assert decision.target in candidates
    assert (decision.merged_text is not None) == (decision.event == "UPDATE")
    if any(text == new for text, _ in olds):
        assert decision.event == "NONE"
