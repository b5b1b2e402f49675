"""The backend of one process, the service behind every operation: a memory core (serve/memory_core.py).

Used by tests through the real FastAPI app, and by each Serve shard behind handles: writes go
through the user's mailbox (serialised, durable), reads straight to the stores. ``call`` runs the
method named like the operation (``serve.operations``): one method here per table entry.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from engram.actors.privacy import KIND_EXPORT
from engram.actors.views import memory_view
from engram.lifecycle.restore import restore_memory
from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchAddResult,
    BatchAddStructuredRequest,
    BatchDeleteRequest,
    ChangeLogPage,
    ChangeLogRequest,
    DeleteRequest,
    DeleteResult,
    HistoryRequest,
    HistoryResponse,
    MemoryCreated,
    MemoryView,
    ProfileRequest,
    RecallRequest,
    RecallResponse,
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
from engram.models.privacy import ImportResult, PurgeResult, SwitchState, UserListPage
from engram.models.profile import UserProfile
from engram.models.quarantine import (
    QuarantineDecisionRequest,
    QuarantineListRequest,
    QuarantinePage,
    QuarantineResult,
)
from engram.serve.memory_core import MemoryCore
from engram.serve.operations import Operation
from engram.serve.privacy_backend import LocalPrivacyHelpers

Req = TypeVar("Req")
Res = TypeVar("Res")


class LocalBackend(LocalPrivacyHelpers):
    """``EngramBackend`` over one process's memory core (serve/memory_core.py); recall-hit
    bookkeeping goes through the mailbox (R4)."""

    def __init__(self, core: MemoryCore) -> None:
        self.core = core
        self.service = core.service
        self.write_path = core.write_path
        self.lifecycle = core.lifecycle
        self.profiles = core.profiles
        self.profile_refresher = core.profile_refresher
        self.session_closer = core.session_closer
        self.privacy = core.privacy
        self.quarantine = core.quarantine

    async def call(self, op: Operation[Any, Res], request: Any) -> Res:
        """Run the method named like ``op`` (every table operation has one: tests/unit/test_operations.py)."""
        return cast(Res, await getattr(self, op.name)(request))

    async def add(self, request: AddRequest) -> TaskAccepted:
        return await self.write_path.accept_add(request)

    async def task(self, request: TaskRequest) -> TaskView:
        return await self.write_path.task(request.task_id, request.user_id)

    async def add_structured(self, request: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        return await self.write_path.accept_structured(request)

    async def recall(self, request: RecallRequest) -> RecallResponse:
        return await self.service.recaller.recall(request, hits=self.write_path.record_recall_hits)

    async def batch_add_structured(self, request: BatchAddStructuredRequest) -> BatchAddResult | TaskAccepted:
        return await self.write_path.accept_structured_batch(request)

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

    async def profile(self, request: ProfileRequest) -> UserProfile:
        fresh = await self.profiles.stored_if_fresh(request.user_id, request.app_id)
        if fresh is not None:
            return fresh
        profiles = self.profiles
        # Stale or never stored: rebuilt and stored on the user's mailbox (ordered with the writes).
        return await self.write_path.host.submit(
            request.user_id, lambda: profiles.refreshed(request.user_id, request.app_id)
        )

    async def session_close(self, request: SessionCloseRequest) -> SessionCloseResult:
        closer = self.session_closer
        return await self.write_path.submit_write(request.user_id, lambda: closer.close(request))

    async def restore(self, request: RestoreRequest) -> MemoryView:
        async def work() -> MemoryView:
            memory = await restore_memory(
                self.lifecycle, request.user_id, request.memory_id, self.service.clock()
            )
            return memory_view(memory)

        return await self.write_path.submit_write(request.user_id, work)

    async def user_list(self, request: UserListRequest) -> UserListPage:
        return await self.privacy.list_memories(request)

    async def user_purge(self, request: UserPurgeRequest) -> PurgeResult:
        privacy = self.privacy
        return await self.write_path.submit_write(request.user_id, lambda: privacy.purge(request))

    async def user_switch(self, request: UserSwitchRequest) -> SwitchState:
        privacy = self.privacy
        return await self.write_path.host.submit(request.user_id, lambda: privacy.set_switch(request))

    async def user_export(self, request: UserExportRequest) -> TaskAccepted:
        return await self.write_path.accept(request.user_id, KIND_EXPORT, request.model_dump(mode="json"))

    async def user_import(self, request: UserImportRequest) -> ImportResult:
        privacy = self.privacy
        return await self.write_path.submit_write(request.user_id, lambda: privacy.import_lines(request))

    async def quarantine_list(self, request: QuarantineListRequest) -> QuarantinePage:
        return await self.quarantine.list_held(request)

    async def quarantine_release(self, request: QuarantineDecisionRequest) -> QuarantineResult:
        quarantine = self.quarantine
        return await self.write_path.submit_write(request.user_id, lambda: quarantine.release(request))

    async def quarantine_delete(self, request: QuarantineDecisionRequest) -> QuarantineResult:
        quarantine = self.quarantine
        return await self.write_path.submit_write(request.user_id, lambda: quarantine.delete(request))
