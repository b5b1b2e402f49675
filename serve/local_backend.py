"""The backend of one process: every route served by a MemoryService and its WritePath.

Used by tests through the real FastAPI app, and by each Serve shard behind handles: writes go
through the user's mailbox (serialised, durable), reads straight to the stores.
"""

from __future__ import annotations

from actors.memory_service import MemoryService
from actors.write_path import WritePath
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
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
)


class LocalBackend:
    """``EngramBackend`` over one MemoryService; recall-hit bookkeeping goes through the mailbox (R4)."""

    def __init__(self, service: MemoryService, write_path: WritePath) -> None:
        self.service = service
        self.write_path = write_path

    async def add(self, request: AddRequest) -> TaskAccepted:
        return await self.write_path.accept_add(request)

    async def task(self, request: TaskRequest) -> TaskView:
        return await self.write_path.task(request.task_id)

    async def add_structured(self, request: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        return await self.write_path.accept_structured(request)

    async def recall(self, request: RecallRequest) -> RecallResponse:
        outcome = await self.service.recaller.recall(request)
        if outcome.hit_ids:
            self.write_path.record_recall_hits(request.user_id, outcome.hit_ids, self.service.clock())
        return outcome.response

    async def update(self, request: UpdateRequest) -> MemoryView:
        return await self.write_path.update(request)

    async def delete(self, request: DeleteRequest) -> DeleteResult:
        return await self.write_path.delete(request)

    async def batch_delete(self, request: BatchDeleteRequest) -> DeleteResult:
        return await self.write_path.batch_delete(request)

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        return await self.service.history(request)

    async def change_log(self, request: ChangeLogRequest) -> ChangeLogPage:
        return await self.service.change_log(request)
