"""Request and response models of the HTTP contract (SPEC C1-C9).

Ray handles take and return the same models, so validation happens once, here. The models are
defined by operation group in ``api_writes``, ``api_reads`` and ``api_users`` (over ``api_base``);
this module holds the envelope and re-exports them all: ``from engram.models.api import X``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from engram.models.api_base import (
    MAX_CONTENT_CHARS,
    MAX_MESSAGES,
    MAX_TAGS,
    Content,
    RequestModel,
    Tag,
    check_scope,
)
from engram.models.api_reads import (
    ChangeLogPage,
    ChangeLogRequest,
    ChangeView,
    CrossApp,
    HistoryRequest,
    HistoryResponse,
    MemoryView,
    RecalledMemory,
    RecallFilter,
    RecallRequest,
    RecallResponse,
    RecallScope,
)
from engram.models.api_users import (
    ProfileRequest,
    RestoreRequest,
    SessionCloseRequest,
    SessionCloseResult,
    UserExportRequest,
    UserImportRequest,
    UserListRequest,
    UserPurgeRequest,
    UserSwitchRequest,
)
from engram.models.api_writes import (
    MAX_BATCH_ITEMS,
    AddRequest,
    AddStrategy,
    AddStructuredRequest,
    BatchAddResult,
    BatchAddStructuredRequest,
    BatchDeleteRequest,
    BatchItem,
    BatchItemResult,
    Decision,
    DeleteRequest,
    DeleteResult,
    MemoryCreated,
    Message,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
)

__all__ = [
    "MAX_BATCH_ITEMS",
    "MAX_CONTENT_CHARS",
    "MAX_MESSAGES",
    "MAX_TAGS",
    "AddRequest",
    "AddStrategy",
    "AddStructuredRequest",
    "BatchAddResult",
    "BatchAddStructuredRequest",
    "BatchDeleteRequest",
    "BatchItem",
    "BatchItemResult",
    "ChangeLogPage",
    "ChangeLogRequest",
    "ChangeView",
    "Content",
    "CrossApp",
    "Decision",
    "DeleteRequest",
    "DeleteResult",
    "Envelope",
    "HistoryRequest",
    "HistoryResponse",
    "MemoryCreated",
    "MemoryView",
    "Message",
    "ProfileRequest",
    "RecallFilter",
    "RecallRequest",
    "RecallResponse",
    "RecallScope",
    "RecalledMemory",
    "RequestModel",
    "RestoreRequest",
    "SessionCloseRequest",
    "SessionCloseResult",
    "Tag",
    "TaskAccepted",
    "TaskRequest",
    "TaskView",
    "UpdateRequest",
    "UserExportRequest",
    "UserImportRequest",
    "UserListRequest",
    "UserPurgeRequest",
    "UserSwitchRequest",
    "check_scope",
    "error_envelope",
]


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
