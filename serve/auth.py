"""Authentication and tenancy (SPEC P4): API keys from config, each bound to the apps it may use.

A key is sent as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Without a valid key a
request gets 40101; a request for an app its key is not bound to, for the user's global memories
without ``global_scope``, for a user other than the one the key is bound to (``user_id``), or for a
privacy route (``user/*``) without the admin role gets 40303. With no key configured auth is off,
and the service then only listens on the loopback address. Authentication fails closed: each
replica builds its HTTP app only once its authenticator exists, and an authenticator that cannot
be had refuses the request (50301) instead of letting it through.

The rules (``authorize``) are a pure function of the key and the request body; ``AuthGuard`` is
the ASGI layer that applies them before a route sees the request.
"""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import AuthSettings
from engram.serve.body import content_type_of, parse_body, remember
from engram.serve.envelope import envelope
from engram.serve.operations import ACCESS_BY_PATH, Access

log = logging.getLogger(__name__)

ANY_APP = "*"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a key's name and what it may reach."""

    name: str
    app_ids: frozenset[str]
    global_scope: bool
    admin: bool
    # Set: every request must name this user (a personal agent's or the console's key).
    user_id: str | None = None

    def may_use_app(self, app_id: str) -> bool:
        """True when the key is bound to ``app_id`` ("" = the user's global memories)."""
        if self.admin:
            return True
        if not app_id:
            return self.global_scope
        return ANY_APP in self.app_ids or app_id in self.app_ids

    @property
    def all_apps(self) -> bool:
        """True when the key reaches every app."""
        return self.admin or (ANY_APP in self.app_ids and self.global_scope)


OPEN = Principal(name="auth-off", app_ids=frozenset({ANY_APP}), global_scope=True, admin=True)
"""The principal of every request while auth is off."""


