"""The MCP server on the HTTP app: streamable HTTP at ``/mcp``, stateless with JSON answers (#14).

Stateless, so any ingress replica answers any request (no session to keep). Each tool call runs
the app's own HTTP routes in process (``httpx.ASGITransport``) with the caller's API key headers:
the auth guard, tenancy, switches, rate limits and validation apply exactly as over HTTP; every
MCP request itself (initialize, tools/list) needs a valid key when keys are configured. The MCP
session manager runs inside the app's lifespan (Serve runs an ingress app's lifespan).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engram.models.errors import EngramError
from engram.serve.auth import Authenticator, presented_key
from engram.serve.auth_throttle import peer_of
from engram.serve.client import AsyncEngramClient
from engram.serve.envelope import envelope
from engram.serve.mcp_tools import CLIENT, Credentials, build_mcp_server

MCP_PATH = "/mcp"


def add_mcp_route(app: FastAPI, auth: Callable[[], Authenticator]) -> None:
    """Serve Engram's MCP tools at ``/mcp`` on ``app`` (call once the app's routes exist)."""

    @asynccontextmanager
    async def clients(credentials: Credentials) -> AsyncIterator[AsyncEngramClient]:
        headers = dict(credentials)
        # The routes see the MCP caller's address, so its failed keys count against it alone.
        transport = httpx.ASGITransport(app=app, client=(headers.pop(CLIENT, "127.0.0.1"), 0))
        async with httpx.AsyncClient(
            # Loopback: the app's Host check (auth off) answers only this machine's names.
            transport=transport,
            base_url="http://127.0.0.1",
            headers=headers,
            timeout=60,
        ) as http:
            yield AsyncEngramClient("http://127.0.0.1", client=http)

    def bound_user(credentials: Credentials) -> str | None:
        authenticator = auth()
        if not authenticator.enabled:
            return None
        # Throttled like the guard: otherwise a bound key could be guessed here at full speed.
        client = authenticator.client_address(
            credentials.get(CLIENT, ""), credentials.get("x-forwarded-for", "")
        )
        try:
            return authenticator.authenticate(presented_key(credentials), client).user_id
        except EngramError:
            return None  # the call itself is refused with the guard's code

    server = build_mcp_server(clients, bound_user)
    # The app's own Host/Origin check (serve/host_check.py) guards /mcp as every route, with auth
    # off, answering in the envelope: the SDK's copy of it, decided once at build time, is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, transport_security=security
    )
    # The MCP endpoint as a route of this app (a mount at "/" would answer every unknown path),
    # behind the key check: every MCP request (initialize and tools/list too) needs a valid key.
    (endpoint,) = [r for r in mcp_app.routes if isinstance(r, Route) and r.path == MCP_PATH]
    app.router.routes.append(
        Route(MCP_PATH, endpoint=KeyRequired(endpoint.app, auth), methods=endpoint.methods)
    )
    _run_in_lifespan(app, server.session_manager.run)


class KeyRequired:
    """An ASGI app answering 40101 (in the envelope) unless the request carries a valid key (P9)."""

    def __init__(self, app: ASGIApp, auth: Callable[[], Authenticator]) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []
            }
            try:
                auth = self.auth()
                # Failed keys count against the caller's address, as on the HTTP routes.
                auth.authenticate(presented_key(headers), auth.client_address(*peer_of(scope)))
            except EngramError as exc:  # no key, a wrong one, or no authenticator yet (50301)
                await envelope(exc.code, exc.message, uuid.uuid4().hex)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _run_in_lifespan(app: FastAPI, context: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        async with context(), previous(asgi_app) as state:
            yield state

    app.router.lifespan_context = lifespan
