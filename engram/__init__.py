"""Engram: long-term memory for LLM agents.

The public surface::

    from engram import EngramClient, AsyncEngramClient, Settings, AddRequest, RecallRequest

The layers of the design are subpackages: ``engram.models`` (data and rules), ``engram.storage``,
``engram.actors``, ``engram.lifecycle``, ``engram.serve`` (the Ray Serve app, the clients, the
``engram`` command) and ``engram.loadtest`` (tools above the service; needs the ``loadtest`` extra).
"""

from engram.models.api import (
    AddRequest,
    AddStrategy,
    AddStructuredRequest,
    BatchDeleteRequest,
    ChangeLogPage,
    ChangeLogRequest,
    DeleteRequest,
    DeleteResult,
    HistoryRequest,
    HistoryResponse,
    MemoryCreated,
    MemoryView,
    Message,
    RecalledMemory,
    RecallFilter,
    RecallRequest,
    RecallResponse,
    RecallScope,
    RestoreRequest,
    SessionCloseRequest,
    SessionCloseResult,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
    UserExportRequest,
    UserImportRequest,
    UserListRequest,
    UserPurgeRequest,
    UserSwitchRequest,
)
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings, load_settings
from engram.serve.client import AsyncEngramClient, EngramApiError, EngramClient

__all__ = [
    "AddRequest",
    "AddStrategy",
    "AddStructuredRequest",
    "AsyncEngramClient",
    "BatchDeleteRequest",
    "ChangeLogPage",
    "ChangeLogRequest",
    "DeleteRequest",
    "DeleteResult",
    "EngramApiError",
    "EngramClient",
    "EngramError",
    "ErrorCode",
    "HistoryRequest",
    "HistoryResponse",
    "MemoryCreated",
    "MemoryView",
    "Message",
    "RecallFilter",
    "RecallRequest",
    "RecallResponse",
    "RecallScope",
    "RecalledMemory",
    "RestoreRequest",
    "SessionCloseRequest",
    "SessionCloseResult",
    "Settings",
    "TaskAccepted",
    "TaskRequest",
    "TaskView",
    "UpdateRequest",
    "UserExportRequest",
    "UserImportRequest",
    "UserListRequest",
    "UserPurgeRequest",
    "UserSwitchRequest",
    "load_settings",
]