class Authenticator:
    """Checks presented keys against the configured ones in constant time."""

    def __init__(self, settings: AuthSettings) -> None:
        self._keys = [
            (
                k.key.get_secret_value().encode(),
                Principal(k.name, frozenset(k.app_ids), k.global_scope, k.admin, k.user_id),
            )
            for k in settings.api_keys
        ]

    @property
    def enabled(self) -> bool:
        """True when at least one key is configured."""
        return bool(self._keys)

    def authenticate(self, presented: str | None) -> Principal:
        """The key's principal; 40101 when it is missing or matches no key."""
        if not self.enabled:
            return OPEN
        if not presented:
            raise EngramError(ErrorCode.UNAUTHENTICATED, "an API key is required")
        given = presented.encode()
        found: Principal | None = None
        for secret, principal in self._keys:
            # Every key is compared, so the time taken does not tell which one came close.
            if hmac.compare_digest(secret, given):
                found = principal
        if found is None:
            raise EngramError(ErrorCode.UNAUTHENTICATED, "the API key is not valid")
        return found


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries (``Authorization: Bearer`` or ``X-API-Key``), if any."""
    bearer = headers.get("authorization", "")
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip() or None
    return headers.get("x-api-key") or None


# --- the rules (pure) ---------------------------------------------------------------------------


def _forbid(message: str) -> EngramError:
    return EngramError(ErrorCode.FORBIDDEN, message)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def memory_ids_of(route: str, body: Mapping[str, Any]) -> list[str]:
    """The memory ids a route acts on (their apps are looked up before ``authorize``)."""
    if ACCESS_BY_PATH.get(route) is not Access.MEMORY:
        return []
    if "memory_ids" in body:
        ids = body.get("memory_ids")
        return [_text(i) for i in ids] if isinstance(ids, list) else []
    return [_text(body.get("memory_id"))]


def authorize(
    principal: Principal, route: str, body: Mapping[str, Any], memory_apps: Mapping[str, str]
) -> None:
    """40303 unless ``principal`` may call ``route`` with ``body``; ``memory_apps``: app of each memory id.

    Each route's ``Access`` comes from the operations table; a route outside it needs an admin key.
    """
    access = ACCESS_BY_PATH.get(route, Access.ADMIN)
    # Before the admin role: a user-bound admin key (the console) manages its own user only.
    bound = principal.user_id
    if bound is not None and access is not Access.OPEN and _text(body.get("user_id")) != bound:
        raise _forbid("this key is bound to another user")
    if principal.admin:
        return
    if access is Access.ADMIN:
        raise _forbid("this route needs an admin key")
    if access is Access.OPEN:
        return
    if access is Access.APP:
        app_id = _text(body.get("app_id"))
        if app_id and not principal.may_use_app(app_id):
            raise _forbid("this key is not bound to that app")
        # A GLOBAL memory (or one without app) belongs to the user's global memories; a batch
        # names a level per item.
        items = body.get("items")
        levels = [body.get("level")]
        if isinstance(items, list):
            levels += [i.get("level") for i in items if isinstance(i, Mapping)]
        if (not app_id or "GLOBAL" in levels) and not principal.may_use_app(""):
            raise _forbid("this key may not use the user's global memories")
        return
    if access is Access.RECALL:
        scope = body.get("scope") or {}
        scope = scope if isinstance(scope, Mapping) else {}
        # A profile request names its app at the top and always holds the user's global facts.
        app_id = _text(scope.get("app_id")) or _text(body.get("app_id"))
        if app_id and not principal.may_use_app(app_id):
            raise _forbid("this key is not bound to that app")
        if scope.get("include_global", True) is not False and not principal.may_use_app(""):
            raise _forbid("this key may not use the user's global memories")
        return
    if access is Access.CHANGE_LOG:
        app_id = _text(body.get("app_id"))
        if app_id and principal.may_use_app(app_id):
            return
        if not app_id and principal.all_apps:
            return
        raise _forbid("this key may only read the change log of its own apps")
    if access is Access.MEMORY:
        for memory_id in memory_ids_of(route, body):
            owner_app = memory_apps.get(memory_id)
            # Unknown ids pass: the route answers 40401 / not_found for them, revealing nothing.
            if owner_app is not None and not principal.may_use_app(owner_app):
                raise _forbid("this key is not bound to the app of that memory")
        return
    raise _forbid("this route needs an admin key")


# --- the ASGI layer -----------------------------------------------------------------------------

MemoryAppsLookup = Callable[[str, Sequence[str]], Awaitable[Mapping[str, str]]]


class AuthGuard:
    """Authenticates and authorizes every request under ``prefix`` before its route runs."""

    def __init__(
        self,
        app: ASGIApp,
        prefix: str,
        authenticator: Callable[[], Authenticator],
        memory_apps: Callable[[], MemoryAppsLookup],
    ) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/") + "/"
        self.authenticator = authenticator
        self.memory_apps = memory_apps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")) if scope["type"] == "http" else ""
        if not path.startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        try:
            auth = self.authenticator()
        except EngramError as exc:  # none installed yet: refuse, never let the request through
            await _refuse(exc, scope, receive, send)
            return
        if not auth.enabled:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        route = path[len(self.prefix) :]
        try:
            principal = auth.authenticate(presented_key(headers))
            raw, replay = await _buffer(receive)
            # The route's own parse (serve.body): a body it would refuse is 40001 for every key.
            body = parse_body(content_type_of(headers), raw)
            remember(scope, body)
            if not principal.admin or principal.user_id is not None:
                await self._authorize(principal, route, body)
        except EngramError as exc:
            # Names the key, never the body: ids and counts only in logs (P3).
            log.info("refused %s with %d (key %s)", route, exc.code.value, _key_name(auth, headers))
            await _refuse(exc, scope, receive, send)
            return
        await self.app(scope, replay, send)

    async def _authorize(self, principal: Principal, route: str, body: Mapping[str, Any]) -> None:
        ids = memory_ids_of(route, body)
        apps: Mapping[str, str] = {}
        user_id = body.get("user_id")
        if ids and isinstance(user_id, str | int):
            try:
                apps = await self.memory_apps()(str(user_id), ids)
            except EngramError as exc:
                if exc.code is not ErrorCode.BAD_PARAMETER:
                    raise
                # A malformed id or user: the route itself answers 40001.
        authorize(principal, route, body, apps)


async def _buffer(receive: Receive) -> tuple[bytes, Receive]:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def _refuse(exc: EngramError, scope: Scope, receive: Receive, send: Send) -> None:
    await envelope(exc.code, exc.message, uuid.uuid4().hex)(scope, receive, send)


def _key_name(auth: Authenticator, headers: Mapping[str, str]) -> str:
    try:
        return auth.authenticate(presented_key(headers)).name
    except EngramError:
        return "-"


AUTH_OFF_WARNING = (
    "AUTHENTICATION IS OFF: no API keys are configured (auth.api_keys); anyone who can reach this "
    "service can read and change every user's memories. Listening on loopback only."
)


def startup_notice(settings: AuthSettings, host: str) -> str | None:
    """Why the service must not start on ``host`` (None when it may), logging loudly when auth is off."""
    if settings.api_keys:
        log.info("authentication is on: %d API keys configured", len(settings.api_keys))
        return None
    log.warning(AUTH_OFF_WARNING)
    if host not in LOOPBACK_HOSTS:
        return (
            f"refusing to listen on {host}: authentication is off (no auth.api_keys configured); "
            "configure API keys or listen on 127.0.0.1"
        )
    return None
