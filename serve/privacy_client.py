"""The export download (SPEC C7) in the typed clients: a streamed answer, so not a table operation.

Mixed into ``EngramClient`` and its async twin; the other privacy operations come from the table.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx

from engram.models.privacy import ExportDownloadRequest
from engram.serve.client_calls import EngramApiError
from engram.serve.operations import PREFIX

DOWNLOAD = f"{PREFIX}/user/export/download"


def _refusal(response: httpx.Response, body: bytes) -> Exception:
    try:
        payload = json.loads(body)
        return EngramApiError(int(payload["code"]), str(payload["msg"]), str(payload["trace_id"]))
    except (ValueError, KeyError, TypeError):
        return EngramApiError(50301, f"download failed with HTTP {response.status_code}", "")


class ExportDownload:
    """Blocking download of a finished export; needs ``_http`` from ``EngramClient``."""

    _http: httpx.Client

    def export_lines(self, r: ExportDownloadRequest) -> Iterator[str]:
        """The lines of a finished export, streamed (EngramApiError when there is none)."""
        with self._http.stream("POST", DOWNLOAD, json=r.model_dump(mode="json")) as response:
            if response.status_code != 200 or "ndjson" not in response.headers.get("content-type", ""):
                raise _refusal(response, response.read())
            yield from (line for line in response.iter_lines() if line)


class AsyncExportDownload:
    """Asyncio download of a finished export; needs ``_http`` from ``AsyncEngramClient``."""

    _http: httpx.AsyncClient

    async def export_lines(self, r: ExportDownloadRequest) -> AsyncIterator[str]:
        """The lines of a finished export, streamed (EngramApiError when there is none)."""
        async with self._http.stream("POST", DOWNLOAD, json=r.model_dump(mode="json")) as response:
            if response.status_code != 200 or "ndjson" not in response.headers.get("content-type", ""):
                raise _refusal(response, await response.aread())
            async for line in response.aiter_lines():
                if line:
                    yield line
