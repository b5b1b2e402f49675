"""Per-user request rate limits at the ingress (C9 42903): a token bucket per user id.

Buckets live in each ingress replica, so with N replicas a user may reach up to N times the rate;
the limit protects the service from a runaway agent, it is not a billing meter. The settings object
is read on every call, so a ``user_config`` change applies at once (O1).
"""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import METRICS
from engram.models.settings import LimitSettings


class RateLimiter:
    """Token buckets by key; the least recently seen keys are forgotten beyond ``max_keys``."""

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
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def allow(self, key: str) -> bool:
        """Take one token from ``key``'s bucket; False when it is empty."""
        rate, burst = self._limits.user_rate_per_s, float(self._limits.user_burst)
        if rate <= 0:
            return True
        now = self._monotonic()
        tokens, at = self._buckets.pop(key, (burst, now))
        tokens = min(burst, tokens + (now - at) * rate)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)  # a forgotten user starts again with a full bucket
        return allowed


class RateLimitedBackend:
    """Wraps a backend: every operation (and helper) on a request with a ``user_id`` first takes a token."""

    def __init__(self, inner: Any, limiter: RateLimiter) -> None:
        self._inner = inner
        self._limiter = limiter
        self.refused = 0

    def _take(self, request: Any, op: str) -> None:
        user_id = getattr(request, "user_id", None)
        if isinstance(user_id, str) and not self._limiter.allow(user_id):
            self.refused += 1
            METRICS.rate_limited.inc(1, {"op": op})
            raise EngramError(ErrorCode.RATE_LIMITED, "too many requests for this user; retry later")

    async def call(self, op: Any, request: Any) -> Any:
        self._take(request, getattr(op, "name", "unknown"))
        return await self._inner.call(op, request)

    def __getattr__(self, name: str) -> Any:
        # The helpers (export chunks, the tenancy check's lookup) are limited like operations.
        target = getattr(self._inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(target):
            return target

        async def limited(request: Any, *args: Any, **kwargs: Any) -> Any:
            self._take(request, name)
            return await target(request, *args, **kwargs)

        return limited
