"""The privacy route outside the operations table (SPEC C7): the export download.

``user/export`` (a table operation) answers a task id at once; when ``task`` says DONE,
``user/export/download`` streams the file as JSON Lines (``application/x-ndjson``), a chunk at a
time from the shard that wrote it, so neither side holds the whole export in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from engram.models.errors import EngramError, ErrorCode
from engram.models.privacy import ExportDownloadRequest, MemoryAppsRequest
from engram.serve.envelope import ERROR_RESPONSES
from engram.serve.privacy_backend import PrivacyHelpers

NDJSON = "application/x-ndjson"


def memory_apps_lookup(
    backend: Callable[[], PrivacyHelpers],
) -> Callable[[str, Sequence[str]], Awaitable[Mapping[str, str]]]:
    """The tenancy check's lookup of memories' apps; 40001 for ids that are not ids."""

    async def lookup(user_id: str, memory_ids: Sequence[str]) -> Mapping[str, str]:
        try:
            request = MemoryAppsRequest(user_id=user_id, memory_ids=list(memory_ids))
        except ValidationError:
            raise EngramError(ErrorCode.BAD_PARAMETER, "bad parameter: memory ids") from None
        return await backend().memory_apps(request)

    return lookup


def add_export_download_route(
    app: FastAPI,
    prefix: str,
    backend: Callable[[], PrivacyHelpers],
    chunk_bytes: int = 256 * 1024,
) -> None:
    """Register ``user/export/download`` on ``app``."""

    @app.post(
        f"{prefix}/user/export/download",
        operation_id="user_export_download",
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
