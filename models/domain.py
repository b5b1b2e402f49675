"""Domain records (SPEC D1-D4) as plain dataclasses: the pure logic works on these."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status, TaskStatus


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


GLOBAL_APP = ""
"""The ``app_id`` of global memories (D1: empty means global)."""


@dataclass(slots=True)
class Memory:
    """One stored memory (D1). ``content`` is plaintext in memory, encrypted at rest.

    ``weight`` is the weight as of ``weight_at``; the current weight is derived by lazy decay.
    ``content`` is None when the user's data key has been shredded.
    """

    memory_id: str
    user_id: str
    app_id: str
    level: Level
    ownership: Ownership
    mem_type: MemType
    content: str | None
    weight: float
    weight_at: datetime
    created_at: datetime
    updated_at: datetime
    valid_at: datetime
    content_hash: str
    embedding_model: str
    session_id: str | None = None
    status: Status = Status.ACTIVE
    is_important: bool = False
    recall_count: int = 0
    last_recalled_at: datetime | None = None
    expire_at: datetime | None = None
    archived_at: datetime | None = None
    deleted_at: datetime | None = None
    source_session_id: str | None = None
    source_msg_id: str | None = None
    # Tuples, not lists: a tuple of strings leaves the garbage collector's view after its first
    # collection, and a Recall replica holds hundreds of thousands of memories (#30: the labels'
    # lists were half of what each full collection walked).
    custom_tags: tuple[str, ...] = ()
    # Key entities of the fact (people, places, products): a first step towards entity memory.
    entities: tuple[str, ...] = ()
    vector_ref: str | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    confidence: float = 1.0
    source_type: str = "conversation"
    # The message this memory answered or followed in its conversation, when the writer knew it:
    # its words are indexed for recall's lexical signal (a turn like "I went to Woodhaven" is found
    # by the question it answers) and it is never part of what the memory says. Sealed like content.
    context: str | None = None


@dataclass(slots=True)
class ChangeLogEntry:
    """One append-only change record (D2). Content fields are None once sanitized or shredded."""

    change_id: int
    memory_id: str
    user_id: str
    app_id: str
    op_type: OpType
    op_source: OpSource
    op_time: datetime
    reason: str
    content_before: str | None = None
    content_after: str | None = None
    sanitized: bool = False


@dataclass(slots=True)
class WriteTask:
    """A durably recorded asynchronous write (W1, W2)."""

    task_id: str
    user_id: str
    kind: str
    status: TaskStatus
    payload: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    decisions: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class SweepRow:
    """What the sweep reads of a memory (no content)."""

    memory_id: str
    app_id: str
    status: Status
    weight: float
    weight_at: datetime
    is_important: bool
    custom_tags: tuple[str, ...]
    expire_at: datetime | None
    archived_at: datetime | None
    deleted_at: datetime | None
