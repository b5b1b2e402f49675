"""The user profile's pure parts (L7): classifying facts into sections and picking the strongest."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from engram.actors.profile import classify_memories
from engram.actors.profile_kinds import profile_kind
from engram.models.domain import Memory
from engram.models.enums import Level, Ownership, Status
from engram.models.profile import Classified, ProfileKind, build_profile, eligible, select_facts
from engram.models.settings import DecaySettings
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ID, PREF, REL, ROUT, PLAN = (
    ProfileKind.IDENTITY,
    ProfileKind.PREFERENCES,
    ProfileKind.RELATIONSHIPS,
    ProfileKind.ROUTINES,
    ProfileKind.PLANS,
)


@pytest.mark.parametrize(
    ("fact", "kind", "slot"),
    [
        ("Lives in Lisbon", ID, "residence"),
        ("Moved to Porto last month", ID, "residence"),
        ("Works as a nurse at Santa Maria hospital", ID, "job"),  # a job, though it names a hospital
        ("Name is John", ID, "name"),
        ("Is allergic to peanuts", ID, None),
        ("住在北京", ID, "residence"),
        ("Loves jazz music", PREF, None),
        ("Prefers window seats on flights", PREF, None),
        ("Favorite color is blue", PREF, "favorite:color"),
        ("喜欢吃辣", PREF, None),
        ("Has a sister named Ana", REL, None),
        ("Is married", REL, "relationship"),
        ("有一个哥哥", REL, None),
        ("Goes running every morning", ROUT, None),
        ("每天早上跑步", ROUT, None),
        ("Goes swimming every Sunday", ROUT, None),
        ("Plays tennis on weekends", ROUT, None),
        ("每周六去爬山", ROUT, None),
        ("Plans to visit Japan next spring", PLAN, None),
        ("Has a dentist appointment next Tuesday", PLAN, None),
        ("下周要去上海出差", PLAN, None),
    ],
)
def test_facts_fall_into_their_section(fact: str, kind: ProfileKind, slot: str | None) -> None:
    assert profile_kind(fact) == (kind, slot)


@pytest.mark.parametrize("fact", ["Went to the cinema yesterday", "Hello there", "The weather was nice"])
def test_events_and_small_talk_are_in_no_section(fact: str) -> None:
    assert profile_kind(fact) is None


def _memory(content: str, **fields: object) -> Memory:
    memory_id = hashlib.md5(content.encode(), usedforsecurity=False).hexdigest()
    return build_memory(T0, **{"content": content, "memory_id": memory_id, **fields})


def test_only_current_active_facts_about_the_user_are_eligible() -> None:
    now = T0 + timedelta(days=1)
    assert eligible(_memory("Lives in Porto"), None, now)
    assert not eligible(_memory("Lives in Lisbon", status=Status.SUPERSEDED), None, now)
    assert not eligible(_memory("Lives in Lisbon", status=Status.ARCHIVED), None, now)
    assert not eligible(_memory("Lives in Lisbon", invalid_at=T0), None, now)
    assert not eligible(_memory("Flight on Monday", expire_at=T0), None, now)
    assert not eligible(_memory("Is a helpful assistant", ownership=Ownership.AGENT), None, now)
    app_fact = _memory("Prefers aisle seats", level=Level.APP, app_id="travel")
    assert not eligible(app_fact, None, now) and not eligible(app_fact, "shop", now)
    assert eligible(app_fact, "travel", now)
    session = _memory("Wants a cab now", level=Level.SESSION, app_id="travel", session_id="s1")
    assert not eligible(session, "travel", now)


def test_one_fact_per_attribute_slot_the_newest() -> None:
    old = _memory("Lives in Lisbon", valid_at=T0)
    new = _memory("Moved to Porto", valid_at=T0 + timedelta(days=30))
    picked = select_facts(
        [Classified(new, ID, "residence"), Classified(old, ID, "residence")],
        T0 + timedelta(days=31),
        DecaySettings(),
        5,
    )
    assert [f.content for f in picked[ID]] == ["Moved to Porto"]


def test_strongest_first_and_bounded_per_kind() -> None:
    facts = [_memory(f"Likes thing {i}", weight=0.3 + i / 20) for i in range(8)]
    facts.append(_memory("Likes marked things", weight=0.2, is_important=True))
    picked = select_facts([Classified(m, PREF) for m in facts], T0, DecaySettings(), 3)
    assert [f.content for f in picked[PREF]] == ["Likes marked things", "Likes thing 7", "Likes thing 6"]
    assert all(picked[k] == [] for k in ProfileKind if k is not PREF)


def test_build_profile_from_memories_skips_superseded_and_unclassified() -> None:
    now = T0 + timedelta(days=2)
    memories = [
        _memory("Lives in Lisbon", status=Status.SUPERSEDED),
        _memory("Moved to Porto last month"),
        _memory("Works as a nurse"),
        _memory("Loves jazz music"),
        _memory("Prefers window seats on flights"),
        _memory("Has a sister named Ana"),
        _memory("Went to the cinema yesterday"),
    ]
    profile = build_profile("u1", None, classify_memories(memories, None, now), now, DecaySettings(), 5)
    assert sorted(f.content for f in profile.identity) == ["Moved to Porto last month", "Works as a nurse"]
    assert sorted(f.content for f in profile.preferences) == [
        "Loves jazz music",
        "Prefers window seats on flights",
    ]
    assert [f.content for f in profile.relationships] == ["Has a sister named Ana"]
    assert profile.routines == [] and profile.plans == []
    assert "Lives in Lisbon" not in {f.content for f in profile.facts()}
    assert profile.refreshed_at == now and profile.user_id == "u1"


def test_same_facts_ignores_the_refresh_time_but_not_the_order() -> None:
    now = T0 + timedelta(days=1)
    memories = [_memory("Loves jazz music"), _memory("Has a sister named Ana")]
    first = build_profile("u1", None, classify_memories(memories, None, now), now, DecaySettings(), 5)
    later = build_profile(
        "u1", None, classify_memories(memories, None, now), now + timedelta(hours=1), DecaySettings(), 5
    )
    assert first.same_facts(later)
    fewer = build_profile("u1", None, classify_memories(memories[:1], None, now), now, DecaySettings(), 5)
    assert not first.same_facts(fewer)
