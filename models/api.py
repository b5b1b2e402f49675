"""Request and response models of the HTTP contract (SPEC C1-C9).

Ray handles take and return the same models, so validation happens once, here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from engram.models.bounds import Instant, Int64Text
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Role, Status, TaskStatus
from engram.models.ids import Identifier, MemoryId
from engram.models.profile import UserProfile
from engram.models.provenance import Source, Trust

MAX_MESSAGES = 200
MAX_CONTENT_CHARS = 16_000
MAX_TAGS = 32

Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, strip_whitespace=True)]
Content = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_scope(level: Level | None, app_id: str | None, session_id: str | None) -> None:
    if level is Level.APP and not app_id:
        raise ValueError("level APP needs an app_id")
    if level is Level.SESSION and not session_id:
        raise ValueError("level SESSION needs a session_id")


# --- write path -------------------------------------------------------------------------------


class Message(_Request):
    """One conversation turn handed to ``add``."""

    role: Role
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    msg_id: Identifier | None = None
    timestamp: Instant | None = None


class AddStrategy(_Request):
    """Optional extraction strategy (C2)."""

    focus: Annotated[str, StringConstraints(max_length=500)] | None = None
    evolution: Literal["llm", "append"] = "llm"
    custom_tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)


class AddRequest(_Request):
    """``add``: a conversation to extract memories from, asynchronously (C2, W1)."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    level: Level | None = None
    ownership: Ownership | None = None
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    strategy: AddStrategy = Field(default_factory=AddStrategy)

    @model_validator(mode="after")
    def _scope(self) -> AddRequest:
        _check_scope(self.level, self.app_id, self.session_id)
        return self


class AddStructuredRequest(_Request):
    """``add_structured``: one ready memory, skipping extraction and evolution (C4, W6)."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    level: Level | None = None
    ownership: Ownership
    mem_type: MemType
    content: Content
    is_important: bool = False
    expire_at: Instant | None = None
    valid_at: Instant | None = None
    custom_tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    source_msg_id: Identifier | None = None
    sync: bool = False

    @model_validator(mode="after")
    def _scope(self) -> AddStructuredRequest:
        _check_scope(self.level, self.app_id, self.session_id)
        if not self.content.strip():
            raise ValueError("content must not be blank")
        return self


MAX_BATCH_ITEMS = 1000


class BatchItem(_Request):
    """One ready memory of a ``batch_add_structured`` (the fields of ``add_structured`` that vary)."""

    level: Level | None = None
    ownership: Ownership
    mem_type: MemType
    content: Content
    is_important: bool = False
    expire_at: Instant | None = None
    valid_at: Instant | None = None
    custom_tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    source_msg_id: Identifier | None = None


class BatchAddStructuredRequest(_Request):
    """``batch_add_structured``: up to 1,000 ready memories of one user and app, stored in order as if
    sent one by one (W6); one task, or one answer when ``sync``."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)
    sync: bool = False

    @model_validator(mode="after")
    def _each_item(self) -> BatchAddStructuredRequest:
        self.item_requests()  # each item's scope and content checked here, at the boundary
        return self

    def item_requests(self) -> list[AddStructuredRequest]:
        """The items as single ``add_structured`` requests, in order."""
        shared = {"user_id": self.user_id, "app_id": self.app_id, "session_id": self.session_id}
        return [
            AddStructuredRequest.model_validate({**shared, **item.model_dump(exclude_unset=True)})
            for item in self.items
        ]


class BatchItemResult(BaseModel):
    """What became of one item: its memory id (new, or the same content already stored), or its
    error code (42901 capacity full, 42902 important limit) and message."""

    index: int
    memory_id: str | None = None
    code: int = 0
    msg: str = "ok"


class BatchAddResult(BaseModel):
    """Answer to a synchronous ``batch_add_structured``: one result per item, in order."""

    items: list[BatchItemResult]


class TaskAccepted(BaseModel):
    """Answer to an asynchronous write."""

    task_id: str
    accepted: bool = True


class MemoryCreated(BaseModel):
    """Answer to a synchronous ``add_structured``."""

    memory_id: str


class TaskRequest(_Request):
    """``task``: look up an accepted write (C3); with ``user_id``, only a task of that user (P9)."""

    task_id: MemoryId
    user_id: Identifier | None = None


class Decision(BaseModel):
    """One evolution decision of a task."""

    op: str
    memory_id: str | None = None
    content: str | None = None
    reason: str = ""


class TaskView(BaseModel):
    """State of an accepted write (C3)."""

    task_id: str
    status: TaskStatus
    decisions: list[Decision] = Field(default_factory=list)
    error: str | None = None
    # When the write was accepted, and when it ended (DONE or FAILED; null until then).
    accepted_at: datetime | None = None
    finished_at: datetime | None = None


# --- recall -----------------------------------------------------------------------------------


