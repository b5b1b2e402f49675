"""The backend of one process: every route served by a MemoryService and its WritePath.

Used by tests through the real FastAPI app, and by each Serve shard behind handles: writes go
through the user's mailbox (serialised, durable), reads straight to the stores.
"""

from __future__ import annotations

from actors.memory_service import MemoryService
from actors.privacy import PrivacyService
from actors.session_close import SessionCloser
from actors.views import memory_view
from actors.write_path import WritePath
from lifecycle.archive import build_archive
from lifecycle.context import LifecycleStores
from lifecycle.restore import restore_memory
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
from serve.privacy_backend import LocalPrivacy


class LocalBackend(LocalPrivacy):
    """``EngramBackend`` over one MemoryService; recall-hit bookkeeping goes through the mailbox (R4)."""

    def __init__(
        self, service: MemoryService, write_path: WritePath, lifecycle: LifecycleStores | None = None
    ) -> None:
        self.service = service
        self.write_path = write_path
        self.lifecycle = lifecycle or LifecycleStores(
            service.settings,
            service.metadata,
            service.vectors,
            service.embedder,
            build_archive(service.settings),
        )
        self.session_closer = SessionCloser(service)
        self.attach_privacy(PrivacyService(service, self.lifecycle.archive))

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

    async def session_close(self, request: SessionCloseRequest) -> SessionCloseResult:
        closer = self.session_closer
        return await self.write_path.host.submit(request.user_id, lambda: closer.close(request))

    async def restore(self, request: RestoreRequest) -> MemoryView:
        async def work() -> MemoryView:
            memory = await restore_memory(
                self.lifecycle, request.user_id, request.memory_id, self.service.clock()
            )
            return memory_view(memory)

        return await self.write_path.host.submit(request.user_id, work)
