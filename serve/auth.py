"""Authentication and tenancy (SPEC P4): API keys from config, each bound to the apps it may use.

A key is sent as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Without a valid key a
request gets 40101; a request for an app its key is not bound to, for the user's global memories
without ``global_scope``, for a user other than the one the key is bound to (``user_id``), or for a
privacy route (``user/*``) without the admin role gets 40303. A memory or task named by id and out
of the key's reach is answered as an unknown one, 40401 (``tenancy``). With no key configured auth is off,
and the service then only listens on the loopback address. Authentication fails closed: each
replica builds its HTTP app only once its authenticator exists, and an authenticator that cannot
be had refuses the request (50301) instead of letting it through.

The rules (``authorize``) are a pure function of the key and the request body; ``AuthGuard`` is
the ASGI layer that applies them before a route sees the request.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.models.errors import EngramError, ErrorCode
from engram.models.ids import is_memory_id
from engram.models.metrics import METRICS
from engram.models.rules.task_reach import TaskOwner
from engram.models.settings import ApiKey, AuthSettings, LimitSettings, key_digest
from engram.serve.auth_throttle import FailureThrottle, client_address, peer_of
from engram.serve.body import content_type_of, parse_body, remember
from engram.serve.envelope import envelope
from engram.serve.operations import ACCESS_BY_PATH, Access
from engram.serve.rate_limit import calling_as
from engram.serve.tenancy import REACH_KEY, Reach, check_task, hidden_memories

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
    """Checks presented keys against the configured ones: SHA-256 digests compared in constant time.

    Reads ``settings.api_keys`` on every call, so keys added or revoked at run time (O1) count at
    once. With ``limits``, failures are throttled per client address (``serve.auth_throttle``).
    Never logs a key or a digest.
    """

    def __init__(
        self,
        settings: AuthSettings,
        limits: LimitSettings | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._limits = limits
        self._throttle = FailureThrottle(limits, monotonic=monotonic) if limits is not None else None
        self._source: list[ApiKey] = []
        self._keys: list[tuple[bytes, Principal]] = []

    def _table(self) -> list[tuple[bytes, Principal]]:
        current = self._settings.api_keys
        # ApiKey is frozen: a change is a new object (or a new list), seen by identity.
        if len(current) != len(self._source) or any(
            a is not b for a, b in zip(current, self._source, strict=True)
        ):
            self._keys = [
                (k.digest(), Principal(k.name, frozenset(k.app_ids), k.global_scope, k.admin, k.user_id))
                for k in current
            ]
            self._source = list(current)
        return self._keys

    @property
    def enabled(self) -> bool:
        """True when at least one key is configured."""
        return bool(self._table())

    def client_address(self, peer: str, forwarded_for: str = "") -> str:
        """The address a request's failures count against (``limits.trusted_proxies`` applied)."""
        trusted = self._limits.trusted_proxies if self._limits is not None else []
        return client_address(peer, forwarded_for, trusted)

    def authenticate(self, presented: str | None, client: str | None = None) -> Principal:
        """The key's principal; 40101 when it is missing or matches no key, 42903 while ``client``
        (an address, see ``client_address``) is over its failures with a key it has not proven."""
        keys = self._table()
        if not keys:
            return OPEN
        found = _match(keys, presented)
        throttle = self._throttle if client is not None else None
        if throttle is not None and client is not None:
            if throttle.locked(client):
                # The key was checked all the same (constant work), but only one already proven
                # from this address passes: a guess learns nothing.
                if found is None or not throttle.proven(client, found.name):
                    METRICS.rate_limited.inc(1, {"op": "authenticate"})
                    message = "too many failed authentications from this address; retry later"
                    raise EngramError(ErrorCode.RATE_LIMITED, message)
                return found
            if found is None:
                throttle.failed(client)
            else:
                throttle.succeeded(client, found.name)
        if found is None:
            message = "the API key is not valid" if presented else "an API key is required"
            raise EngramError(ErrorCode.UNAUTHENTICATED, message)
        return found


