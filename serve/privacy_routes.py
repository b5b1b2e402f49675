"""The privacy routes of the HTTP contract (SPEC C7): user/list, purge, switch, export, import.

``user/export`` answers a task id at once; when ``task`` says DONE, ``user/export/download``
streams the file as JSON Lines (``application/x-ndjson``), a chunk at a time from the shard that
wrote it, so neither side holds the whole export in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from models.api import (
    Envelope,
    TaskAccepted,
    UserExportRequest,
    UserImportRequest,
    UserListRequest,
    UserPurgeRequest,
    UserSwitchRequest,
)
from models.errors import EngramError, ErrorCode
from models.privacy import (
    ExportDownloadRequest,
    ImportResult,
    MemoryAppsRequest,
    PurgeResult,
    SwitchState,
    UserListPage,
)
from serve.envelope import ERROR_RESPONSES
from serve.privacy_backend import PrivacyBackend

NDJSON = "application/x-ndjson"


def memory_apps_lookup(
    backend: Callable[[], PrivacyBackend],
) -> Callable[[str, Sequence[str]], Awaitable[Mapping[str, str]]]:
    """The tenancy check's lookup of memories' apps; 40001 for ids that are not ids."""

    async def lookup(user_id: str, memory_ids: Sequence[str]) -> Mapping[str, str]:
        try:
            request = MemoryAppsRequest(user_id=user_id, memory_ids=list(memory_ids))
        except ValidationError:
            raise EngramError(ErrorCode.BAD_PARAMETER, "bad parameter: memory ids") from None
        return await backend().memory_apps(request)

    return lookup


def add_privacy_routes(
    app: FastAPI,
    prefix: str,
    backend: Callable[[], PrivacyBackend],
    ok: Callable[[Request, BaseModel], JSONResponse],
    chunk_bytes: int = 256 * 1024,
) -> None:
    """Register the privacy routes on ``app`` (``ok`` builds the success envelope)."""

    def route(path: str, data_model: Any) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
        return app.post(f"{prefix}/{path}", response_model=Envelope[data_model], responses=ERROR_RESPONSES)

    @route("user/list", UserListPage)
    async def user_list(body: UserListRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().user_list(body))

    @route("user/purge", PurgeResult)
    async def user_purge(body: UserPurgeRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().user_purge(body))

    @route("user/switch", SwitchState)
    async def user_switch(body: UserSwitchRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().user_switch(body))

    @route("user/export", TaskAccepted)
    async def user_export(body: UserExportRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().user_export(body))

    @app.post(
        f"{prefix}/user/export/download",
        response_class=StreamingResponse,
        responses={
            200: {"content": {NDJSON: {}}, "description": "the export, one memory per line"},
            **ERROR_RESPONSES,
        },
    )
    async def user_export_download(body: ExportDownloadRequest) -> StreamingResponse:
        # The first chunk is read before answering, so an unknown export is still an envelope.
        first, offset = await backend().export_chunk(body, 0, chunk_bytes)

        async def rest() -> AsyncIterator[bytes]:
            yield first
            position = offset
            while position is not None:
                chunk, position = await backend().export_chunk(body, position, chunk_bytes)
                yield chunk

        return StreamingResponse(rest(), media_type=NDJSON)

    @route("user/import", ImportResult)
    async def user_import(body: UserImportRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().user_import(body))
