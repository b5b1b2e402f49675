"""A typed HTTP client for Engram, sync and async, sharing one sans-I/O core.

Each operation is a ``Call`` (path, request model, response type); the two clients differ only in
how they send it. Failures raise ``EngramApiError`` carrying the C9 code and the trace id.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

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
from serve.client_calls import Call, EngramApiError
from serve.lifecycle_client import AsyncLifecycleClient, LifecycleClient
from serve.privacy_client import AsyncPrivacyClient, PrivacyClient

__all__ = ["AsyncEngramClient", "EngramApiError", "EngramClient"]

T = TypeVar("T")
PREFIX = "/memory/v1"


def _call(path: str, request: BaseModel, result: Any) -> Call[Any]:
    return Call(f"{PREFIX}/{path}", request, TypeAdapter(result))


class _Operations:
    """The calls of the HTTP contract, built once for both clients."""

    @staticmethod
    def add(r: AddRequest) -> Call[TaskAccepted]:
        return _call("add", r, TaskAccepted)

    @staticmethod
    def task(r: TaskRequest) -> Call[TaskView]:
        return _call("task", r, TaskView)

    @staticmethod
    def add_structured(r: AddStructuredRequest) -> Call[MemoryCreated | TaskAccepted]:
        return _call("add_structured", r, MemoryCreated | TaskAccepted)

    @staticmethod
    def recall(r: RecallRequest) -> Call[RecallResponse]:
        return _call("recall", r, RecallResponse)

    @staticmethod
    def update(r: UpdateRequest) -> Call[MemoryView]:
        return _call("update", r, MemoryView)

    @staticmethod
    def delete(r: DeleteRequest) -> Call[DeleteResult]:
        return _call("delete", r, DeleteResult)

    @staticmethod
    def batch_delete(r: BatchDeleteRequest) -> Call[DeleteResult]:
        return _call("batch_delete", r, DeleteResult)

    @staticmethod
    def history(r: HistoryRequest) -> Call[HistoryResponse]:
        return _call("history", r, HistoryResponse)

    @staticmethod
    def change_log(r: ChangeLogRequest) -> Call[ChangeLogPage]:
        return _call("change_log", r, ChangeLogPage)


ops = _Operations()


class EngramClient(PrivacyClient, LifecycleClient):
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
        return call.parse(self._http.post(call.path, json=call.body()))

    def add(self, r: AddRequest) -> TaskAccepted:
        return self.send(ops.add(r))

    def task(self, r: TaskRequest) -> TaskView:
        return self.send(ops.task(r))

    def add_structured(self, r: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        return self.send(ops.add_structured(r))

    def recall(self, r: RecallRequest) -> RecallResponse:
        return self.send(ops.recall(r))

    def update(self, r: UpdateRequest) -> MemoryView:
        return self.send(ops.update(r))

    def delete(self, r: DeleteRequest) -> DeleteResult:
        return self.send(ops.delete(r))

    def batch_delete(self, r: BatchDeleteRequest) -> DeleteResult:
        return self.send(ops.batch_delete(r))

    def history(self, r: HistoryRequest) -> HistoryResponse:
        return self.send(ops.history(r))

    def change_log(self, r: ChangeLogRequest) -> ChangeLogPage:
        return self.send(ops.change_log(r))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


class AsyncEngramClient(AsyncPrivacyClient, AsyncLifecycleClient):
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
        return call.parse(await self._http.post(call.path, json=call.body()))

    async def add(self, r: AddRequest) -> TaskAccepted:
        return await self.send(ops.add(r))

    async def task(self, r: TaskRequest) -> TaskView:
        return await self.send(ops.task(r))

    async def add_structured(self, r: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        return await self.send(ops.add_structured(r))

    async def recall(self, r: RecallRequest) -> RecallResponse:
        return await self.send(ops.recall(r))

    async def update(self, r: UpdateRequest) -> MemoryView:
        return await self.send(ops.update(r))

    async def delete(self, r: DeleteRequest) -> DeleteResult:
        return await self.send(ops.delete(r))

    async def batch_delete(self, r: BatchDeleteRequest) -> DeleteResult:
        return await self.send(ops.batch_delete(r))

    async def history(self, r: HistoryRequest) -> HistoryResponse:
        return await self.send(ops.history(r))

    async def change_log(self, r: ChangeLogRequest) -> ChangeLogPage:
        return await self.send(ops.change_log(r))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()
