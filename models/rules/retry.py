"""Retrying a call with exponential backoff: the one loop every caller shares.

Bounded by a number of attempts, by a deadline, or both; the sleep and the clock are injected, so
the policy is tested without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

OnRetry = Callable[[int, BaseException, float], None]
"""Told (attempt that failed, its error, seconds until the next one) before each pause."""


async def retry(
    call: Callable[[], Awaitable[T]],
    *,
    retry_on: tuple[type[BaseException], ...],
    attempts: int | None = None,
    deadline_s: float | None = None,
    first_delay_s: float = 0.5,
    max_delay_s: float = 10.0,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``await call()``, again after each ``retry_on`` error, pausing ``first_delay_s`` doubled up to
    ``max_delay_s``; the last error is raised once ``attempts`` are made or ``deadline_s`` passed."""
    if attempts is None and deadline_s is None:
        raise ValueError("retry needs a bound: attempts, deadline_s or both")
    deadline = None if deadline_s is None else clock() + deadline_s
    delay = first_delay_s
    attempt = 1
    while True:
        try:
            return await call()
        except retry_on as exc:
            if attempts is not None and attempt >= attempts:
                raise
            pause = delay
            if deadline is not None:
                remaining = deadline - clock()
                if remaining <= 0:
                    raise
                pause = min(pause, remaining)
            if on_retry is not None:
                on_retry(attempt, exc, pause)
            await sleep(pause)
            delay = min(delay * 2, max_delay_s)
            attempt += 1
