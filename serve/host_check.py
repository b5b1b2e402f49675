"""With authentication off, only this machine's names may address Engram (DNS rebinding, SPEC P7).

With no API keys every request is admin. A web page the user visits can point a name of its own
at 127.0.0.1 (DNS rebinding) and make the browser send it requests that reach Engram with that
name in ``Host``; a page's own requests carry its ``Origin``. So with auth off every HTTP request
(every route: the API, ``/mcp``, ``/ui``, ``/healthz``, export downloads) must name a loopback
host (127.0.0.1, localhost, [::1], any port) in ``Host``, and in ``Origin`` when it has one, or it
is refused with 40303 before any route runs. With keys on, the key is the guard and any name goes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from engram.models.errors import EngramError, ErrorCode
from engram.serve.auth import Authenticator
from engram.serve.envelope import envelope
from engram.serve.network import LOOPBACK_NAMES


def authority_host(authority: str) -> str | None:
    """The host of a ``Host`` value (``name``, ``name:port``, ``[v6]`` or ``[v6]:port``), lowercased;
    None when it is not of that form."""
    value = authority.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end > 0 else "x"
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return value[1:end]
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None  # a bare IPv6 address or junk: browsers always bracket IPv6 hosts
    return name or None


def loopback_host_header(host: str | None) -> bool:
    """Whether a ``Host`` header names this machine by a loopback name."""
    name = authority_host(host) if host is not None else None
    return name is not None and name in LOOPBACK_NAMES


def loopback_origin(origin: str) -> bool:
    """Whether an ``Origin`` header is a page served from a loopback name (``null`` is not:
    sandboxed frames and local files send it)."""
    try:
        parts = urlsplit(origin.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host is not None and host.lower() in LOOPBACK_NAMES


def refusal(host: str | None, origin: str | None) -> str | None:
    """Why a request with these headers may not reach Engram with auth off, or None."""
    if not loopback_host_header(host):
        return (
            "with authentication off Engram answers only requests addressed to 127.0.0.1, localhost or [::1]"
        )
    if origin is not None and not loopback_origin(origin):
        return "with authentication off Engram answers only pages served from 127.0.0.1, localhost or [::1]"
    return None


class LoopbackHostCheck:
    """ASGI middleware: with auth off, refuses with 40303 any request whose ``Host`` (or ``Origin``,
    when present) is not a loopback name. Asks ``authenticator`` per request (keys can change)."""

    def __init__(self, app: ASGIApp, authenticator: Callable[[], Authenticator]) -> None:
        self.app = app
        self.authenticator = authenticator

    def _auth_on(self) -> bool:
        try:
            return self.authenticator().enabled
        except EngramError:
            return False  # none installed yet: check, the auth guard refuses the rest anyway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._auth_on():
            await self.app(scope, receive, send)
            return
        host: str | None = None
        origin: str | None = None
        for key, value in scope.get("headers") or []:
            name = key.decode("latin-1").lower()
            if name == "host":
                # Two Host headers are a smuggling attempt, never a browser: refuse them.
                host = value.decode("latin-1") if host is None else ""
            elif name == "origin":
                origin = value.decode("latin-1") if origin is None else ""
        why = refusal(host, origin)
        if why is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await envelope(ErrorCode.FORBIDDEN, why, uuid.uuid4().hex)(scope, receive, send)
