"""Request start times for one simulated client: a Poisson process at a fixed rate (open loop).

Locust's ``constant_throughput`` keeps each client on a fixed period from the moment it spawned,
and locust spawns up to ``spawn_rate`` clients in one instant: 34 clients offering "30 req/s" then
sent 34 requests together once a second for the whole run, so the figures measured the draining
of bursts (docs/benchmarks.md). Here each client's starts are drawn from its own Poisson process:
the sum over clients is Poisson at the total rate, the load a population of independent agents
offers, with its natural bursts but without lockstep.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable


class PoissonPacing:
    """Exponential gaps between scheduled starts; a slow answer does not push later starts back."""

    def __init__(
        self,
        rate_per_s: float,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_per_s <= 0:
            raise ValueError(f"rate must be positive, got {rate_per_s}")
        self._rate = rate_per_s
        self._rng = rng or random.Random()
        self._clock = clock
        self._next_start: float | None = None

    def wait(self) -> float:
        """Seconds to wait before the next start (0 when the schedule is behind: the next goes now).

        The first call also draws the first start, so clients spawned together begin apart.
        """
        now = self._clock()
        base = now if self._next_start is None else self._next_start
        self._next_start = base + self._rng.expovariate(self._rate)
        return max(0.0, self._next_start - now)