class CrossApp(_Request):
    """Reserved: recall across apps is not enabled (40302)."""

    enabled: bool = False


class RecallScope(_Request):
    """Where recall may look (R1). Global memories, one app's, one session's."""

    include_global: bool = True
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    cross_app: CrossApp = Field(default_factory=CrossApp)


class RecallFilter(_Request):
    """Narrowing filters; a list matches any of its values; empty means no filter."""

    ownership: list[Ownership] = Field(default_factory=list)
    mem_type: list[MemType] = Field(default_factory=list)
    custom_tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    # Entity tags match case-insensitively ("hangzhou" finds a fact tagged "Hangzhou").
    entities: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)


class RecallRequest(_Request):
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


# --- management -------------------------------------------------------------------------------


class UpdateRequest(_Request):
    """``update``: content and/or metadata of one memory (M1, C6)."""

    user_id: Identifier
    memory_id: MemoryId
    content: Content | None = None
    is_important: bool | None = None
    expire_at: Instant | None = None
    custom_tags: list[Tag] | None = Field(None, max_length=MAX_TAGS)

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateRequest:
        if not self.model_fields_set & {"content", "is_important", "expire_at", "custom_tags"}:
            raise ValueError("update needs at least one of content, is_important, expire_at, custom_tags")
        if self.content is not None and not self.content.strip():
            raise ValueError("content must not be blank")
        return self


class DeleteRequest(_Request):
    """``delete``: soft-delete one memory (M2)."""

    user_id: Identifier
    memory_id: MemoryId


class BatchDeleteRequest(_Request):
    """``batch_delete``: soft-delete many memories with one counter update (M2)."""

    user_id: Identifier
    memory_ids: list[MemoryId] = Field(min_length=1, max_length=1000)


class DeleteResult(BaseModel):
    """Ids actually deleted; ids unknown or already deleted are listed apart."""

    deleted: list[str]
    not_found: list[str] = Field(default_factory=list)


class HistoryRequest(_Request):
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


class ChangeLogRequest(_Request):
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


# --- privacy and lifecycle routes (implemented by later issues; shapes fixed here) ------------


class UserListRequest(_Request):
    """``user/list`` (C7)."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    level: Level | None = None
    mem_type: MemType | None = None
    status: Status | None = None
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: int = Field(50, ge=1, le=500)


class UserPurgeRequest(_Request):
    """``user/purge`` (C7)."""

    user_id: Identifier
    app_id: Identifier | None = None
    level: Level | None = None


class UserSwitchRequest(_Request):
    """``user/switch`` (C7); without ``enabled`` it only reads the switches (the console shows them)."""

    user_id: Identifier
    app_id: Identifier | None = None
    enabled: bool | None = None


class UserExportRequest(_Request):
    """``user/export`` (C7)."""

    user_id: Identifier


class UserImportRequest(_Request):
    """``user/import`` (C7)."""

    user_id: Identifier
    lines: list[str] = Field(min_length=1, max_length=10_000)
    on_conflict: Literal["skip", "overwrite"] = "skip"


class ProfileRequest(_Request):
    """``profile`` (C11, L7): the user's derived profile, global facts plus one app's when named."""

    user_id: Identifier
    app_id: Identifier | None = None


class SessionCloseRequest(_Request):
    """``session/close`` (C8, L6)."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier
    to_be_continued: bool = False
    must_promote: list[MemoryId] = Field(default_factory=list, max_length=1000)
    # False: the user's app-less session memories stay as they are (a key without global scope
    # always closes this way, P4).
    include_global: bool = True


class SessionCloseResult(BaseModel):
    """What ``session/close`` did with the session's memories (L6)."""

    promoted: list[str]
    dropped: list[str]
    # Valued for promotion but refused by the capacity check (42901 on their target): dropped too.
    capacity_refused: list[str] = Field(default_factory=list)
    continuity_memory_id: str | None = None


class RestoreRequest(_Request):
    """``restore``: bring an archived memory back to ACTIVE (L2)."""

    user_id: Identifier
    memory_id: MemoryId


# --- envelope ---------------------------------------------------------------------------------

T = TypeVar("T")


class Envelope(BaseModel, Generic[T]):
    """Every answer: ``code`` 0 on success, a C9 code otherwise (M4)."""

    code: int
    msg: str
    trace_id: str
    data: T | None = None

    @classmethod
    def ok(cls, data: T, trace_id: str) -> Envelope[T]:
        """A success envelope."""
        return cls(code=0, msg="ok", trace_id=trace_id, data=data)


def error_envelope(code: int, msg: str, trace_id: str, data: Any = None) -> dict[str, Any]:
    """A failure envelope as a plain dict (for handlers that cannot name the data type)."""
    return {"code": code, "msg": msg, "trace_id": trace_id, "data": data}