def _match(keys: Sequence[tuple[bytes, Principal]], presented: str | None) -> Principal | None:
    if not presented:
        return None
    given = key_digest(presented)
    found: Principal | None = None
    for digest, principal in keys:
        # Every key is compared, so the time taken does not tell which one came close.
        if hmac.compare_digest(digest, given):
            found = principal
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
    principal: Principal,
    route: str,
    body: Mapping[str, Any],
    memory_apps: Mapping[str, str],
    task: TaskOwner | None = None,
) -> frozenset[str]:
    """40303 unless ``principal`` may call ``route`` with ``body``; returns the named memories out of
    its reach (``tenancy``). ``memory_apps``: app of each memory id; ``task``: the named task's owner.

    Each route's ``Access`` comes from the operations table; a route outside it needs an admin key.
    An object named by id and out of reach is answered as an unknown one (40401, ``tenancy``).
    """
    access = ACCESS_BY_PATH.get(route, Access.ADMIN)
    # Before the admin role: a user-bound admin key (the console) manages its own user only. A
    # task request may leave its user out: the task's own user is checked instead.
    bound = principal.user_id
    named_user = body.get("user_id")
    task_without_user = access is Access.TASK and named_user is None
    if bound is not None and not task_without_user and _text(named_user) != bound:
        raise _forbid("this key is bound to another user")
    if access is Access.TASK:
        check_task(principal, _text(body.get("task_id")), task)
        return frozenset()
    if access is Access.MEMORY:
        # Admin keys too: a user-bound one reaches its user's memories only, and those are looked up
        # by that user, so nothing of another user is ever in ``memory_apps``.
        return hidden_memories(principal, route, memory_ids_of(route, body), memory_apps)
    if principal.admin:
        return frozenset()
    if access is Access.ADMIN:
        raise _forbid("this route needs an admin key")
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
        return frozenset()
    if access is Access.RECALL:
        scope = body.get("scope") or {}
        scope = scope if isinstance(scope, Mapping) else {}
        # A profile request names its app at the top and always holds the user's global facts.
        app_id = _text(scope.get("app_id")) or _text(body.get("app_id"))
        if app_id and not principal.may_use_app(app_id):
            raise _forbid("this key is not bound to that app")
        if scope.get("include_global", True) is not False and not principal.may_use_app(""):
            raise _forbid("this key may not use the user's global memories")
        return frozenset()
    if access is Access.CHANGE_LOG:
        app_id = _text(body.get("app_id"))
        if app_id and principal.may_use_app(app_id):
            return frozenset()
        if not app_id and principal.all_apps:
            return frozenset()
        raise _forbid("this key may only read the change log of its own apps")
    raise _forbid("this route needs an admin key")


# --- the ASGI layer -----------------------------------------------------------------------------

MemoryAppsLookup = Callable[[str, Sequence[str]], Awaitable[Mapping[str, str]]]
TaskOwnerLookup = Callable[[str], Awaitable[TaskOwner | None]]


class AuthGuard:
    """Authenticates and authorizes every request under ``prefix`` before its route runs."""

    def __init__(
        self,
        app: ASGIApp,
        prefix: str,
        authenticator: Callable[[], Authenticator],
        memory_apps: Callable[[], MemoryAppsLookup],
        task_owner: Callable[[], TaskOwnerLookup] | None = None,
    ) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/") + "/"
        self.authenticator = authenticator
        self.memory_apps = memory_apps
        self.task_owner = task_owner

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
            await self.app({**scope, REACH_KEY: Reach(OPEN)}, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        route = path[len(self.prefix) :]
        try:
            # Failures are throttled per client address (serve.auth_throttle).
            principal = auth.authenticate(presented_key(headers), auth.client_address(*peer_of(scope)))
        except EngramError as exc:
            await _refused(exc, route, auth, headers, scope, receive, send)
            return
        # The rate limits count what this request does against its key (serve.rate_limit).
        with calling_as(principal.name):
            try:
                raw, replay = await _buffer(receive)
                # The route's own parse (serve.body): a body it would refuse is 40001 for every key.
                body = parse_body(content_type_of(headers), raw)
                remember(scope, body)
                hidden: frozenset[str] = frozenset()
                if not principal.admin or principal.user_id is not None:
                    hidden = await self._authorize(principal, route, body)
            except EngramError as exc:
                await _refused(exc, route, auth, headers, scope, receive, send)
                return
            await self.app({**scope, REACH_KEY: Reach(principal, hidden)}, replay, send)

    async def _authorize(self, principal: Principal, route: str, body: Mapping[str, Any]) -> frozenset[str]:
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
        return authorize(principal, route, body, apps, await self._task(route, body))

    async def _task(self, route: str, body: Mapping[str, Any]) -> TaskOwner | None:
        task_id = body.get("task_id")
        if ACCESS_BY_PATH.get(route) is not Access.TASK or self.task_owner is None:
            return None
        if not isinstance(task_id, str) or not is_memory_id(task_id):
            return None  # not a task id: the route answers 40001
        return await self.task_owner()(task_id)


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


async def _refused(
    exc: EngramError,
    route: str,
    auth: Authenticator,
    headers: Mapping[str, str],
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    # Names the key, never the body nor the key itself: ids and counts only in logs (P3).
    log.info("refused %s with %d (key %s)", route, exc.code.value, _key_name(auth, headers))
    await _refuse(exc, scope, receive, send)


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
