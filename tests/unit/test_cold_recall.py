"""Cold recall's pure parts (#30): which recalls may be answered cold, the nearest visible copies,
and the doorkeeper that decides which cold users earn a snapshot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
import pytest

from engram.actors import isolation
from engram.actors.cold_recall import answers_cold, candidates
from engram.actors.snapshot import SnapshotCache, UserSnapshot, assemble
from engram.models.api import RecallRequest
from engram.models.enums import Level, MemType, Ownership, Status
from engram.models.settings import RecallSettings
from engram.storage.vector_copies import PlacedCopy

pytestmark = pytest.mark.unit
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _copy(memory_id: str, direction: list[float], **fields: Any) -> PlacedCopy:
    values: dict[str, Any] = {
        "memory_id": memory_id,
        "user_id": "u1",
        "app_id": "",
        "session_id": None,
        "level": Level.GLOBAL,
        "ownership": Ownership.USER,
        "mem_type": MemType.SEMANTIC,
        "status": Status.ACTIVE,
        "valid_stored": NOW - timedelta(days=1),
        "invalid_at": None,
        "expire_at": None,
        "embedding_model": "m",
        "content": f"note {memory_id}",
        "context": None,
        "vector": np.asarray(direction, dtype=np.float32),
    }
    values.update(fields)
    return PlacedCopy(**values)


def _filter(**request: Any) -> isolation.RecallFilter:
    return isolation.resolve(RecallRequest.model_validate({"user_id": "u1", "query": "q", **request}))


def test_tag_and_entity_filters_and_explanations_load_the_snapshot() -> None:
    settings = RecallSettings()
    plain = RecallRequest(user_id="u1", query="q")
    assert answers_cold(plain, isolation.resolve(plain), settings)
    for extra in ({"explain": True}, {"filter": {"custom_tags": ["a"]}}, {"filter": {"entities": ["Kyoto"]}}):
        request = RecallRequest.model_validate({"user_id": "u1", "query": "q", **extra})
        assert not answers_cold(request, isolation.resolve(request), settings)
    assert not answers_cold(plain, isolation.resolve(plain), RecallSettings(cold_candidates=0))


def test_the_nearest_visible_copies_come_nearest_first_and_never_an_invisible_one() -> None:
    placed = [
        _copy("far", [0.0, 1.0]),
        _copy("near", [1.0, 0.0]),
        _copy("middle", [0.7, 0.7]),
        _copy("other-app", [1.0, 0.0], level=Level.APP, app_id="shop"),
        _copy("superseded", [1.0, 0.0], status=Status.SUPERSEDED, invalid_at=NOW - timedelta(hours=1)),
        _copy("expired", [1.0, 0.0], expire_at=NOW - timedelta(minutes=1)),
        _copy("agent", [1.0, 0.0], ownership=Ownership.AGENT),
        _copy("no-copy", [1.0, 0.0], vector=None),
    ]
    query = np.asarray([1.0, 0.0], dtype=np.float32)
    nearest = candidates(placed, _filter(filter={"ownership": ["USER"]}), query, "zz", NOW, limit=10)
    assert [p.memory_id for p in nearest] == ["near", "middle", "far"]
    two = candidates(placed, _filter(), query, "zz", NOW, limit=2)
    assert [p.memory_id for p in two] == ["near", "agent"]
    in_app = candidates(placed, _filter(scope={"app_id": "shop"}), query, "zz", NOW, limit=2)
    assert {p.memory_id for p in in_app} == {"near", "other-app"}
    # As of before the supersession, the superseded fact was the current one.
    then = candidates(placed, _filter(as_of=NOW - timedelta(hours=2)), query, "zz", NOW, limit=10)
    assert "superseded" in {p.memory_id for p in then}
    assert candidates(placed, _filter(), query, "zz", NOW, limit=0) == []


def test_half_the_candidates_hold_the_querys_rarer_words_whatever_their_cosine() -> None:
    placed = [_copy(f"n{i}", [1.0, 0.1 * i], content=f"Went hiking with friends, day {i}") for i in range(6)]
    placed.append(_copy("far", [0.0, 1.0], content="Adopted a greyhound named Biscuit"))
    query = np.asarray([1.0, 0.0], dtype=np.float32)
    picked = [p.memory_id for p in candidates(placed, _filter(), query, "Who is Biscuit?", NOW, limit=4)]
    assert picked[0] == "far" and picked[1:] == ["n0", "n1", "n2"]
    # "hiking" is in every note: found in all, it ranks none above another, and cosine decides.
    hikes = candidates(placed, _filter(), query, "Where did I go hiking, Biscuit?", NOW, limit=4)
    assert [p.memory_id for p in hikes][:2] == ["far", "n0"]
    assert candidates(placed, _filter(), query, "the and of", NOW, limit=2)[0].memory_id == "n0"


class _BareCache(SnapshotCache):
    """A snapshot cache without stores: its subclasses say what a load or a read does."""

    def __init__(self, admit_after: int, max_users: int) -> None:
        super().__init__(
            cast(Any, None),
            cast(Any, None),
            cast(Any, None),
            max_users=max_users,
            ttl_s=60,
            admit_after=admit_after,
        )


class _CountingCache(_BareCache):
    """The cache's doorkeeper with loads that only count (and wait while ``gate`` is closed)."""

    def __init__(self, admit_after: int, max_users: int = 3) -> None:
        super().__init__(admit_after, max_users)
        self.loaded: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def load(self, user_id: str) -> UserSnapshot:
        await self.gate.wait()
        self.loaded.append(user_id)
        return cast(UserSnapshot, None)


