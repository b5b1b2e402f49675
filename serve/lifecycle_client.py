"""The lifecycle routes (L2, L6) in the typed clients: mixed into ``EngramClient`` and its async twin."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from models.api import MemoryView, RestoreRequest, SessionCloseRequest, SessionCloseResult
from serve.client_calls import Call

PREFIX = "/memory/v1"


def _call(path: str, request: Any, result: Any) -> Any:
    return Call(f"{PREFIX}/{path}", request, TypeAdapter(result))


class LifecycleClient:
    """Blocking ``session/close`` and ``restore``; needs ``send`` from ``EngramClient``."""

    def send(self, call: Any) -> Any:
        """Provided by the client this is mixed into."""
        raise NotImplementedError

    def session_close(self, r: SessionCloseRequest) -> SessionCloseResult:
        """Close a session: promote, drop, keep a continuity memory (L6)."""
        result: SessionCloseResult = self.send(_call("session/close", r, SessionCloseResult))
        return result

    def restore(self, r: RestoreRequest) -> MemoryView:
        """Bring an archived memory back to ACTIVE."""
        result: MemoryView = self.send(_call("restore", r, MemoryView))
        return result


class AsyncLifecycleClient:
    """Asyncio ``session/close`` and ``restore``; needs ``send`` from ``AsyncEngramClient``."""

    async def send(self, call: Any) -> Any:
        """Provided by the client this is mixed into."""
        raise NotImplementedError

    async def session_close(self, r: SessionCloseRequest) -> SessionCloseResult:
        """Close a session: promote, drop, keep a continuity memory (L6)."""
        result: SessionCloseResult = await self.send(_call("session/close", r, SessionCloseResult))
        return result

    async def restore(self, r: RestoreRequest) -> MemoryView:
        """Bring an archived memory back to ACTIVE."""
        result: MemoryView = await self.send(_call("restore", r, MemoryView))
        return result
