"""Capacity dimensions, important limits and eviction planning (W8)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.models.rules.capacity import (
    GLOBAL_DIMENSION,
    TOTAL_DIMENSION,
    EvictionCandidate,
    EvictionPlan,
    app_dimension,
    dimension_for,
    dimensions_for,
    important_allowed,
    important_dimension,
    important_limit,
    limit_for,
    select_victims,
)
from engram.models.settings import CapacitySettings, Settings

pytestmark = pytest.mark.unit

CAP = Settings().capacity
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _candidate(
    memory_id: str, weight: float, recalled_days: float | None = None, *, important: bool = False
) -> EvictionCandidate:
    recalled = None if recalled_days is None else T0 + timedelta(days=recalled_days)
    return EvictionCandidate(memory_id, weight, recalled, important)


def test_dimension_names() -> None:
    assert dimension_for("") == GLOBAL_DIMENSION == "global"
    assert dimension_for("shop") == app_dimension("shop") == "app:shop"
    assert dimensions_for("") == ("global", TOTAL_DIMENSION)
    assert dimensions_for("shop") == ("app:shop", "total")
    assert important_dimension("app:shop") == "important:app:shop"
    with pytest.raises(ValueError, match="app_id"):
        app_dimension("")


def test_limits_by_dimension() -> None:
    assert limit_for("global", CAP) == 500
    assert limit_for("app:shop", CAP) == 200
    assert limit_for("total", CAP) == 2000
    assert limit_for("important:app:shop", CAP) == 40
    with pytest.raises(ValueError, match="dimension"):
        limit_for("nonsense", CAP)


def test_important_limit_is_20_percent_and_at_least_one() -> None:
    assert important_limit("global", CAP) == 100
    assert important_limit("app:a", CAP) == 40
    assert important_limit("total", CAP) == 400
    tiny = CapacitySettings(app_limit=3)
    assert important_limit("app:a", tiny) == 1
    assert important_limit("app:a", CapacitySettings(important_ratio=0.29, app_limit=100)) == 29


def test_important_allowed() -> None:
    assert important_allowed(40, "app:a", CAP)
    assert not important_allowed(41, "app:a", CAP)
    assert important_allowed(100, "global", CAP)
    assert not important_allowed(101, "global", CAP)


def test_below_limit_fits_without_victims() -> None:
    plan = select_victims([_candidate("a", 0.01)], count=9, limit=10, settings=CAP)
    assert plan == EvictionPlan(archive=(), delete=(), fits=True)
    assert plan.victims == ()


def test_full_dimension_evicts_down_to_90_percent() -> None:
    candidates = [_candidate(f"m{i:03d}", 0.2 + i / 1000) for i in range(200)]
    plan = select_victims(candidates, count=200, limit=200, settings=CAP)
    assert plan.fits
    assert len(plan.victims) == 20
    assert 200 - len(plan.victims) == math.floor(200 * 0.9)
    assert set(plan.victims) == {f"m{i:03d}" for i in range(20)}


def test_order_is_weight_then_last_recalled_with_never_recalled_first() -> None:
    candidates = [
        _candidate("recent", 0.3, recalled_days=10),
        _candidate("old", 0.3, recalled_days=1),
        _candidate("never", 0.3),
        _candidate("light", 0.2, recalled_days=20),
        _candidate("heavy", 0.9),
    ]
    settings = CapacitySettings(evict_target_ratio=0.5)
    plan = select_victims(candidates, count=10, limit=10, settings=settings)
    assert plan.victims == ("light", "never", "old", "recent", "heavy")
    plan = select_victims(candidates, count=8, limit=8, settings=settings)
    assert plan.victims == ("light", "never", "old", "recent")


def test_never_picks_important_memories() -> None:
    candidates = [
        _candidate("imp-light", 0.01, important=True),
        _candidate("a", 0.5),
        _candidate("b", 0.6),
        _candidate("imp-2", 0.02, important=True),
    ]
    plan = select_victims(candidates, count=10, limit=10, settings=CapacitySettings(evict_target_ratio=0.8))
    assert plan.fits
    assert plan.victims == ("a", "b")


def test_archives_above_threshold_and_deletes_the_rest() -> None:
    candidates = [_candidate("low", 0.05), _candidate("edge", 0.10), _candidate("mid", 0.4)]
    plan = select_victims(candidates, count=10, limit=10, settings=CapacitySettings(evict_target_ratio=0.7))
    assert plan.archive == ("mid",)
    assert plan.delete == ("low", "edge")
    assert plan.victims == ("mid", "low", "edge")


def test_only_important_memories_does_not_fit_and_evicts_nothing() -> None:
    candidates = [_candidate(f"i{i}", 0.9, important=True) for i in range(10)]
    plan = select_victims(candidates, count=10, limit=10, settings=CAP)
    assert not plan.fits
    assert plan.victims == ()


def test_too_few_candidates_to_make_room_evicts_nothing() -> None:
    # Over the limit by 3 (e.g. after the limit was lowered): two victims cannot make room for one more.
    plan = select_victims([_candidate("a", 0.2), _candidate("b", 0.3)], count=13, limit=10, settings=CAP)
    assert plan == EvictionPlan(fits=False)


def test_some_candidates_evicts_all_when_that_makes_room() -> None:
    candidates = [_candidate("a", 0.3), _candidate("b", 0.05), _candidate("imp", 0.01, important=True)]
    plan = select_victims(candidates, count=200, limit=200, settings=CAP)
    assert plan.fits
    assert plan.archive == ("a",)
    assert plan.delete == ("b",)


def test_target_is_below_limit_for_tiny_limits() -> None:
    plan = select_victims([_candidate("a", 0.5)], count=1, limit=1, settings=CAP)
    assert plan.fits
    assert plan.victims == ("a",)


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[list[EvictionCandidate], int, int, CapacitySettings]:
    limit = draw(st.integers(min_value=1, max_value=60))
    count = draw(st.integers(min_value=0, max_value=limit + 10))
    n_candidates = draw(st.integers(min_value=0, max_value=count))
    candidates = [
        EvictionCandidate(
            memory_id=f"m{i}",
            weight=draw(st.floats(min_value=0.0, max_value=1.0)),
            last_recalled_at=draw(st.none() | st.integers(0, 100).map(lambda d: T0 + timedelta(days=d))),
            is_important=draw(st.booleans()),
        )
        for i in range(n_candidates)
    ]
    settings = CapacitySettings(
        evict_target_ratio=draw(st.floats(min_value=0.05, max_value=0.99)),
        archive_threshold=draw(st.floats(min_value=0.0, max_value=1.0)),
    )
    return candidates, count, limit, settings


@given(_scenarios())
def test_eviction_invariants(scenario: tuple[list[EvictionCandidate], int, int, CapacitySettings]) -> None:
    candidates, count, limit, settings = scenario
    plan = select_victims(candidates, count, limit, settings)
    by_id = {c.memory_id: c for c in candidates}
    victims = [by_id[v] for v in plan.victims]
    ordinary = [c for c in candidates if not c.is_important]

    assert not any(v.is_important for v in victims)
    assert len(set(plan.victims)) == len(plan.victims)
    assert all(by_id[m].weight > settings.archive_threshold for m in plan.archive)
    assert all(by_id[m].weight <= settings.archive_threshold for m in plan.delete)

    if count < limit:
        assert plan.fits
        assert plan.victims == ()
        return
    if not plan.fits:
        assert plan.victims == ()
        assert count - len(ordinary) >= limit
        return
    assert count - len(victims) < limit
    target = math.floor(round(limit * settings.evict_target_ratio, 9))
    if len(ordinary) >= count - target:
        assert len(victims) == count - target
    else:
        assert len(victims) == len(ordinary)
    if victims:
        heaviest_victim = max(v.weight for v in victims)
        spared = [c for c in ordinary if c.memory_id not in plan.victims]
        assert all(c.weight >= heaviest_victim for c in spared)
