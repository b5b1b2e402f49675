"""How a LangGraph item is written into a memory's content and tags, and read back (#29)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError, MatchCondition

from engram.integrations import langgraph_items as items
from engram.models.api_base import MAX_TAGS

pytestmark = pytest.mark.unit

labels = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="."),
    min_size=1,
    max_size=items.MAX_LABEL,
)


@given(namespace=st.lists(labels, min_size=1, max_size=items.MAX_DEPTH).map(tuple), key=labels)
def test_namespace_and_key_come_back_from_the_tags(namespace: tuple[str, ...], key: str) -> None:
    tags = items.tags_for(namespace, key)
    assert len(tags) <= MAX_TAGS and all(len(tag) <= 64 for tag in tags)
    assert items.namespace_of(tags) == namespace and items.key_of(tags) == key
    # The item's own tag and one tag per prefix, so a recall's tag filter can find either.
    assert items.id_tag(namespace, key) in tags
    assert all(items.prefix_tag(namespace[:depth]) in tags for depth in range(len(namespace) + 1))


def test_the_digest_tags_tell_items_and_prefixes_apart() -> None:
    assert items.id_tag(("a", "b"), "c") != items.id_tag(("a",), "b\x1fc")
    assert items.id_tag(("a",), "b") != items.id_tag(("a", "b"), "")
    assert items.prefix_tag(("a", "b")) != items.prefix_tag(("a\x1fb",))
    assert items.prefix_tag(()) == items.ITEM_TAG


@pytest.mark.parametrize("key", ["", "k" * (items.MAX_LABEL + 1), " padded", "padded "])
def test_keys_a_tag_cannot_hold_are_refused(key: str) -> None:
    with pytest.raises(InvalidNamespaceError, match="key"):
        items.tags_for(("u",), key)


def test_a_namespace_deeper_than_the_tags_allow_is_refused() -> None:
    with pytest.raises(InvalidNamespaceError, match="deeper"):
        items.tags_for(tuple(f"l{i}" for i in range(items.MAX_DEPTH + 1)), "k")


def test_a_value_round_trips_and_other_content_is_kept_as_text() -> None:
    value = {"text": "Prefers tea", "n": 3, "nested": {"a": [1, "二"]}}
    assert items.decode_value(items.encode_value(value)) == value
    assert items.decode_value('{"card": [REDACTED]}') == {"content": '{"card": [REDACTED]}'}
    assert items.decode_value('["a list"]') == {"content": '["a list"]'}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (None, True),
        ({"kind": "trip"}, True),
        ({"kind": "note"}, False),
        ({"n": {"$gt": 2, "$lte": 3}}, True),
        ({"n": {"$lt": 3}}, False),
        ({"n": {"$ne": 3}}, False),
        ({"missing": {"$ne": 1}}, True),
        ({"missing": 1}, False),
        ({"missing": {"$gt": 1}}, False),
        ({"meta.city": "Porto"}, True),
        ({"meta.city": {"$eq": "Lisbon"}}, False),
        ({"kind": {"$gt": 1}}, False),  # a string against a number: no match, no error
    ],
)
def test_the_search_filter(conditions: dict[str, object] | None, expected: bool) -> None:
    value = {"kind": "trip", "n": 3, "meta": {"city": "Porto"}}
    assert items.matches_filter(value, conditions) is expected


def test_an_unknown_filter_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown filter operator"):
        items.matches_filter({"n": 1}, {"n": {"$in": [1]}})


def test_the_template_names_the_user() -> None:
    template = items.check_template(("memories", items.USER))
    assert items.user_of(("memories", "alice", "notes"), template) == "alice"
    with pytest.raises(InvalidNamespaceError, match="does not match"):
        items.user_of(("notes", "alice"), template)
    with pytest.raises(InvalidNamespaceError, match="stops before"):
        items.user_of(("memories",), template)
    with pytest.raises(ValueError, match="exactly once"):
        items.check_template((items.USER, items.USER))


def test_namespace_conditions_and_the_user_they_name() -> None:
    template = (items.USER,)
    ns = ("alice", "notes", "japan")
    assert items.namespace_matches(ns, [MatchCondition("prefix", ("alice", "*"))])
    assert items.namespace_matches(ns, [MatchCondition("suffix", ("*", "japan"))])
    assert not items.namespace_matches(ns, [MatchCondition("suffix", ("india",))])
    assert not items.namespace_matches(("alice",), [MatchCondition("prefix", ("alice", "notes"))])
    assert items.user_of_conditions([MatchCondition("prefix", ("alice", "*"))], template) == "alice"
    with pytest.raises(InvalidNamespaceError, match="names the user"):
        items.user_of_conditions([MatchCondition("prefix", ("*",))], template)
    with pytest.raises(InvalidNamespaceError, match="does not match"):
        items.user_of_conditions([MatchCondition("prefix", ("notes", "alice"))], ("memories", items.USER))
