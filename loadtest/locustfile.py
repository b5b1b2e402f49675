"""Locust load for Engram: a recall-heavy mix with adds, plus /healthz as the framework's floor.

Run by ``engram loadtest``; the environment gives ENGRAM_LT_USERS (seeded user count) and each
locust user's rate. Each user starts requests as a Poisson process at that rate
(``loadtest.arrivals``), so the total offered load is fixed and free of lockstep bursts.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import gevent
from locust import HttpUser, events
from locust.env import Environment

from engram.loadtest.arrivals import PoissonPacing
from engram.loadtest.mix import DEFAULT_MIX, HEALTHZ_WEIGHT, parse_mix
from engram.loadtest.user_draw import UserDraw

# Where the final figures go (``engram loadtest`` reads them): locust's CSV is rewritten once a
# second and its last version misses the requests of the run's last moments.
STATS_FILE = os.environ.get("ENGRAM_LT_STATS_FILE")
PERCENTILES = (0.5, 0.95, 0.99)
SEEDED_USERS = int(os.environ.get("ENGRAM_LT_USERS", "1000"))
PER_USER_RPS = float(os.environ.get("ENGRAM_LT_PER_USER_RPS", "1"))
MIX = parse_mix(os.environ.get("ENGRAM_LT_MIX", DEFAULT_MIX))
# Whose memories each request is for: uniform over the seeded users, or Zipf-skewed (--skew).
USERS = UserDraw(SEEDED_USERS, os.environ.get("ENGRAM_LT_SKEW", "uniform"))
_RNG = random.Random()
QUERIES = [
    "what food do I like",
    "where do I live",
    "what is my job",
    "which sports do I play",
    "what music do I enjoy",
    "where did I travel",
    "帮我叫个车",
    "what are my allergies",
]


def _weighted(pairs: tuple[tuple[Any, int], ...]) -> list[Any]:
    # Locust takes a list in which each task appears as many times as its weight.
    return [function for function, weight in pairs for _ in range(weight)]


def _accepted(answer: Any) -> None:
    code = answer.json().get("code") if answer.status_code < 500 else None
    if code == 0:
        answer.success()
    else:
        answer.failure(f"code {code}")


def _structured_item() -> dict[str, Any]:
    return {
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": f"Locker {random.randrange(10**6):06d} is on floor {random.randrange(9)}.",
    }


class EngramAgent(HttpUser):
    """An agent of the mix (``ENGRAM_LT_MIX``): by default recalling far more often than it writes."""

    def on_start(self) -> None:
        self._pacing = PoissonPacing(PER_USER_RPS)
        gevent.sleep(self._pacing.wait())  # users spawned in one instant must not start together

    def wait_time(self) -> float:
        return self._pacing.wait()

    def recall(self) -> None:
        user = f"lt-{USERS.draw(_RNG)}"
        body = {"user_id": user, "query": random.choice(QUERIES), "top_k": 10}
        with self.client.post("/memory/v1/recall", json=body, name="recall", catch_response=True) as answer:
            code = answer.json().get("code") if answer.status_code < 500 else None
            if code in (0, 20001):
                answer.success()
            else:
                answer.failure(f"code {code}")

    def add(self) -> None:
        user = f"lt-{USERS.draw(_RNG)}"
        body = {
            "user_id": user,
            "messages": [{"role": "user", "content": f"I visited place {random.randrange(10**6)}."}],
        }
        with self.client.post("/memory/v1/add", json=body, name="add", catch_response=True) as answer:
            _accepted(answer)

    def add_structured(self) -> None:
        body = {"user_id": f"lt-{USERS.draw(_RNG)}", **_structured_item()}
        with self.client.post(
            "/memory/v1/add_structured", json=body, name="add_structured", catch_response=True
        ) as answer:
            _accepted(answer)

    def batch_add_structured(self) -> None:
        body = {
            "user_id": f"lt-{USERS.draw(_RNG)}",
            "items": [_structured_item() for _ in range(100)],
        }
        with self.client.post(
            "/memory/v1/batch_add_structured", json=body, name="batch_add_structured", catch_response=True
        ) as answer:
            _accepted(answer)

    def healthz(self) -> None:
        self.client.get("/healthz", name="healthz")

    # Locust draws each request from these weights: the mix, and the trivial route beside it.
    tasks = _weighted(
        (
            (recall, MIX.get("recall", 0)),
            (add, MIX.get("add", 0)),
            (add_structured, MIX.get("add_structured", 0)),
            (batch_add_structured, MIX.get("batch_add_structured", 0)),
            (healthz, HEALTHZ_WEIGHT),
        )
    )


def _write_final_stats(environment: Environment, **_: Any) -> None:
    if not STATS_FILE or environment.stats is None:
        return
    figures = {
        entry.name: {
            "requests": entry.num_requests,
            "failures": entry.num_failures,
            "rps": entry.total_rps,
            **{f"p{round(q * 100)}": entry.get_response_time_percentile(q) for q in PERCENTILES},
        }
        for entry in environment.stats.entries.values()
    }
    Path(STATS_FILE).write_text(json.dumps(figures))


events.quitting.add_listener(_write_final_stats)  # type: ignore[no-untyped-call]
