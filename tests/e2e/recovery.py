"""Checks shared by the crash tests: every accepted task finishes DONE, and each fact exists once."""

from __future__ import annotations

import time
from collections.abc import Iterable

import httpx


def assert_all_done_exactly_once(
    url: str, accepted: Iterable[tuple[str, str]], facts_per_user: int, limit_s: float = 180
) -> None:
    """Poll the accepted (user, task) pairs until each is DONE; then each user holds each fact once."""
    accepted = list(accepted)
    deadline = time.monotonic() + limit_s
    with httpx.Client(base_url=url, timeout=60) as http:
        pending = {task_id for _, task_id in accepted}
        while pending and time.monotonic() < deadline:
            for task_id in list(pending):
                answer = http.post("/memory/v1/task", json={"task_id": task_id}).json()
                if answer["code"] == 0 and answer["data"]["status"] in ("DONE", "FAILED"):
                    assert answer["data"]["status"] == "DONE"
                    pending.discard(task_id)
            time.sleep(0.1)  # polling a task's state, bounded by the deadline
        assert not pending, f"{len(pending)} accepted tasks never finished after the crash"
        for user in sorted({user for user, _ in accepted}):
            log = http.post("/memory/v1/change_log", json={"user_id": user, "limit": 500}).json()["data"]
            added = [c["content_after"] for c in log["changes"] if c["op_type"] == "ADD"]
            assert len(added) == len(set(added)) == facts_per_user, "each fact is stored exactly once"
