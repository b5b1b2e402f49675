"""Lifecycle through the running Ray Serve app: session/close, the sweep job's Ray tasks, restore."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
import ray

from engram.lifecycle.job import partition, run_job
from engram.models.domain import utcnow
from engram.serve.sweep_job import ensure_shards
from engram.serve.sweep_scheduler import scheduler_name
from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e
V1 = "/memory/v1"


def post(app: RunningApp, route: str, body: dict[str, object]) -> dict[str, object]:
    response = httpx.post(f"{app.url}{V1}/{route}", json=body, timeout=60)
    payload: dict[str, object] = response.json()
    return payload


def add(app: RunningApp, user: str, content: str, **fields: object) -> str:
    body = {"user_id": user, "ownership": "USER", "mem_type": "SEMANTIC", "content": content, "sync": True}
    payload = post(app, "add_structured", {**body, **fields})
    assert payload["code"] == 0, payload
    data = payload["data"]
    assert isinstance(data, dict)
    return str(data["memory_id"])


def recall_ids(app: RunningApp, user: str, query: str, **fields: object) -> list[str]:
    payload = post(app, "recall", {"user_id": user, "query": query, **fields})
    data = payload["data"]
    assert isinstance(data, dict)
    return [str(m["memory_id"]) for m in data["memories"]]


def test_session_close_through_the_ray_backend(engram_app: RunningApp) -> None:
    user = f"close-{uuid.uuid4().hex[:8]}"
    keep = add(
        engram_app, user, "Is allergic to penicillin", level="SESSION", session_id="s1", is_important=True
    )
    drop = add(engram_app, user, "Said good morning", level="SESSION", session_id="s1")
    payload = post(
        engram_app, "session/close", {"user_id": user, "session_id": "s1", "to_be_continued": True}
    )
    assert payload["code"] == 0, payload
    data = payload["data"]
    assert isinstance(data, dict)
    assert (data["promoted"], data["dropped"]) == ([keep], [drop])
    assert data["continuity_memory_id"]
    assert keep in recall_ids(engram_app, user, "penicillin allergy")


def test_the_sweep_job_archives_in_parallel_ray_tasks_and_restore_brings_it_back(
    engram_app: RunningApp,
) -> None:
    settings = engram_app.settings.model_copy(deep=True)
    settings.lifecycle.job_partitions = 3
    # Random ids all fell in one of the 3 partitions once in CI (a 1-in-243 draw): the test needs
    # users that the job's own hash spreads over more than one.
    users = [f"sweep-{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
    while sum(1 for part in partition(users, 3) if part) < 2:
        users = [f"sweep-{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
    ids = {user: add(engram_app, user, "Went kayaking in Norway last summer") for user in users}
    later = utcnow() + timedelta(days=91)

    planned = run_job(settings, now=later, dry_run=True, users=users, prepare=ensure_shards)
    assert planned.totals["archived_faded"] == 6
    assert recall_ids(engram_app, users[0], "kayaking in Norway") == [ids[users[0]]]  # nothing changed

    seen: list[int] = []
    report = run_job(
        settings,
        now=later,
        users=users,
        on_partition=lambda p: seen.append(p.partition),
        prepare=ensure_shards,
    )
    assert report.totals["archived_faded"] == 6 and report.totals["failed_users"] == 0
    assert len(report.partitions) > 1 and sorted(seen) == [p.partition for p in report.partitions]
    assert sum(p.users for p in report.partitions) == 6
    assert (
        run_job(settings, now=later, users=users, prepare=ensure_shards).totals["archived_faded"] == 0
    )  # idempotent

    user = users[0]
    assert recall_ids(engram_app, user, "kayaking in Norway") == []
    assert recall_ids(engram_app, user, "kayaking in Norway", include_archived=True) == [ids[user]]
    restored = post(engram_app, "restore", {"user_id": user, "memory_id": ids[user]})
    assert restored["code"] == 0, restored
    assert isinstance(restored["data"], dict) and restored["data"]["status"] == "ACTIVE"
    assert recall_ids(engram_app, user, "kayaking in Norway") == [ids[user]]
    history = post(engram_app, "history", {"user_id": user, "memory_id": ids[user]})
    assert isinstance(history["data"], dict)
    assert [c["op_type"] for c in history["data"]["changes"]] == ["ADD", "ARCHIVE", "RESTORE"]


def test_the_app_runs_one_sweep_scheduler(engram_app: RunningApp) -> None:
    scheduler = ray.get_actor(scheduler_name(engram_app.settings.serve.app_name), namespace="serve")
    assert ray.get(scheduler.start.remote()) is True
    assert ray.get(scheduler.stats.remote()) == {"runs": 0, "failures": 0}
