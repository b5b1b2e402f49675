"""The backend of one process, the service behind every operation: a MemoryService and its WritePath.

Used by tests through the real FastAPI app, and by each Serve shard behind handles: writes go
through the user's mailbox (serialised, durable), reads straight to the stores. ``call`` runs the
method named like the operation (``serve.operations``): one method here per table entry.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from engram.actors.compression import EngineSummarizer
from engram.actors.memory_service import MemoryService
from engram.actors.privacy import KIND_EXPORT, PrivacyService
from engram.actors.profile import ProfileRefresher
from engram.actors.quarantine import QuarantineService
from engram.actors.session_close import SessionCloser
from engram.actors.views import memory_view
from engram.actors.write_path import WritePath
from engram.lifecycle.archive import build_archive
from engram.lifecycle.compression import Compressor
from engram.lifecycle.context import LifecycleStores
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
from engram.serve.operations import Operation
from engram.serve.privacy_backend import LocalPrivacyHelpers

Req = TypeVar("Req")
Res = TypeVar("Res")


class LocalBackend(LocalPrivacyHelpers):
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
        # Compression (L5) lives in lifecycle, the engine in actors: the summary is wired here.
        if self.lifecycle.summarize is None:
            self.lifecycle.summarize = EngineSummarizer(service.ingestor.engine, service.settings.evolution)
        compressor = Compressor(self.lifecycle)
        self.session_closer = SessionCloser(
            service,
            compress=lambda user_id, app_ids: compressor.compress_user(
                user_id, service.clock(), app_ids=app_ids
            ),
        )
        # The profile (L7) is rebuilt after writes, once the shard's pending write tasks are done:
        # a refresh reads and decrypts every memory of the user, too much to pay on every write.
        self.profiles = service.recaller.profiles
        self.profile_refresher = ProfileRefresher(
            self.profiles,
            write_path.host,
            busy=lambda: write_path.pending_tasks > 0,
            max_delay_s=service.settings.profile.refresh_max_delay_s,
        )
        write_path.on_change = self.profile_refresher.changed
        self.attach_privacy(PrivacyService(service, self.lifecycle.archive))
        self.quarantine = QuarantineService(service)

    def attach_privacy(self, privacy: PrivacyService) -> None:
        """Use ``privacy`` and let the write path run export tasks (call before any task resumes)."""
        self.privacy = privacy
        self.write_path.handlers[KIND_EXPORT] = privacy.run_export

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
        outcome = await self.service.recaller.recall(request)
        if outcome.hit_ids:
            self.write_path.record_recall_hits(request.user_id, outcome.hit_ids, self.service.clock())
        return outcome.response

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
