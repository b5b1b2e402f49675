"""Which seeded user a load test's next request is for: uniform (mostly cold users), or Zipf-skewed
(a hot set, as real traffic has), ``engram loadtest --skew`` (#30)."""

from __future__ import annotations

import bisect
import itertools
import random


class UserDraw:
    """Draws user indices in ``[0, users)``: ``skew`` is ``uniform`` or ``zipf:<s>`` (s > 0).

    Under Zipf the k-th most popular user is drawn with probability proportional to 1 / k**s; the
    popularity order is a fixed shuffle, so the hot users are not the first seeded ones.
    """

    def __init__(self, users: int, skew: str = "uniform", seed: int = 7) -> None:
        if users < 1:
            raise ValueError("users must be at least 1")
        self.users = users
        self.exponent = parse_skew(skew)
        self._cumulative: list[float] = []
        self._order: list[int] = []
        if self.exponent is not None:
            weights = (1.0 / (rank**self.exponent) for rank in range(1, users + 1))
            self._cumulative = list(itertools.accumulate(weights))
            self._order = list(range(users))
            random.Random(seed).shuffle(self._order)

    def draw(self, rng: random.Random) -> int:
        """One user index."""
        if self.exponent is None:
            return rng.randrange(self.users)
        point = rng.random() * self._cumulative[-1]
        rank = min(bisect.bisect_left(self._cumulative, point), self.users - 1)
        return self._order[rank]


def parse_skew(skew: str) -> float | None:
    """``uniform`` -> None; ``zipf:1.1`` -> 1.1 (ValueError on anything else)."""
    if skew == "uniform":
        return None
    kind, _, value = skew.partition(":")
    try:
        exponent = float(value)
    except ValueError:
        exponent = -1.0
    if kind != "zipf" or not exponent > 0:
        raise ValueError(f"skew must be 'uniform' or 'zipf:<s>' with s > 0, not {skew!r}")
    return exponent
