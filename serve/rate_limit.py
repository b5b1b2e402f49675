"""Request rate limits at the ingress (C9 42903): token buckets per API key, per key, app and user.

With a key (auth on), a request counts against two buckets: its key's total (``key_rate_per_s``,
the tenant's share of the service) and its (key, app, user) bucket (``user_rate_per_s``, a runaway
agent). Both must have a token, and then both give one, so one tenant's flood never throttles
another key's traffic, even for the same user. Without a key (auth off, Python callers through a
Serve handle) a request counts against its user's bucket alone.

Buckets live in each replica, so with N replicas a caller may reach up to N times the rate; the
limit protects the service, it is not a billing meter. The settings object is read on every call,
so a ``user_config`` change applies at once (O1).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from pydantic import BaseModel

from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import METRICS
from engram.models.privacy import ExportDownloadRequest, MemoryAppsRequest
from engram.models.settings import LimitSettings
from engram.serve.backend import BackendWrapper, EngramBackend
from engram.serve.operations import Operation

Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")

CALLER_KEY: ContextVar[str | None] = ContextVar("engram_caller_key", default=None)
"""The name of the API key the request in progress authenticated with (the auth guard sets it)."""

Bucket = tuple[str, ...]


@contextmanager
def calling_as(key_name: str) -> Iterator[None]:
    """Count the requests made inside the block against ``key_name``'s buckets."""
    token = CALLER_KEY.set(key_name)
    try:
        yield
    finally:
        CALLER_KEY.reset(token)


class RateLimiter:
    """Token buckets; the least recently seen ones are forgotten beyond ``max_keys``."""

    def __init__(
        self,
        limits: LimitSettings,
        *,
        max_keys: int = 100_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = limits
        self._max_keys = max_keys
        self._monotonic = monotonic
        self._buckets: OrderedDict[Bucket, tuple[float, float]] = OrderedDict()  # -> (tokens, at)

    def allow(self, user_id: str | None, key_name: str | None = None, app_id: str = "") -> bool:
        """Take a token from every bucket of the request; False, and none taken, when one is empty."""
        limits = self._limits
        wanted: list[tuple[Bucket, float, float]] = []
        if key_name is None:
            if user_id is not None:
                wanted.append((("user", user_id), limits.user_rate_per_s, limits.user_burst))
        else:
            wanted.append((("key", key_name), limits.key_rate_per_s, limits.key_burst))
            if user_id is not None:
                bucket: Bucket = ("key-user", key_name, app_id, user_id)
                wanted.append((bucket, limits.user_rate_per_s, limits.user_burst))
        wanted = [(bucket, rate, burst) for bucket, rate, burst in wanted if rate > 0]
        if not wanted:
            return True
        now = self._monotonic()
        levels = [self._level(bucket, rate, burst, now) for bucket, rate, burst in wanted]
        allowed = all(tokens >= 1.0 for tokens in levels)
        for (bucket, _, _), tokens in zip(wanted, levels, strict=True):
            self._buckets.pop(bucket, None)
            self._buckets[bucket] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)  # a forgotten bucket starts again full
        return allowed

    def _level(self, bucket: Bucket, rate: float, burst: float, now: float) -> float:
        tokens, at = self._buckets.get(bucket, (burst, now))
        return min(burst, tokens + (now - at) * rate)


def app_of(request: Any) -> str:
    """The app a request names ("" for none): ``app_id``, or a recall's ``scope.app_id``."""
    app_id = getattr(request, "app_id", None)
    if not isinstance(app_id, str):
        app_id = getattr(getattr(request, "scope", None), "app_id", None)
    return app_id if isinstance(app_id, str) else ""


class RateLimitedBackend(BackendWrapper):
    """Wraps a backend: every operation, and each helper that names a user, first takes a token."""

    def __init__(self, inner: EngramBackend, limiter: RateLimiter) -> None:
        super().__init__(inner)
        self._limiter = limiter
        self.refused = 0

    def _take(self, request: BaseModel, op: str) -> None:
        user_id = getattr(request, "user_id", None)
        user = user_id if isinstance(user_id, str) else None
        key_name = CALLER_KEY.get()
        if user is None and key_name is None:
            return
        if not self._limiter.allow(user, key_name, app_of(request)):
            self.refused += 1
            METRICS.rate_limited.inc(1, {"op": op})
            # Names neither the user nor the key: the message may reach a log or a screen.
            raise EngramError(ErrorCode.RATE_LIMITED, "too many requests; retry later")

    async def call(self, op: Operation[Req, Res], request: Req) -> Res:
        self._take(request, op.name)
        return await self.inner.call(op, request)

    # The helpers that name a user (an export's chunks, the tenancy check's lookup) are limited like
    # operations; a switch read and a task's owner are lookups of the checks themselves.
    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        self._take(request, "export_chunk")
        return await self.inner.export_chunk(request, offset, max_bytes)

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        self._take(request, "memory_apps")
        return await self.inner.memory_apps(request)
