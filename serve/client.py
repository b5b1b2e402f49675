"""A typed HTTP client for Engram, sync and async, sharing one sans-I/O core.

Every operation of ``serve.operations.Operations`` is a method of both clients (``client.add(...)``,
``await client.recall(...)``): each builds its ``Call`` and the client sends it. Failures raise
``EngramApiError`` carrying the C9 code and the trace id. A call made inside the caller's
OpenTelemetry span carries it (``traceparent``): with tracing on, Engram's spans join that trace.
"""

from __future__ import annotations

from typing import TypeVar

import httpx

from engram.serve.client_calls import AsyncSender, Call, EngramApiError, SyncSender, trace_headers
from engram.serve.operations import Operations
from engram.serve.privacy_client import AsyncExportDownload, ExportDownload

__all__ = ["AsyncEngramClient", "EngramApiError", "EngramClient"]

T = TypeVar("T")


class EngramClient(Operations, ExportDownload, SyncSender):
    """Blocking client: ``EngramClient("http://127.0.0.1:8000").recall(RecallRequest(...))``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        client: httpx.Client | None = None,
        api_key: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._http = client or httpx.Client(base_url=base_url, timeout=timeout_s, headers=headers)

    def send(self, call: Call[T]) -> T:
        """Send one operation and return its data."""
        return call.parse(self._http.post(call.path, json=call.body(), headers=trace_headers()))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


class AsyncEngramClient(Operations, AsyncExportDownload, AsyncSender):
    """Asyncio client with the same operations as ``EngramClient``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        client: httpx.AsyncClient | None = None,
        api_key: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._http = client or httpx.AsyncClient(base_url=base_url, timeout=timeout_s, headers=headers)

    async def send(self, call: Call[T]) -> T:
        """Send one operation and return its data."""
        return call.parse(await self._http.post(call.path, json=call.body(), headers=trace_headers()))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()
