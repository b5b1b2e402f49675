"""What the daily sweep does to one memory (L1, L2): pure decisions over plain rows.

A decision depends only on the row and ``now``, so a sweep that is replayed at the same ``now``
decides the same things, and a row it already moved no longer qualifies: that is what makes the
sweep idempotent and resumable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from engram.models.domain import SweepRow
from engram.models.enums import Status
from engram.models.rules.decay import weight_now
from engram.models.settings import Settings

__all__ = ["Action", "SweepCounts", "SweepRow", "Verdict", "count", "decide"]

# Weights are floats: a memory that reaches the threshold exactly on its day (0.80 at day 90) must
# not be archived by rounding noise a day early.
_EPSILON = 1e-9


class Action(enum.Enum):
    """The sweep's verdict on one memory."""

    KEEP = "keep"
    DECAY = "decay"
    ARCHIVE_FADED = "archive_faded"
    ARCHIVE_EXPIRED = "archive_expired"
    PURGE_ARCHIVED = "purge_archived"
    PURGE_DELETED = "purge_deleted"


@dataclass(frozen=True, slots=True)
class Verdict:
    """An action and, for DECAY, the weight to store."""

    action: Action
    weight: float | None = None


def decide(row: SweepRow, now: datetime, settings: Settings) -> Verdict:
    """The action for one memory at ``now``."""
    life = settings.lifecycle
    if row.status is Status.DELETED:
        due = (
            row.deleted_at is not None
            and row.deleted_at + timedelta(days=life.purge_deleted_after_days) <= now
        )
        return Verdict(Action.PURGE_DELETED if due else Action.KEEP)
    if row.status is Status.ARCHIVED:
        due = (
            row.archived_at is not None
            and row.archived_at + timedelta(days=life.purge_archived_after_days) <= now
        )
        return Verdict(Action.PURGE_ARCHIVED if due else Action.KEEP)
    if row.status is not Status.ACTIVE:
        return Verdict(Action.KEEP)  # SUPERSEDED facts are history (R6), not subject to decay
    if row.expire_at is not None and row.expire_at <= now:
        return Verdict(Action.ARCHIVE_EXPIRED)
    weight = weight_now(row, now, settings.decay)
    if weight < life.archive_below_weight - _EPSILON:
        return Verdict(Action.ARCHIVE_FADED, weight)
    if row.weight - weight >= life.decay_write_min_delta:
        return Verdict(Action.DECAY, weight)
    return Verdict(Action.KEEP)


@dataclass(slots=True)
class SweepCounts:
    """How many memories each sweep step touched (or would touch, in a dry run)."""

    users: int = 0
    decayed: int = 0
    archived_faded: int = 0
    archived_expired: int = 0
    purged_archived: int = 0
    purged_deleted: int = 0
    sanitized_changes: int = 0
    # Compression (L5): summaries written, and the memories archived into them.
    compression_summaries: int = 0
    compressed_memories: int = 0
    vectors_restored: int = 0
    orphan_vectors_removed: int = 0
    counters_fixed: int = 0
    archive_objects_fixed: int = 0
    # Sealed vector copies (what recall snapshots load) added from the index or dropped as orphans.
    vector_copies_fixed: int = 0
    # User profiles (L7) rebuilt after the sweep (they never decay: they are rebuilt instead).
    profiles_refreshed: int = 0
    # Finished write tasks deleted past privacy.task_retention_hours (with their export files).
    expired_tasks: int = 0
    failed_users: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, other: SweepCounts) -> SweepCounts:
        """Add ``other``'s counts into this one (returns self)."""
        for name in _COUNT_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)
        return self

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain mapping (progress reports, metrics, JSON)."""
        return {name: int(getattr(self, name)) for name in _COUNT_FIELDS}

    def changes(self) -> int:
        """Every mutation counted, users and failures aside (0 means the sweep changed nothing)."""
        return sum(v for k, v in self.as_dict().items() if k not in ("users", "failed_users"))


_COUNT_FIELDS = (
    "users",
    "decayed",
    "archived_faded",
    "archived_expired",
    "purged_archived",
    "purged_deleted",
    "sanitized_changes",
    "compression_summaries",
    "compressed_memories",
    "vectors_restored",
    "orphan_vectors_removed",
    "counters_fixed",
    "archive_objects_fixed",
    "vector_copies_fixed",
    "expired_tasks",
    "profiles_refreshed",
    "failed_users",
)


def count(counts: SweepCounts, action: Action) -> None:
    """Count one verdict in ``counts``."""
    name = {
        Action.DECAY: "decayed",
        Action.ARCHIVE_FADED: "archived_faded",
        Action.ARCHIVE_EXPIRED: "archived_expired",
        Action.PURGE_ARCHIVED: "purged_archived",
        Action.PURGE_DELETED: "purged_deleted",
    }.get(action)
    if name is not None:
        setattr(counts, name, getattr(counts, name) + 1)
