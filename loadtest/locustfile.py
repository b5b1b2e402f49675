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
from locust import HttpUser, events, task
from locust.env import Environment

from engram.loadtest.arrivals import PoissonPacing

# Where the final figures go (``engram loadtest`` reads them): locust's CSV is rewritten once a
# second and its last version misses the requests of the run's last moments.
STATS_FILE = os.environ.get("ENGRAM_LT_STATS_FILE")
PERCENTILES = (0.5, 0.95, 0.99)
SEEDED_USERS = int(os.environ.get("ENGRAM_LT_USERS", "1000"))
PER_USER_RPS = float(os.environ.get("ENGRAM_LT_PER_USER_RPS", "1"))
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


class EngramAgent(HttpUser):
    """An agent recalling far more often than it writes."""

    def on_start(self) -> None:
        self._pacing = PoissonPacing(PER_USER_RPS)
        gevent.sleep(self._pacing.wait())  # users spawned in one instant must not start together

    def wait_time(self) -> float:
        return self._pacing.wait()

    @task(18)
    def recall(self) -> None:
        user = f"lt-{random.randrange(SEEDED_USERS)}"
        body = {"user_id": user, "query": random.choice(QUERIES), "top_k": 10}
        with self.client.post("/memory/v1/recall", json=body, name="recall", catch_response=True) as answer:
            code = answer.json().get("code") if answer.status_code < 500 else None
            if code in (0, 20001):
                answer.success()
            else:
                answer.failure(f"code {code}")

    @task(1)
    def add(self) -> None:
        user = f"lt-{random.randrange(SEEDED_USERS)}"
        body = {
            "user_id": user,
            "messages": [{"role": "user", "content": f"I visited place {random.randrange(10**6)}."}],
        }
        self.client.post("/memory/v1/add", json=body, name="add")

    @task(1)
    def healthz(self) -> None:
        self.client.get("/healthz", name="healthz")


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
