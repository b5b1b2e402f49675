"""Request and response models of the reads (SPEC C4-C6): recall, history and the change log."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, PrivateAttr, StringConstraints, model_validator

from engram.models.api_base import MAX_TAGS, RequestModel, Tag
from engram.models.api_explain import RecallExplanation
from engram.models.bounds import Instant, Int64Text
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status
from engram.models.ids import Identifier, MemoryId
from engram.models.profile import UserProfile
from engram.models.provenance import Source, Trust


class CrossApp(RequestModel):
    """Reserved: recall across apps is not enabled (40302)."""

    enabled: bool = False


class RecallScope(RequestModel):
    """Where recall may look (R1). Global memories, one app's, one session's."""

    include_global: bool = True
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    cross_app: CrossApp = Field(default_factory=CrossApp)


class RecallFilter(RequestModel):
    """Narrowing filters; a list matches any of its values; empty means no filter."""

    ownership: list[Ownership] = Field(default_factory=list)
    mem_type: list[MemType] = Field(default_factory=list)
    custom_tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    # Entity tags match case-insensitively ("hangzhou" finds a fact tagged "Hangzhou").
    entities: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)


class RecallRequest(RequestModel):
    """``recall``: the most relevant memories for a query (R1, C5)."""

    user_id: Identifier
    query: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    scope: RecallScope = Field(default_factory=RecallScope)
    filter: RecallFilter = Field(default_factory=RecallFilter)
    # None means the configured default (Settings.recall), so defaults change without a redeploy.
    top_k: int | None = Field(None, ge=1, le=100)
    min_relevance: float | None = Field(None, ge=0, le=1)
    include_archived: bool = False
    as_of: Instant | None = None
    timeout_ms: int | None = Field(None, ge=1, le=60_000)
    # The user's profile (L7) of the recall's scope, in the response's ``profile`` field.
    include_profile: bool = False
    # Each result's signals and the best memories left out, with why (``explanation``, #31).
    explain: bool = False
    # Set by the switch gate when it narrowed the scope because the app's switch is off: the scope
    # asked for, so that an explanation can say "switched off" rather than say nothing. Never sent
    # by a caller (a private attribute is no field of the contract).
    _switched_off_scope: RecallScope | None = PrivateAttr(None)

    @property
    def switched_off_scope(self) -> RecallScope | None:
        """The scope asked for, when the switch gate narrowed it (an app switched off); else None."""
        return self._switched_off_scope

    def narrowed_by_switch(self, scope: RecallScope) -> RecallRequest:
        """This request narrowed to ``scope`` by an app's switch, remembering the scope asked for."""
        narrowed = self.model_copy(update={"scope": scope})
        narrowed._switched_off_scope = self.scope
        return narrowed

    @model_validator(mode="after")
    def _profile_needs_global(self) -> RecallRequest:
        if self.include_profile and not self.scope.include_global:
            raise ValueError("include_profile needs scope.include_global: a profile holds global facts")
        return self


class RecalledMemory(BaseModel):
    """One recall hit (C5)."""

    memory_id: str
    content: str
    level: Level
    ownership: Ownership
    mem_type: MemType
    weight: float
    relevance: float
    score: float
    is_important: bool
    valid_at: datetime
    invalid_at: datetime | None
    created_at: datetime
    updated_at: datetime
    source_session_id: str | None
    source_msg_id: str | None
    custom_tags: list[str]
    entities: list[str] = Field(default_factory=list)
    # Provenance (P5): how the memory came in and how far it is trusted.
    source_type: Source = Source.USER_MESSAGE
    trust: Trust = Trust.HIGH


class RecallResponse(BaseModel):
    """Recall result, best first (C5)."""

    hit: bool
    memories: list[RecalledMemory]
    # Only when the request set include_profile: the field is left out of the answer otherwise.
    profile: UserProfile | None = Field(None, exclude_if=lambda value: value is None)
    # Only when the request set explain.
    explanation: RecallExplanation | None = Field(None, exclude_if=lambda value: value is None)


class HistoryRequest(RequestModel):
    """``history``: one memory's full change chain (M3)."""

    user_id: Identifier
    memory_id: MemoryId


class ChangeView(BaseModel):
    """One change-log entry as callers see it."""

    change_id: int
    memory_id: str
    app_id: str
    op_type: OpType
    op_source: OpSource
    op_time: datetime
    reason: str
    content_before: str | None
    content_after: str | None
    sanitized: bool


class MemoryView(BaseModel):
    """A memory with its full metadata (history, list)."""

    memory_id: str
    app_id: str
    session_id: str | None
    level: Level
    ownership: Ownership
    mem_type: MemType
    content: str | None
    weight: float
    status: Status
    is_important: bool
    recall_count: int
    created_at: datetime
    updated_at: datetime
    last_recalled_at: datetime | None
    expire_at: datetime | None
    valid_at: datetime
    invalid_at: datetime | None
    superseded_by: str | None
    source_session_id: str | None
    source_msg_id: str | None
    custom_tags: list[str]
    entities: list[str] = Field(default_factory=list)
    embedding_model: str
    # Provenance (P5): how the memory came in and how far it is trusted.
    source_type: Source = Source.USER_MESSAGE
    trust: Trust = Trust.HIGH


class HistoryResponse(BaseModel):
    """A memory and every change made to it, oldest first; superseded facts link onward."""

    memory: MemoryView
    changes: list[ChangeView]
    # For a compression summary (L5): the archived memories it was compressed from, oldest first.
    compressed_from: list[str] = Field(default_factory=list)


class ChangeLogRequest(RequestModel):
    """``change_log``: changes of a user by dimension and time range, paginated (M3)."""

    user_id: Identifier
    app_id: Identifier | None = None
    op_type: OpType | None = None
    since: Instant | None = None
    until: Instant | None = None
    # A change id: at most a signed 64-bit integer (the column is bigint).
    cursor: Int64Text | None = None
    limit: int = Field(50, ge=1, le=500)


class ChangeLogPage(BaseModel):
    """A page of changes, newest first, with the cursor of the next page (None at the end)."""

    changes: list[ChangeView]
    next_cursor: str | None
