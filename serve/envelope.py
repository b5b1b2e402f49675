"""The response envelope every route answers with, ``{code, msg, trace_id, data}`` (SPEC M4, C9),
and the request's trace id. A leaf module: the routes and the auth guard both answer with it."""

from __future__ import annotations

import re
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from engram.models.api import Envelope
from engram.models.errors import ErrorCode

TRACE_HEADER = "x-trace-id"
_TRACE_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def envelope(code: ErrorCode, msg: str, trace_id: str, data: Any = None) -> JSONResponse:
    """The JSON response for a code, with the HTTP status of its class and the trace id header."""
    payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return JSONResponse(
        {"code": int(code), "msg": msg, "trace_id": trace_id, "data": payload},
        status_code=code.http_status,
        headers={TRACE_HEADER: trace_id},
    )


def trace_id_of(request: Request) -> str:
    """The caller's trace id when it is well formed, else a new one (kept for the whole request)."""
    cached = getattr(request.state, "trace_id", None)
    if isinstance(cached, str):
        return cached
    given = request.headers.get(TRACE_HEADER, "")
    trace_id = given if _TRACE_RE.match(given) else uuid.uuid4().hex
    request.state.trace_id = trace_id
    return trace_id


def _error_responses() -> dict[int | str, dict[str, Any]]:
    described = {
        400: "bad parameter (40001)",
        401: "no valid API key (40101)",
        403: "switched off, cross-app not enabled, or outside the key's tenancy (40301-40303)",
        404: "not found (40401)",
        429: "capacity full, important limit, or rate limited (42901-42903)",
        500: "extraction failed (50001)",
        503: "a dependency is unavailable or the service is starting (50301)",
        504: "recall timed out (50401)",
    }
    return {status: {"model": Envelope[None], "description": text} for status, text in described.items()}


ERROR_RESPONSES = _error_responses()
"""The error envelopes every route may answer, for the OpenAPI document (``responses=``)."""
