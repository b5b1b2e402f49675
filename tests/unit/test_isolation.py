"""Isolation resolver: scope rules, temporal validity and tag filters (P4, R1, R6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.actors import isolation
from engram.models.api import RecallRequest
from engram.models.domain import Memory
from engram.models.enums import Level, Ownership, Status
from engram.models.errors import EngramError, ErrorCode
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def memory(level: Level, app_id: str = "", session_id: str | None = None, **fields: object) -> Memory:
    base: dict[str, object] = {"content": "c", "valid_at": NOW - timedelta(days=10)}
    return build_memory(NOW, level=level, app_id=app_id, session_id=session_id, **{**base, **fields})


def resolve(**request: object) -> isolation.RecallFilter:
    return isolation.resolve(RecallRequest(user_id="u", query="q", **request))


GLOBAL = memory(Level.GLOBAL)
APP_A = memory(Level.APP, "a")
SESSION_A = memory(Level.SESSION, "a", "s1")
SESSION_NO_APP = memory(Level.SESSION, "", "s1")


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ({}, {"GLOBAL"}),
        ({"include_global": False}, set()),
        ({"app_id": "a"}, {"GLOBAL", "APP_A"}),
        ({"app_id": "b"}, {"GLOBAL"}),
        ({"app_id": "a", "session_id": "s1"}, {"GLOBAL", "APP_A", "SESSION_A", "SESSION_NO_APP"}),
        ({"app_id": "b", "session_id": "s1"}, {"GLOBAL", "SESSION_NO_APP"}),
        ({"session_id": "s1"}, {"GLOBAL", "SESSION_NO_APP"}),
        ({"app_id": "a", "session_id": "s2"}, {"GLOBAL", "APP_A"}),
        # A session memory without an app is one of the user's global memories (P4, #27).
        ({"app_id": "a", "session_id": "s1", "include_global": False}, {"APP_A", "SESSION_A"}),
        ({"session_id": "s1", "include_global": False}, set()),
    ],
)
def test_scope_visibility(scope: dict[str, object], expected: set[str]) -> None:
    flt = resolve(scope=scope)
    named = {"GLOBAL": GLOBAL, "APP_A": APP_A, "SESSION_A": SESSION_A, "SESSION_NO_APP": SESSION_NO_APP}
    assert {name for name, m in named.items() if isolation.visible(flt, m, NOW)} == expected


def test_other_users_are_never_visible() -> None:
    stranger = memory(Level.GLOBAL, user_id="v")
    assert not isolation.visible(resolve(scope={"app_id": "a", "session_id": "s1"}), stranger, NOW)


def test_cross_app_is_not_enabled() -> None:
    with pytest.raises(EngramError) as err:
        resolve(scope={"cross_app": {"enabled": True}})
    assert err.value.code is ErrorCode.CROSS_APP_NOT_ENABLED


def test_filters_match_any_listed_value() -> None:
    tagged = memory(Level.GLOBAL, custom_tags=["x", "y"], ownership=Ownership.AGENT)
    assert isolation.visible(resolve(filter={"custom_tags": ["y", "z"]}), tagged, NOW)
    assert not isolation.visible(resolve(filter={"custom_tags": ["z"]}), tagged, NOW)
    assert isolation.visible(resolve(filter={"ownership": ["AGENT", "USER"]}), tagged, NOW)
    assert not isolation.visible(resolve(filter={"ownership": ["USER"]}), tagged, NOW)
    assert not isolation.visible(resolve(filter={"mem_type": ["EPISODIC"]}), tagged, NOW)


def test_current_facts_by_default_and_history_with_as_of() -> None:
    old = memory(
        Level.GLOBAL,
        status=Status.SUPERSEDED,
        valid_at=NOW - timedelta(days=400),
        invalid_at=NOW - timedelta(days=30),
    )
    new = memory(Level.GLOBAL, valid_at=NOW - timedelta(days=30))
    assert not isolation.visible(resolve(), old, NOW)
    assert isolation.visible(resolve(), new, NOW)
    then = resolve(as_of=NOW - timedelta(days=100))
    assert isolation.visible(then, old, NOW) and not isolation.visible(then, new, NOW)
    boundary = resolve(as_of=NOW - timedelta(days=30))
    assert not isolation.visible(boundary, old, NOW) and isolation.visible(boundary, new, NOW)


def test_expired_deleted_and_archived() -> None:
    expired = memory(Level.GLOBAL, expire_at=NOW)
    deleted = memory(Level.GLOBAL, status=Status.DELETED)
    archived = memory(Level.GLOBAL, status=Status.ARCHIVED)
    assert not isolation.visible(resolve(), expired, NOW)
    assert not isolation.visible(resolve(), deleted, NOW)
    assert not isolation.visible(resolve(include_archived=True), deleted, NOW)
    assert not isolation.visible(resolve(), archived, NOW)
    assert isolation.visible(resolve(include_archived=True), archived, NOW)
