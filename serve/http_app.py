"""The HTTP contract (SPEC C1-C9) as a FastAPI application over an ``EngramBackend``.

Every answer is the envelope ``{code, msg, trace_id, data}``; the HTTP status mirrors the code's
class. Validation messages name fields and error kinds, never the values sent (they may be private).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchDeleteRequest,
    ChangeLogPage,
    ChangeLogRequest,
    DeleteRequest,
    DeleteResult,
    Envelope,
    HistoryRequest,
    HistoryResponse,
    MemoryCreated,
    MemoryView,
    RecallRequest,
    RecallResponse,
    RestoreRequest,
    SessionCloseRequest,
    SessionCloseResult,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
)
from models.errors import EngramError, ErrorCode
from serve.auth import Authenticator, AuthGuard
from serve.backend import EngramBackend
from serve.envelope import ERROR_RESPONSES, envelope, trace_id_of
from serve.privacy_routes import add_privacy_routes, memory_apps_lookup

log = logging.getLogger(__name__)

PREFIX = "/memory/v1"
RECALL_PATH = f"{PREFIX}/recall"
# Statuses Starlette itself answers with, as envelope codes (anything else 4xx: a bad request).
_HTTP_CODES = {
    401: ErrorCode.UNAUTHENTICATED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    429: ErrorCode.RATE_LIMITED,
    500: ErrorCode.DEPENDENCY_UNAVAILABLE,
    503: ErrorCode.DEPENDENCY_UNAVAILABLE,
}


class BodyLimit:
    """Refuses bodies over ``limit`` bytes with 40001 before any parsing (C1)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise _TooLargeError
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLargeError:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = envelope(
            ErrorCode.BAD_PARAMETER, f"request body exceeds {self.limit} bytes", uuid.uuid4().hex
        )
        await response(scope, receive, send)


class _TooLargeError(Exception):
    pass


def build_http_app(
    backend: Callable[[], EngramBackend],
    *,
    auth: Callable[[], Authenticator],
    max_body_bytes: int = 1024 * 1024,
    recall_only: bool = False,
) -> FastAPI:
    """The FastAPI application; ``backend`` and ``auth`` are called per request (the replica sets them).

    ``auth`` has no default: a caller says which authenticator guards the routes (a replica passes
    its own, built before the app).

    ``recall_only``: just the recall route, answered at the root of its own Serve application
    (route prefix ``RECALL_PATH``), with the same envelope, errors, limits and authentication.
    """
    app = FastAPI(
        title="Engram",
        version="0.1.0",
        description="Long-term memory for LLM agents. Every route answers {code, msg, trace_id, data}.",
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['type']}"
            for e in exc.errors()
        )
        return envelope(ErrorCode.BAD_PARAMETER, f"bad parameter: {problems}", trace_id_of(request))

    @app.exception_handler(EngramError)
    async def _engram(request: Request, exc: EngramError) -> JSONResponse:
        return envelope(exc.code, exc.message, trace_id_of(request))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (a body that is not JSON, an unknown path or method) answer in
        # the same envelope as everything else, never as {"detail": ...}.
        code = _HTTP_CODES.get(exc.status_code, ErrorCode.BAD_PARAMETER)
        return envelope(code, str(exc.detail), trace_id_of(request))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        trace_id = trace_id_of(request)
        log.error("unhandled %s on %s (trace %s)", type(exc).__name__, request.url.path, trace_id)
        return envelope(ErrorCode.DEPENDENCY_UNAVAILABLE, "a dependency failed; retry later", trace_id)

    def route(path: str, data_model: Any) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
        return app.post(f"{PREFIX}/{path}", response_model=Envelope[data_model], responses=ERROR_RESPONSES)

    def ok(request: Request, data: BaseModel) -> JSONResponse:
        return envelope(ErrorCode.OK, "ok", trace_id_of(request), data)

    recall_path = "" if recall_only else RECALL_PATH

    @app.post(recall_path, response_model=Envelope[RecallResponse], responses=ERROR_RESPONSES)
    async def recall(body: RecallRequest, request: Request) -> JSONResponse:
        result = await backend().recall(body)
        if not result.hit:
            return envelope(ErrorCode.NO_RELEVANT_MEMORY, "no relevant memory", trace_id_of(request), result)
        return ok(request, result)

    guard = {"prefix": PREFIX, "authenticator": auth, "memory_apps": lambda: memory_apps_lookup(backend)}
    if recall_only:
        app.add_middleware(AuthGuard, **guard)  # type: ignore[arg-type]
        app.add_middleware(BodyLimit, limit=max_body_bytes)
        return app

    @route("add", TaskAccepted)
    async def add(body: AddRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().add(body))

    @route("task", TaskView)
    async def task(body: TaskRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().task(body))

    @route("add_structured", MemoryCreated | TaskAccepted)
    async def add_structured(body: AddStructuredRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().add_structured(body))

    @route("update", MemoryView)
    async def update(body: UpdateRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().update(body))

    @route("delete", DeleteResult)
    async def delete(body: DeleteRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().delete(body))

    @route("batch_delete", DeleteResult)
    async def batch_delete(body: BatchDeleteRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().batch_delete(body))

    @route("history", HistoryResponse)
    async def history(body: HistoryRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().history(body))

    @route("change_log", ChangeLogPage)
    async def change_log(body: ChangeLogRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().change_log(body))

    @route("session/close", SessionCloseResult)
    async def session_close(body: SessionCloseRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().session_close(body))

    @route("restore", MemoryView)
    async def restore(body: RestoreRequest, request: Request) -> JSONResponse:
        return ok(request, await backend().restore(body))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    add_privacy_routes(app, PREFIX, backend, ok)
    app.add_middleware(AuthGuard, **guard)  # type: ignore[arg-type]
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    return app
