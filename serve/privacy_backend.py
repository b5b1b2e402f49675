"""The privacy helpers that are not routes of their own (SPEC C7), on every transport.

The privacy operations (user/list, purge, switch, export, import) are table operations
(``serve.operations``); what remains here is what the routes and the tenancy check need besides:
an export's bytes a chunk at a time, the app of each memory, a user's switches. The protocol, its
in-process and Ray-handle implementations, and the forwarding of the shard actor and the Ingress.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ray.actor import ActorHandle

from engram.actors.privacy import PrivacyService
from engram.models.privacy import ExportDownloadRequest, MemoryAppsRequest
from engram.models.rules.task_reach import TaskOwner
from engram.serve.remote_errors import unwrap


class PrivacyHelpers(Protocol):
    """Reads behind the download route and the tenancy check; errors are ``EngramError``."""

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        """Plain JSON Lines of a finished export from ``offset`` and the offset to go on from."""
        ...

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        """The app ("" = global) of each of a user's memories (tenancy checks)."""
        ...

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        """The user's raw switch map ("" = global switch)."""
        ...

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        """Whose a task is and who may read it (tenancy checks); None when unknown."""
        ...


class LocalPrivacyHelpers:
    """``PrivacyHelpers`` in one process."""

    privacy: PrivacyService

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        return await self.privacy.export_chunk(request.user_id, request.task_id, offset, max_bytes)

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        return await self.privacy.memory_apps(request.user_id, list(request.memory_ids))

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        return await self.privacy.switches(user_id)

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        async with self.privacy.service.metadata.transaction(readonly=True) as tx:
            return await tx.tasks.owner(task_id)


class RayPrivacyHelpers:
    """``PrivacyHelpers`` over Ray: every read goes to the shard actor that owns the user."""

    def shard(self, user_id: str) -> ActorHandle[Any]:
        """The shard actor that owns ``user_id`` (provided by the class this is mixed into)."""
        raise NotImplementedError

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        return await unwrap(self.shard(request.user_id).export_chunk.remote(request, offset, max_bytes))

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        return await unwrap(self.shard(request.user_id).memory_apps.remote(request))

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        return await unwrap(self.shard(user_id).switches.remote(user_id))

    def all_shards(self) -> Sequence[ActorHandle[Any]]:
        """Every shard actor (provided by the class this is mixed into)."""
        raise NotImplementedError

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        # A task names no user: ask the shards in turn, as the ``task`` operation does.
        for shard in self.all_shards():
            owner: TaskOwner | None = await unwrap(shard.task_owner.remote(task_id))
            if owner is not None:
                return owner
        return None


class ForwardPrivacyHelpers:
    """The privacy helpers of a class holding an operation backend (shard actor, Ingress)."""

    async def operation_backend(self) -> PrivacyHelpers:
        """The backend to forward to (provided by the class this is mixed into)."""
        raise NotImplementedError

    async def export_chunk(
        self, r: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        return await (await self.operation_backend()).export_chunk(r, offset, max_bytes)

    async def memory_apps(self, r: MemoryAppsRequest) -> dict[str, str]:
        return await (await self.operation_backend()).memory_apps(r)

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        return await (await self.operation_backend()).switches(user_id)

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        return await (await self.operation_backend()).task_owner(task_id)
