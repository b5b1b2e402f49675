"""Engram's errors across Ray: an ``EngramError`` raised or returned in another process comes back
as itself. A leaf module, shared by the backends that call shards and deployments."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from ray.exceptions import RayTaskError

from engram.models.errors import EngramError

T = TypeVar("T")


async def unwrap(call: Awaitable[T | EngramError]) -> T:
    """Await a Ray call; an EngramError raised or returned remotely is raised here as itself.

    Hot-path deployments return expected errors as values: an exception raised out of a Serve
    replica is logged there with its formatted traceback, which under overload cost the recall
    replica a sixth of its CPU (docs/benchmarks.md) and fed the overload.
    """
    try:
        result = await call
    except RayTaskError as exc:
        cause = engram_cause(exc)
        if cause is not None:
            raise cause from None
        raise
    if isinstance(result, EngramError):
        raise result
    return result


def engram_cause(exc: BaseException) -> EngramError | None:
    """The EngramError behind a Ray error, however deeply Ray wrapped it (actor -> deployment -> here)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, EngramError) and hasattr(current, "code"):
            return EngramError(current.code, current.message)
        for nested in (getattr(current, "cause", None), current.__cause__, current.__context__):
            if isinstance(nested, BaseException):
                pending.append(nested)
    return None
