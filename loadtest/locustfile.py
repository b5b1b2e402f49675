"""Locust load for Engram: a recall-heavy mix with adds, plus /healthz as the framework's floor.

Run by ``engram loadtest``; the environment gives ENGRAM_LT_USERS (seeded user count). Each locust
user offers a constant throughput (set by the command), so the total offered load is fixed.
"""

from __future__ import annotations

import os
import random

from locust import HttpUser, constant_throughput, task

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

    wait_time = constant_throughput(PER_USER_RPS)

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
