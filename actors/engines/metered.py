"""An engine that records its calls (engram_engine_*): requests by task and result, batch size, time.

Wraps the engine that does the work (in the extraction deployment, or in a shard without one),
never the remote adapter in front of it, so a request is counted once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import BaseModel

from engram.actors.engines.base import Engine, EngineError, StructuredRequest
from engram.models.metrics import METRICS


class MeteredEngine:
    """``Engine`` over ``inner`` with the same name and kind; results pass through unchanged."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.name = inner.name
        self.is_llm = inner.is_llm
        self._engine_tags = {"engine": inner.name}

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """The inner engine's results; a call that raises counts every request as an error."""
        started = time.perf_counter()
        results: list[BaseModel | EngineError] | None = None
        try:
            results = await self.inner.generate(requests)
            return results
        finally:
            METRICS.engine_latency.observe((time.perf_counter() - started) * 1000, dict(self._engine_tags))
            METRICS.engine_batch.observe(len(requests), dict(self._engine_tags))
            for i, request in enumerate(requests):
                failed = results is None or i >= len(results) or isinstance(results[i], EngineError)
                METRICS.engine_requests.inc(
                    1, {"engine": self.name, "task": request.task, "result": "error" if failed else "ok"}
                )

    async def close(self) -> None:
        """Close the inner engine."""
        await self.inner.close()


def metered(engine: Engine) -> Engine:
    """``engine`` with its calls recorded (an engine already metered is returned as it is)."""
    return engine if isinstance(engine, MeteredEngine) else MeteredEngine(engine)
