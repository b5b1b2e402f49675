"""``EngramBackend`` over Ray: writes and reads to the user's shard actor, recall to its deployment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ray.actor import ActorHandle

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
from models.errors import EngramError, ErrorCode
from models.rules.sharding import shard_of
from serve.handle_lookup import LazyDeploymentHandle
from serve.privacy_backend import RayPrivacy
from serve.remote_errors import unwrap


class RayBackend(RayPrivacy):
    """Routes every operation: by user to its shard (stable hash), recall to the recall deployment."""

    def __init__(self, shards: Sequence[ActorHandle[Any]], recall: LazyDeploymentHandle) -> None:
        self._shards = list(shards)
        self._recall = recall

    def shard(self, user_id: str) -> ActorHandle[Any]:
        """The shard actor that owns ``user_id``."""
        return self._shards[shard_of(user_id, len(self._shards))]

    async def add(self, request: AddRequest) -> TaskAccepted:
        return await unwrap(self.shard(request.user_id).add.remote(request))

    async def task(self, request: TaskRequest) -> TaskView:
        # A task id does not name its user: ask the shards in turn (there are few).
        for shard in self._shards:
            try:
                return await unwrap(shard.task.remote(request))
            except EngramError as exc:
                if exc.code is not ErrorCode.NOT_FOUND:
                    raise
        raise EngramError(ErrorCode.NOT_FOUND, f"no task {request.task_id}")

    async def add_structured(self, request: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        return await unwrap(self.shard(request.user_id).add_structured.remote(request))

    async def recall(self, request: RecallRequest) -> RecallResponse:
        recall = await self._recall.get()
        return await unwrap(recall.recall.remote(request))

    async def update(self, request: UpdateRequest) -> MemoryView:
        return await unwrap(self.shard(request.user_id).update.remote(request))

    async def delete(self, request: DeleteRequest) -> DeleteResult:
        return await unwrap(self.shard(request.user_id).delete.remote(request))

    async def batch_delete(self, request: BatchDeleteRequest) -> DeleteResult:
        return await unwrap(self.shard(request.user_id).batch_delete.remote(request))

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        return await unwrap(self.shard(request.user_id).history.remote(request))

    async def change_log(self, request: ChangeLogRequest) -> ChangeLogPage:
        return await unwrap(self.shard(request.user_id).change_log.remote(request))

    async def session_close(self, request: SessionCloseRequest) -> SessionCloseResult:
        return await unwrap(self.shard(request.user_id).session_close.remote(request))

    async def restore(self, request: RestoreRequest) -> MemoryView:
        return await unwrap(self.shard(request.user_id).restore.remote(request))
