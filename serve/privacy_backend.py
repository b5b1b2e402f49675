"""The privacy operations (SPEC C7) on every transport: the protocol and its in-process, Ray-handle,
shard-actor and ingress implementations, as mixins of the classes that serve the other routes.

Every operation that changes a user runs on that user's mailbox in the shard that owns them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ray.actor import ActorHandle

from actors.privacy import KIND_EXPORT, PrivacyService
from actors.write_path import WritePath
from models.api import (
    TaskAccepted,
    UserExportRequest,
    UserImportRequest,
    UserListRequest,
    UserPurgeRequest,
    UserSwitchRequest,
)
from models.privacy import (
    ExportDownloadRequest,
    ImportResult,
    MemoryAppsRequest,
    PurgeResult,
    SwitchState,
    UserListPage,
)
from serve.remote_errors import unwrap


class PrivacyBackend(Protocol):
    """The privacy routes' operations; errors are ``EngramError`` with a C9 code."""

    async def user_list(self, request: UserListRequest) -> UserListPage:
        """A user's memories by dimension, a page at a time."""
        ...

    async def user_purge(self, request: UserPurgeRequest) -> PurgeResult:
        """Forget all of a user, or one app, or one level."""
        ...

    async def user_switch(self, request: UserSwitchRequest) -> SwitchState:
        """Turn a user's memory (or one app's) on or off."""
        ...

    async def user_export(self, request: UserExportRequest) -> TaskAccepted:
        """Start an export; its task's file is read with ``export_chunk``."""
        ...

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        """Plain JSON Lines of a finished export from ``offset`` and the offset to go on from."""
        ...

    async def user_import(self, request: UserImportRequest) -> ImportResult:
        """Store exported lines for a user."""
        ...

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        """The app ("" = global) of each of a user's memories (tenancy checks)."""
        ...

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        """The user's raw switch map ("" = global switch)."""
        ...


class LocalPrivacy:
    """``PrivacyBackend`` in one process: mutations on the user's mailbox."""

    write_path: WritePath
    privacy: PrivacyService

    def attach_privacy(self, privacy: PrivacyService) -> None:
        """Use ``privacy`` and let the write path run export tasks (call before any task resumes)."""
        self.privacy = privacy
        self.write_path.handlers[KIND_EXPORT] = privacy.run_export

    async def user_list(self, request: UserListRequest) -> UserListPage:
        return await self.privacy.list_memories(request)

    async def user_purge(self, request: UserPurgeRequest) -> PurgeResult:
        privacy = self.privacy
        return await self.write_path.host.submit(request.user_id, lambda: privacy.purge(request))

    async def user_switch(self, request: UserSwitchRequest) -> SwitchState:
        privacy = self.privacy
        return await self.write_path.host.submit(request.user_id, lambda: privacy.set_switch(request))

    async def user_export(self, request: UserExportRequest) -> TaskAccepted:
        return await self.write_path.accept(request.user_id, KIND_EXPORT, request.model_dump(mode="json"))

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        return await self.privacy.export_chunk(request.user_id, request.task_id, offset, max_bytes)

    async def user_import(self, request: UserImportRequest) -> ImportResult:
        privacy = self.privacy
        return await self.write_path.host.submit(request.user_id, lambda: privacy.import_lines(request))

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        return await self.privacy.memory_apps(request.user_id, list(request.memory_ids))

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        return await self.privacy.switches(user_id)


class RayPrivacy:
    """``PrivacyBackend`` over Ray: every operation goes to the shard actor that owns the user."""

    def shard(self, user_id: str) -> ActorHandle[Any]:
        """The shard actor that owns ``user_id`` (provided by the class this is mixed into)."""
        raise NotImplementedError

    async def user_list(self, request: UserListRequest) -> UserListPage:
        return await unwrap(self.shard(request.user_id).user_list.remote(request))

    async def user_purge(self, request: UserPurgeRequest) -> PurgeResult:
        return await unwrap(self.shard(request.user_id).user_purge.remote(request))

    async def user_switch(self, request: UserSwitchRequest) -> SwitchState:
        return await unwrap(self.shard(request.user_id).user_switch.remote(request))

    async def user_export(self, request: UserExportRequest) -> TaskAccepted:
        return await unwrap(self.shard(request.user_id).user_export.remote(request))

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        return await unwrap(self.shard(request.user_id).export_chunk.remote(request, offset, max_bytes))

    async def user_import(self, request: UserImportRequest) -> ImportResult:
        return await unwrap(self.shard(request.user_id).user_import.remote(request))

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        return await unwrap(self.shard(request.user_id).memory_apps.remote(request))

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        return await unwrap(self.shard(user_id).switches.remote(user_id))


class ForwardPrivacy:
    """The privacy operations of a class holding a ``PrivacyBackend`` (shard actor, ingress)."""

    async def privacy_backend(self) -> PrivacyBackend:
        """The backend to forward to (provided by the class this is mixed into)."""
        raise NotImplementedError

    async def user_list(self, r: UserListRequest) -> UserListPage:
        return await (await self.privacy_backend()).user_list(r)

    async def user_purge(self, r: UserPurgeRequest) -> PurgeResult:
        return await (await self.privacy_backend()).user_purge(r)

    async def user_switch(self, r: UserSwitchRequest) -> SwitchState:
        return await (await self.privacy_backend()).user_switch(r)

    async def user_export(self, r: UserExportRequest) -> TaskAccepted:
        return await (await self.privacy_backend()).user_export(r)

    async def export_chunk(
        self, r: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        return await (await self.privacy_backend()).export_chunk(r, offset, max_bytes)

    async def user_import(self, r: UserImportRequest) -> ImportResult:
        return await (await self.privacy_backend()).user_import(r)

    async def memory_apps(self, r: MemoryAppsRequest) -> dict[str, str]:
        return await (await self.privacy_backend()).memory_apps(r)

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        return await (await self.privacy_backend()).switches(user_id)
