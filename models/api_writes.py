"""Request and response models of the writes (SPEC C1-C3, M1, M2): add, add_structured and its
batch, task state, update and delete."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, model_validator

from engram.models.api_base import (
    MAX_CONTENT_CHARS,
    MAX_MESSAGES,
    MAX_TAGS,
    Content,
    ContextText,
    RequestModel,
    Tag,
    check_scope,
)
from engram.models.bounds import Instant
from engram.models.enums import Level, MemType, Ownership, Role, TaskStatus
from engram.models.ids import Identifier, MemoryId


class Message(RequestModel):
    """One conversation turn handed to ``add``."""

    role: Role
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    msg_id: Identifier | None = None
    timestamp: Instant | None = None


class AddStrategy(RequestModel):
    """Optional extraction strategy (C2)."""

    focus: Annotated[str, StringConstraints(max_length=500)] | None = None
    evolution: Literal["llm", "append"] = "llm"
    custom_tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)


class AddRequest(RequestModel):
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
        check_scope(self.level, self.app_id, self.session_id)
        return self


CONTEXT_DOC = (
    "The message this memory answered or followed (e.g. the question before an answer), at most "
    "2,000 characters: its words help recall find the memory; it is never returned as content, is "
    "screened like content and goes with the memory in an export."
)


class AddStructuredRequest(RequestModel):
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
    context: ContextText | None = Field(None, description=CONTEXT_DOC)
    sync: bool = False

    @model_validator(mode="after")
    def _scope(self) -> AddStructuredRequest:
        check_scope(self.level, self.app_id, self.session_id)
        if not self.content.strip():
            raise ValueError("content must not be blank")
        return self


MAX_BATCH_ITEMS = 1000


class BatchItem(RequestModel):
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
    context: ContextText | None = Field(None, description=CONTEXT_DOC)


class BatchAddStructuredRequest(RequestModel):
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


class TaskRequest(RequestModel):
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


class UpdateRequest(RequestModel):
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


class DeleteRequest(RequestModel):
    """``delete``: soft-delete one memory (M2)."""

    user_id: Identifier
    memory_id: MemoryId


class BatchDeleteRequest(RequestModel):
    """``batch_delete``: soft-delete many memories with one counter update (M2)."""

    user_id: Identifier
    memory_ids: list[MemoryId] = Field(min_length=1, max_length=1000)


class DeleteResult(BaseModel):
    """Ids actually deleted; ids unknown or already deleted are listed apart."""

    deleted: list[str]
    not_found: list[str] = Field(default_factory=list)
