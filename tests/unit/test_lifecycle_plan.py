"""The sweep's pure decisions (L1, L2) and the reconcile arithmetic (L3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.lifecycle.plan import Action, SweepCounts, SweepRow, count, decide
from engram.lifecycle.reconcile import counter_drift, expected_counters
from engram.models.enums import Status
from engram.models.settings import Settings

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(status: Status = Status.ACTIVE, **fields: object) -> SweepRow:
    values: dict[str, object] = {
        "memory_id": "m",
        "app_id": "",
        "status": status,
        "weight": 0.8,
        "weight_at": T0,
        "is_important": False,
        "custom_tags": [],
        "expire_at": None,
        "archived_at": None,
        "deleted_at": None,
    }
    values.update(fields)
    return SweepRow(**values)  # type: ignore[arg-type]


def days(n: float) -> datetime:
    return T0 + timedelta(days=n)


def test_an_unrecalled_semantic_memory_fades_out_after_day_90_not_before() -> None:
    settings = Settings()
    assert decide(row(), days(89), settings).action is Action.DECAY
    assert decide(row(), days(90), settings).action is Action.DECAY  # exactly 0.10 is not below it
    verdict = decide(row(), days(90.5), settings)
    assert verdict.action is Action.ARCHIVE_FADED
    assert verdict.weight is not None and verdict.weight < 0.10


def test_important_decays_ten_times_slower_and_persona_not_at_all() -> None:
    settings = Settings()
    assert decide(row(weight=0.9, is_important=True), days(900), settings).action is Action.DECAY
    assert decide(row(weight=0.9, is_important=True), days(960), settings).action is Action.ARCHIVE_FADED
    assert decide(row(custom_tags=["Persona"]), days(5000), settings).action is Action.KEEP


def test_expiry_purge_and_retention_periods_come_from_settings() -> None:
    settings = Settings(lifecycle={"purge_archived_after_days": 10, "purge_deleted_after_days": 2})
    assert decide(row(expire_at=days(1)), days(1), settings).action is Action.ARCHIVE_EXPIRED
    assert decide(row(expire_at=days(2)), days(1), settings).action is Action.DECAY
    archived = row(Status.ARCHIVED, archived_at=days(0))
    assert decide(archived, days(9.9), settings).action is Action.KEEP
    assert decide(archived, days(10), settings).action is Action.PURGE_ARCHIVED
    deleted = row(Status.DELETED, deleted_at=days(0))
    assert decide(deleted, days(1.9), settings).action is Action.KEEP
    assert decide(deleted, days(2), settings).action is Action.PURGE_DELETED
    assert decide(row(Status.SUPERSEDED), days(5000), settings).action is Action.KEEP


def test_a_rerun_soon_after_writes_no_decay() -> None:
    settings = Settings()
    assert decide(row(), T0 + timedelta(minutes=5), settings).action is Action.KEEP
    assert decide(row(), T0, settings).action is Action.KEEP
    assert decide(row(), days(1), settings).weight == pytest.approx(0.8 * 0.97716, abs=1e-4)


def test_archive_threshold_is_configurable() -> None:
    settings = Settings(lifecycle={"archive_below_weight": 0.5})
    assert decide(row(), days(30), settings).action is Action.ARCHIVE_FADED


def test_counts_add_up_and_report_changes() -> None:
    total = SweepCounts(users=1)
    for action in (Action.DECAY, Action.ARCHIVE_FADED, Action.KEEP, Action.PURGE_DELETED):
        count(total, action)
    other = SweepCounts(users=2, counters_fixed=1, failed_users=1, failures=["u9: OSError"])
    total.add(other)
    assert total.as_dict()["users"] == 3
    assert total.changes() == 4
    assert total.failures == ["u9: OSError"]
    assert SweepCounts(users=5).changes() == 0


def test_expected_counters_and_drift() -> None:
    expected = expected_counters({("", False): 2, ("", True): 1, ("shop", False): 4})
    assert expected == {
        "global": 3,
        "total": 7,
        "important:global": 1,
        "important:total": 1,
        "app:shop": 4,
    }
    stored = {
        "global": 3,
        "total": 9,
        "app:gone": 2,
        "important:global": 1,
        "important:total": 1,
        "app:shop": 4,
    }
    assert counter_drift(expected, stored) == {"app:gone": 0, "total": 7}
    assert counter_drift(expected, expected) == {}
