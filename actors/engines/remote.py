"""An engine whose requests are answered elsewhere, one call per request (the caller batches).

The extraction deployment gathers concurrent calls into batches (``@serve.batch``); this adapter
sends each request on its own, retries those lost to a transient failure (a replica that died or is
restarting) and turns a request that never got through into an ``EngineError`` for that request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel

from engram.actors.engines.base import EngineError, StructuredRequest
from engram.models.rules.retry import retry

log = logging.getLogger(__name__)

RemoteCall = Callable[[StructuredRequest], Awaitable[BaseModel | EngineError]]


class RemoteEngine:
    """``Engine`` over a remote call; ``name`` and ``is_llm`` are those of the engine behind it."""

    def __init__(
        self,
        call: RemoteCall,
        *,
        name: str,
        is_llm: bool,
        transient: tuple[type[BaseException], ...],
        attempts: int,
        backoff_s: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = name
        self.is_llm = is_llm
        self._call = call
        self._transient = transient
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._sleep = sleep

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request, in order; the requests travel concurrently."""
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, request: StructuredRequest) -> BaseModel | EngineError:
        def note(attempt: int, exc: BaseException, pause: float) -> None:
            log.warning(
                "%s: %s on attempt %d, retrying in %.1f s", self.name, type(exc).__name__, attempt, pause
            )

        try:
            return await retry(
                lambda: self._call(request),
                retry_on=self._transient,
                attempts=self._attempts,
                first_delay_s=self._backoff_s,
                on_retry=note,
                sleep=self._sleep,
            )
        except self._transient:
            return EngineError(f"{self.name}: unreachable after {self._attempts} attempts")

    async def close(self) -> None:
        """Nothing to release here: the remote side owns the engine."""