async def test_a_cold_user_earns_a_snapshot_by_coming_back_while_remembered() -> None:
    cache = _CountingCache(admit_after=2, max_users=3)
    cache.missed("a")
    await cache.settled()
    assert cache.loaded == []
    cache.missed("a")
    await cache.settled()
    assert cache.loaded == ["a"] and cache.background_loads == 1
    # Four others pass: "b" is forgotten (the doorkeeper holds max_users), so its return counts 1.
    cache.missed("b")
    for other in ("c", "d", "e"):
        cache.missed(other)
    cache.missed("b")
    await cache.settled()
    assert cache.loaded == ["a"] and cache.colds == 7
    assert cache.counts() == {**SnapshotCache.nothing(), "colds": 7.0, "loads": 0.0, "background_loads": 1.0}


async def test_background_loads_are_bounded_and_a_busy_cache_tries_again_next_time() -> None:
    cache = _CountingCache(admit_after=1, max_users=10)
    cache.gate.clear()
    for user in ("a", "b", "c"):
        cache.missed(user)
    assert sorted(cache._loading) == ["a", "b"]  # MAX_BACKGROUND_LOADS
    cache.missed("a")  # already loading: not started twice
    cache.gate.set()
    await cache.settled()
    assert sorted(cache.loaded) == ["a", "b"]
    cache.missed("c")  # turned away while busy: its next cold recall starts its load
    await cache.settled()
    assert sorted(cache.loaded) == ["a", "b", "c"]


class _SizedCache(_BareCache):
    """A cache whose reads build empty snapshots and count."""

    def __init__(self, max_users: int, admit_after: int = 2) -> None:
        super().__init__(admit_after, max_users)
        self.reads: list[str] = []

    async def _read(self, user_id: str) -> UserSnapshot:
        self.reads.append(user_id)
        self.loads += 1
        return assemble(1, 0.0, [], [], 4)


async def test_a_full_cache_holds_a_loaded_user_only_when_it_comes_back() -> None:
    cache = _SizedCache(max_users=2)
    for user in ("hot1", "hot2"):  # room left: held at once
        await cache.load_on_demand(user)
    assert list(cache._cache) == ["hot1", "hot2"]
    # Full: users recalled once are answered from the snapshot built for them and not held.
    for user in ("once1", "once2", "once3"):
        await cache.load_on_demand(user)
    assert list(cache._cache) == ["hot1", "hot2"] and cache.loads == 5
    # Coming back (the second recall while remembered) earns a place, pushing out the oldest.
    await cache.load_on_demand("once3")
    assert list(cache._cache) == ["hot2", "once3"]
    # A plain load (the warm-up, a filtered recall) holds whatever the cache held before.
    await cache.load("other")
    assert list(cache._cache) == ["once3", "other"]
