"""The HTTP contract (SPEC C1-C9) as a FastAPI application over an ``EngramBackend``.

Every answer is the envelope ``{code, msg, trace_id, data}``; the HTTP status mirrors the code's
class. Validation messages name fields and error kinds, never the values sent (they may be private).
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.models.api import Envelope
from engram.models.errors import EngramError, ErrorCode
from engram.models.tracing import TRACING
from engram.serve.auth import Authenticator, AuthGuard
from engram.serve.backend import EngramBackend
from engram.serve.body import ParsedBodyRoute
from engram.serve.console import add_console_route
from engram.serve.envelope import ERROR_RESPONSES, TRACE_HEADER, envelope, trace_id_of
from engram.serve.host_check import LoopbackHostCheck
from engram.serve.mcp_routes import add_mcp_route
from engram.serve.operations import BY_NAME, OPERATIONS, PREFIX, Operation, Operations
from engram.serve.privacy_routes import add_export_download_route, memory_apps_lookup
from engram.serve.tenancy import REACH_KEY, within_reach

log = logging.getLogger(__name__)

RECALL_PATH = Operations.recall.url_path
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
    mcp: bool = False,
) -> FastAPI:
    """The FastAPI application; ``backend`` and ``auth`` are called per request (the replica sets them).

    ``auth`` has no default: a caller says which authenticator guards the routes (a replica passes
    its own, built before the app).

    ``recall_only``: just the recall route, answered at the root of its own Serve application
    (route prefix ``RECALL_PATH``), with the same envelope, errors, limits and authentication.
    ``mcp``: also serve the MCP tools at ``/mcp`` over these routes (``serve.mcp_routes``).
    """
    app = FastAPI(
        title="Engram",
        version="0.1.0",
        description="Long-term memory for LLM agents. Every route answers {code, msg, trace_id, data}.",
    )
    # Bodies are read by serve.body, the same parse (and the same 40001) as the auth guard's.
    app.router.route_class = ParsedBodyRoute

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

    # Every route comes from the operations table; the recall app answers recall at its root.
    for op in (Operations.recall,) if recall_only else OPERATIONS:
        _add_route(app, "" if recall_only else op.url_path, op, backend)

    guard = {
        "prefix": PREFIX,
        "authenticator": auth,
        "memory_apps": lambda: memory_apps_lookup(backend),
        "task_owner": lambda: backend().task_owner,
    }
    if recall_only:
        app.add_middleware(AuthGuard, **guard)  # type: ignore[arg-type]
        app.add_middleware(BodyLimit, limit=max_body_bytes)
        app.add_middleware(LoopbackHostCheck, authenticator=auth)  # outermost: before anything reads
        return app

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    add_export_download_route(app, PREFIX, backend)
    add_console_route(app)  # static files only: the page calls the routes above with the user's key
    if mcp:
        add_mcp_route(app, auth)
    app.add_middleware(AuthGuard, **guard)  # type: ignore[arg-type]
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(LoopbackHostCheck, authenticator=auth)  # outermost: before anything reads
    return app


def _add_route(
    app: FastAPI, path: str, op: Operation[Any, Any], backend: Callable[[], EngramBackend]
) -> None:
    responses: dict[int | str, dict[str, Any]] = dict(ERROR_RESPONSES)
    if op.links:
        responses[200] = {"links": openapi_links(op)}
    app.post(
        path,
        response_model=Envelope[op.response],  # type: ignore[name-defined]
        responses=responses,
        operation_id=op.name,
        summary=op.name.replace("_", " "),
        description=op.doc,
        name=op.name,
    )(_endpoint(op, backend))


def _endpoint(op: Operation[Any, Any], backend: Callable[[], EngramBackend]) -> Callable[..., Any]:
    """The route function of ``op``: the body validated as ``op.request``, the result enveloped."""

    async def endpoint(body: BaseModel, request: Request) -> JSONResponse:
        # What the guard decided (the caller and the named objects out of its reach) narrows the call.
        reach = request.scope.get(REACH_KEY)
        # The caller's traceparent continues here; its trace id is the envelope's unless the
        # caller named one (x-trace-id), so an error's trace_id finds its spans.
        named = TRACING.identifiers(getattr(body, "user_id", None), getattr(body, "app_id", None))
        with TRACING.continued(request.headers, f"engram.{op.name}", {"engram.op": op.name, **named}):
            if TRACE_HEADER not in request.headers and (otel_trace := TRACING.trace_id()) is not None:
                request.state.trace_id = otel_trace
            result = await within_reach(op.name, body, reach, lambda narrowed: backend().call(op, narrowed))
        trace_id = trace_id_of(request)
        if op.empty_is_miss and not getattr(result, "hit", True):
            return envelope(ErrorCode.NO_RELEVANT_MEMORY, "no relevant memory", trace_id, result)
        return envelope(ErrorCode.OK, "ok", trace_id, result)

    # FastAPI reads the body's model from the signature: the operation's request model.
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=op.request),
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
        ],
        return_annotation=JSONResponse,
    )
    endpoint.__name__ = op.name
    return endpoint


def openapi_links(op: Operation[Any, Any]) -> dict[str, Any]:
    """The OpenAPI links of ``op``'s success answer (what a stateful fuzzer follows)."""
    return {
        f"{op.name}_to_{link.target}": {
            "operationId": BY_NAME[link.target].name,  # routes' operation ids are the names
            "requestBody": dict(link.body),
        }
        for link in op.links
    }
