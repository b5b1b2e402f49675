"""Checks shared by the crash tests: every accepted task finishes DONE, and each fact exists once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from tests.support.crash_facts import FACTS


def accept_adds(url: str, users: Sequence[str], facts: Sequence[str] = FACTS) -> list[tuple[str, str]]:
    """Post every fact for every user as an ``add`` at once; the acknowledged (user, task id) pairs."""

    async def accept_all() -> list[tuple[str, str]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            bodies = [
                (u, {"user_id": u, "messages": [{"role": "user", "content": f}]})
                for u in users
                for f in facts
            ]
            answers = await asyncio.gather(*(http.post("/memory/v1/add", json=b) for _, b in bodies))
        refused = [a.json() for a in answers if a.status_code != 200 or a.json()["code"] != 0]
        assert not refused, f"{len(refused)} adds refused, first: {refused[0]}"
        return [(u, a.json()["data"]["task_id"]) for (u, _), a in zip(bodies, answers, strict=True)]

    return asyncio.run(accept_all())


def assert_all_done_exactly_once(
    url: str,
    accepted: Iterable[tuple[str, str]],
    facts_per_user: int,
    stall_s: float = 180,
    limit_s: float = 1200,
) -> None:
    """Poll the accepted (user, task) pairs until each is DONE; then each user holds each fact once.

    Fails when no task finishes for ``stall_s`` (a queue that stopped), not when the whole takes
    long: on a loaded machine (#26, ``make test`` beside a CPU hog) processing is several times
    slower, and a fixed total limit failed tests whose queues were moving. ``limit_s`` bounds it all.
    """
    accepted = list(accepted)
    start = last_progress = time.monotonic()
    with httpx.Client(base_url=url, timeout=60) as http:
        pending = {task_id for _, task_id in accepted}
        while pending:
            now = time.monotonic()
            assert now - last_progress < stall_s, (
                f"{len(pending)} accepted tasks never finished after the crash "
                f"(none finished in the last {stall_s:g} s, {now - start:.0f} s in all)"
            )
            assert now - start < limit_s, f"{len(pending)} accepted tasks unfinished after {limit_s:g} s"
            for task_id in list(pending):
                answer = _polled(http, task_id)
                if answer is None:
                    break  # asked again next round; the deadlines above bound the wait
                if answer["code"] == 0 and answer["data"]["status"] in ("DONE", "FAILED"):
                    assert answer["data"]["status"] == "DONE"
                    pending.discard(task_id)
                    last_progress = time.monotonic()
            # Each round asks once per unfinished task: a pause keeps the polling from adding
            # much load to the shard it waits on; bounded by the deadlines above.
            time.sleep(0.5)
        for user in sorted({user for user, _ in accepted}):
            log = http.post("/memory/v1/change_log", json={"user_id": user, "limit": 500}).json()["data"]
            added = [c["content_after"] for c in log["changes"] if c["op_type"] == "ADD"]
            assert len(added) == len(set(added)) == facts_per_user, "each fact is stored exactly once"


def _polled(http: httpx.Client, task_id: str) -> dict[str, Any] | None:
    """The task's answer; None when none came within the client's timeout. A task lookup asks the
    shards, and a killed shard answers once it has restarted: beside a CPU hog (#26) that took
    longer than one request's 60 s, in a run whose tasks then all finished."""
    try:
        answer: dict[str, Any] = http.post("/memory/v1/task", json={"task_id": task_id}).json()
    except httpx.TimeoutException:
        return None
    return answer


def unfinished_users(url: str, accepted: list[tuple[str, str]]) -> int:
    """How many users' last tasks are not DONE yet (a user's tasks run in order): work in flight."""
    last = dict(accepted)
    with httpx.Client(base_url=url, timeout=30) as http:
        states = [task_status(http, t) for t in last.values()]
    return sum(1 for s in states if s != "DONE")


def task_status(http: httpx.Client, task_id: str, limit_s: float = 60) -> str:
    """A task's status; an answer refused for a passing reason (a 5xx) is asked again, up to ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        answer = http.post("/memory/v1/task", json={"task_id": task_id})
        payload = answer.json()
        if payload.get("code") == 0:
            return str(payload["data"]["status"])
        assert answer.status_code >= 500 and time.monotonic() < deadline, (answer.status_code, payload)
        time.sleep(0.2)  # a busy machine: ask again, bounded by the deadline
