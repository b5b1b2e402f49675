"""What the HTTP ingress needs from the rest of Engram: one async method per route (SPEC C2-C6).

The in-process implementation runs everything in one event loop; the Ray Serve application
implements the same protocol over deployment and actor handles.
"""

from __future__ import annotations

from typing import Protocol

from models.api import (
    AddRequest,
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
    RecallRequest,
    RecallResponse,
    RestoreRequest,
    SessionCloseRequest,
    SessionCloseResult,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
)
from serve.privacy_backend import PrivacyBackend


class EngramBackend(PrivacyBackend, Protocol):
    """The operations behind the routes; errors are ``EngramError`` with a C9 code."""

    async def add(self, request: AddRequest) -> TaskAccepted:
        """Record a conversation durably and return its task (W1)."""
        ...

    async def task(self, request: TaskRequest) -> TaskView:
        """The state of an accepted write (W2)."""
        ...

    async def add_structured(self, request: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        """Store one ready memory, at once when ``sync`` (W6)."""
        ...

    async def recall(self, request: RecallRequest) -> RecallResponse:
        """The most relevant memories (R1-R6)."""
        ...

    async def update(self, request: UpdateRequest) -> MemoryView:
        """Change one memory (M1)."""
        ...

    async def delete(self, request: DeleteRequest) -> DeleteResult:
        """Soft-delete one memory (M2)."""
        ...

    async def batch_delete(self, request: BatchDeleteRequest) -> DeleteResult:
        """Soft-delete many memories (M2)."""
        ...

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        """One memory's change chain (M3)."""
        ...

    async def change_log(self, request: ChangeLogRequest) -> ChangeLogPage:
        """A user's changes (M3)."""
        ...

    async def session_close(self, request: SessionCloseRequest) -> SessionCloseResult:
        """Promote a session's valuable memories, drop the rest, keep a continuity memory (L6)."""
        ...

    async def restore(self, request: RestoreRequest) -> MemoryView:
        """Bring an archived memory back to ACTIVE (L2)."""
        ...
