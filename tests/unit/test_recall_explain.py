"""The explanation's pure parts (#31): signal shares and the reason a hidden memory was left out."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engram.actors.isolation import RecallFilter, in_scope
from engram.actors.recall_explain import Scored, contributions, describable_scope, left_out_reason
from engram.models.api_explain import LeftOutReason, Signal
from engram.models.domain import Memory
from engram.models.enums import Level, Ownership, Status
from engram.storage.vector_filters import VectorScope
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def memory(**fields: object) -> Memory:
    base: dict[str, object] = {"memory_id": "m1", "user_id": "u1", "valid_at": NOW - timedelta(days=10)}
    return build_memory(NOW, **{**base, **fields})


def flt(**fields: object) -> RecallFilter:
    scope = VectorScope(user_id="u1", include_global=True, app_id="a", session_id=None)
    base: dict[str, object] = {
        "scope": scope,
        "tags": frozenset(),
        "entities": frozenset(),
        "include_archived": False,
        "as_of": None,
    }
    return RecallFilter(**{**base, **fields})  # type: ignore[arg-type]


def test_shares_sum_to_the_relevance_and_an_absent_signal_gives_its_weight_away() -> None:
    scored = Scored(
        memories=[memory(), memory(memory_id="m2")],
        semantic=np.array([0.8, 0.5]),
        lexical=np.array([0.4, np.nan]),
        entity=np.array([0.0, 0.0]),
        weights=np.tile([0.6, 0.3, 0.1], (2, 1)),
        relevance=np.array([0.6, 0.5]),
    )
    both = {s.signal: s for s in contributions(scored, 0)}
    assert sum(s.contribution for s in both.values()) == pytest.approx((0.6 * 0.8 + 0.3 * 0.4) / 1.0)
    only = {s.signal: s for s in contributions(scored, 1)}
    assert only[Signal.LEXICAL].value is None and only[Signal.LEXICAL].weight == 0
    assert only[Signal.SEMANTIC].weight == pytest.approx(0.6 / 0.7, abs=1e-6)
    assert sum(s.contribution for s in only.values()) == pytest.approx(0.5 * 0.6 / 0.7 + 0.0, abs=1e-5)


@pytest.mark.parametrize(
    ("fields", "recall", "reason"),
    [
        ({"status": Status.QUARANTINED}, {}, LeftOutReason.QUARANTINED),
        ({"ownership": Ownership.AGENT}, {"ownerships": {Ownership.USER}}, LeftOutReason.OUT_OF_SCOPE),
        ({"custom_tags": ["x"]}, {"tags": frozenset({"y"})}, LeftOutReason.OUT_OF_SCOPE),
        ({"entities": ["Paris"]}, {"entities": frozenset({"rome"})}, LeftOutReason.OUT_OF_SCOPE),
        ({}, {"as_of": NOW - timedelta(days=30)}, LeftOutReason.NOT_VALID_AT_AS_OF),
        ({"status": Status.SUPERSEDED, "invalid_at": NOW}, {}, LeftOutReason.SUPERSEDED),
        ({"status": Status.ARCHIVED, "archived_at": NOW}, {}, LeftOutReason.ARCHIVED),
        ({"invalid_at": NOW - timedelta(days=1)}, {}, LeftOutReason.EXPIRED),
        ({"expire_at": NOW - timedelta(days=1)}, {}, LeftOutReason.EXPIRED),
    ],
)
def test_each_reason(fields: dict[str, object], recall: dict[str, object], reason: LeftOutReason) -> None:
    base = flt()
    ownerships = recall.pop("ownerships", None)
    if ownerships is not None:
        base = dataclasses.replace(
            base, scope=dataclasses.replace(base.scope, ownerships=frozenset(ownerships))
        )  # type: ignore[arg-type]
    got, _, _ = left_out_reason(memory(**fields), dataclasses.replace(base, **recall), NOW, switched_off=None)
    assert got is reason


def test_an_app_switched_off_is_said_and_widens_only_to_the_scope_asked_for() -> None:
    asked = VectorScope(user_id="u1", include_global=True, app_id="a", session_id=None)
    narrowed = flt(scope=VectorScope(user_id="u1", include_global=True, app_id=None, session_id=None))
    of_app = memory(level=Level.APP, app_id="a")
    reason, detail, _ = left_out_reason(of_app, narrowed, NOW, switched_off=asked)
    assert reason is LeftOutReason.SWITCHED_OFF and detail is not None and "a" in detail
    describable = describable_scope(narrowed, asked)
    assert in_scope(describable, of_app)
    assert not in_scope(describable, memory(level=Level.APP, app_id="b"))
    assert not in_scope(describable, memory(user_id="u2"))
