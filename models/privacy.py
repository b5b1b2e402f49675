"""Answers of the privacy routes (SPEC C7, P1, P2) and the export line format.

The requests (``UserListRequest`` ...) live with the rest of the contract in ``models.api``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from engram.models.api import MemoryView
from engram.models.api_base import MAX_CONTEXT_CHARS
from engram.models.bounds import Count, Instant, UnitFloat
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status
from engram.models.ids import Identifier, MemoryId
from engram.models.provenance import Trust


class UserListPage(BaseModel):
    """A page of a user's memories, oldest first, with the cursor of the next page (None at the end)."""

    memories: list[MemoryView]
    next_cursor: str | None


class PurgeResult(BaseModel):
    """How many memories left recall at once; ``shredded`` when the user's data key was destroyed."""

    purged: int
    shredded: bool


class SwitchState(BaseModel):
    """A user's switches: the global one and each app's that was ever set (absent means on)."""

    user_id: str
    enabled: bool
    apps: dict[str, bool] = Field(default_factory=dict)


class ImportResult(BaseModel):
    """What an import did, line by line."""

    added: int = 0
    overwritten: int = 0
    skipped: int = 0
    reembedded: int = 0
    # Lines not stored because the sensitive policy refuses their content (P5).
    refused: int = 0


class ExportDownloadRequest(BaseModel):
    """``user/export/download``: the JSON Lines file of a finished export task, streamed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: Identifier
    task_id: MemoryId


class MemoryAppsRequest(BaseModel):
    """Which app each of a user's memories belongs to (tenancy checks of the memory-id routes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: Identifier
    memory_ids: list[MemoryId] = Field(max_length=1000)


class ExportedChange(BaseModel):
    """One change-log entry of an exported memory (D2)."""

    model_config = ConfigDict(extra="forbid")

    op_type: OpType
    op_source: OpSource
    op_time: Instant
    reason: str = Field(max_length=4000)
    content_before: str | None = None
    content_after: str | None = None
    sanitized: bool = False


class ExportedMemory(BaseModel):
    """One line of an export file: a memory with all its metadata, its vector and its change log."""

    model_config = ConfigDict(extra="forbid")

    format: int = 1
    memory_id: MemoryId
    user_id: Identifier
    app_id: Identifier | None
    session_id: Identifier | None
    level: Level
    ownership: Ownership
    mem_type: MemType
    content: str = Field(min_length=1, max_length=16_000)
    weight: UnitFloat
    weight_at: Instant
    status: Status
    is_important: bool
    recall_count: Count
    created_at: Instant
    updated_at: Instant
    last_recalled_at: Instant | None
    expire_at: Instant | None
    archived_at: Instant | None
    deleted_at: Instant | None
    source_session_id: Identifier | None
    source_msg_id: Identifier | None
    custom_tags: list[str] = Field(max_length=64)
    entities: list[str] = Field(max_length=256)
    embedding_model: str = Field(max_length=128)
    valid_at: Instant
    invalid_at: Instant | None
    superseded_by: MemoryId | None
    confidence: UnitFloat
    source_type: str = Field(max_length=32)
    # Derived from source_type (models.provenance), for readers of the file; an import ignores it.
    trust: Trust | None = None
    # The message the memory answered (Memory.context); absent in files written before it existed.
    context: str | None = Field(None, max_length=MAX_CONTEXT_CHARS)
    # float32 little-endian, base64; None when the vector store held none (it is then re-embedded).
    vector: str | None
    changes: list[ExportedChange] = Field(default_factory=list, max_length=10_000)
