"""What the HTTP ingress needs from the rest of Engram: the table's operations and four helpers.

The in-process implementation (``LocalBackend``) runs everything in one event loop; the Ray Serve
application implements the same protocol over deployment and actor handles (``RayBackend``); the
switch gate and the rate limiter wrap either (``BackendWrapper``: every method written out, so
mypy follows a call from the route to the backend that answers it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from pydantic import BaseModel

from engram.models.privacy import ExportDownloadRequest, MemoryAppsRequest
from engram.models.rules.task_reach import TaskOwner
from engram.serve.operations import Backend, Operation
from engram.serve.privacy_backend import PrivacyHelpers

Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")


class EngramBackend(Backend, PrivacyHelpers, Protocol):
    """``call`` runs any operation of ``serve.operations``; errors are ``EngramError`` with a C9 code."""


class BackendWrapper:
    """An ``EngramBackend`` that hands everything to ``inner``; a subclass overrides what it checks."""

    def __init__(self, inner: EngramBackend) -> None:
        self.inner = inner

    async def call(self, op: Operation[Req, Res], request: Req) -> Res:
        """Run ``op`` on the wrapped backend."""
        return await self.inner.call(op, request)

    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        """A finished export's bytes from ``offset`` (the wrapped backend's)."""
        return await self.inner.export_chunk(request, offset, max_bytes)

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        """The app of each named memory (the wrapped backend's)."""
        return await self.inner.memory_apps(request)

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        """The user's raw switch map (the wrapped backend's)."""
        return await self.inner.switches(user_id)

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        """Whose a task is (the wrapped backend's)."""
        return await self.inner.task_owner(task_id)
