"""The privacy routes (SPEC C7) in the typed clients: mixed into ``EngramClient`` and its async twin."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from models.api import (
    TaskAccepted,
    UserExportRequest,
    UserImportRequest,
    UserListRequest,
    UserPurgeRequest,
    UserSwitchRequest,
)
from models.privacy import ExportDownloadRequest, ImportResult, PurgeResult, SwitchState, UserListPage
from serve.client_calls import Call, EngramApiError

T = TypeVar("T")
PREFIX = "/memory/v1"
DOWNLOAD = f"{PREFIX}/user/export/download"


def _call(path: str, request: BaseModel, result: Any) -> Any:
    return Call(f"{PREFIX}/{path}", request, TypeAdapter(result))


def _refusal(response: httpx.Response, body: bytes) -> Exception:
    try:
        payload = json.loads(body)
        return EngramApiError(int(payload["code"]), str(payload["msg"]), str(payload["trace_id"]))
    except (ValueError, KeyError, TypeError):
        return EngramApiError(50301, f"download failed with HTTP {response.status_code}", "")


class PrivacyClient:
    """Blocking privacy operations; needs ``send`` and ``_http`` from ``EngramClient``."""

    _http: httpx.Client

    def send(self, call: Any) -> Any:
        """Provided by the client this is mixed into."""
        raise NotImplementedError

    def user_list(self, r: UserListRequest) -> UserListPage:
        result: UserListPage = self.send(_call("user/list", r, UserListPage))
        return result

    def user_purge(self, r: UserPurgeRequest) -> PurgeResult:
        result: PurgeResult = self.send(_call("user/purge", r, PurgeResult))
        return result

    def user_switch(self, r: UserSwitchRequest) -> SwitchState:
        result: SwitchState = self.send(_call("user/switch", r, SwitchState))
        return result

    def user_export(self, r: UserExportRequest) -> TaskAccepted:
        result: TaskAccepted = self.send(_call("user/export", r, TaskAccepted))
        return result

    def user_import(self, r: UserImportRequest) -> ImportResult:
        result: ImportResult = self.send(_call("user/import", r, ImportResult))
        return result

    def export_lines(self, r: ExportDownloadRequest) -> Iterator[str]:
        """The lines of a finished export, streamed (EngramApiError when there is none)."""
        with self._http.stream("POST", DOWNLOAD, json=r.model_dump(mode="json")) as response:
            if response.status_code != 200 or "ndjson" not in response.headers.get("content-type", ""):
                raise _refusal(response, response.read())
            yield from (line for line in response.iter_lines() if line)


class AsyncPrivacyClient:
    """Asyncio privacy operations; needs ``send`` and ``_http`` from ``AsyncEngramClient``."""

    _http: httpx.AsyncClient

    async def send(self, call: Any) -> Any:
        """Provided by the client this is mixed into."""
        raise NotImplementedError

    async def user_list(self, r: UserListRequest) -> UserListPage:
        result: UserListPage = await self.send(_call("user/list", r, UserListPage))
        return result

    async def user_purge(self, r: UserPurgeRequest) -> PurgeResult:
        result: PurgeResult = await self.send(_call("user/purge", r, PurgeResult))
        return result

    async def user_switch(self, r: UserSwitchRequest) -> SwitchState:
        result: SwitchState = await self.send(_call("user/switch", r, SwitchState))
        return result

    async def user_export(self, r: UserExportRequest) -> TaskAccepted:
        result: TaskAccepted = await self.send(_call("user/export", r, TaskAccepted))
        return result

    async def user_import(self, r: UserImportRequest) -> ImportResult:
        result: ImportResult = await self.send(_call("user/import", r, ImportResult))
        return result

    async def export_lines(self, r: ExportDownloadRequest) -> AsyncIterator[str]:
        """The lines of a finished export, streamed (EngramApiError when there is none)."""
        async with self._http.stream("POST", DOWNLOAD, json=r.model_dump(mode="json")) as response:
            if response.status_code != 200 or "ndjson" not in response.headers.get("content-type", ""):
                raise _refusal(response, await response.aread())
            async for line in response.aiter_lines():
                if line:
                    yield line
