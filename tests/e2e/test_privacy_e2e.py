"""Privacy through the running Ray Serve app over HTTP: switches, list, purge, export, import,
isolation, and logs that carry no content (P1-P4, C7).

The log test writes its own contents through every kind of route, then scans every log file of
this Ray session for them (and for the marker every other test here puts in its contents).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from ray import serve

from engram.lifecycle.job import run_job
from engram.models.domain import utcnow
from engram.serve.app import recall_app_name
from engram.serve.sweep_job import ensure_shards
from tests.e2e.conftest import RunningApp
from tests.integration.test_isolation_suite import APPS, SESSIONS, Truth, slots, visible

pytestmark = pytest.mark.e2e
V1 = "/memory/v1"
# Every content stored here carries this marker, so the log scan knows what must not appear.
MARK = "Qxv7"


def post(app: RunningApp, route: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = httpx.post(f"{app.url}{V1}/{route}", json=body, timeout=60)
    return response.status_code, response.json()


def ok(app: RunningApp, route: str, body: dict[str, Any]) -> Any:
    status, payload = post(app, route, body)
    assert payload["code"] in (0, 20001), (route, status, payload["code"], payload["msg"])
    return payload["data"]


def add(app: RunningApp, user: str, content: str, **fields: Any) -> str:
    text = f"{content} {MARK}"
    body = {"user_id": user, "ownership": "USER", "mem_type": "SEMANTIC", "content": text, "sync": True}
    return str(ok(app, "add_structured", {**body, **fields})["memory_id"])


def recall_ids(app: RunningApp, user: str, query: str, **scope: Any) -> list[str]:
    body = {"user_id": user, "query": query, "min_relevance": 0, "top_k": 100, "scope": scope}
    return [m["memory_id"] for m in ok(app, "recall", body)["memories"]]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_done(app: RunningApp, task_id: str, deadline_s: float = 60) -> dict[str, Any]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        task = ok(app, "task", {"task_id": task_id})
        if task["status"] in ("DONE", "FAILED"):
            return dict(task)
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} unfinished after {deadline_s} s")


def export(app: RunningApp, user: str, *, profiles: bool = False) -> list[str]:
    """The export's memory lines (and its profile lines, L7, when asked)."""
    task = wait_done(app, ok(app, "user/export", {"user_id": user})["task_id"])
    assert task["status"] == "DONE", task
    response = httpx.post(
        f"{app.url}{V1}/user/export/download", json={"user_id": user, "task_id": task["task_id"]}, timeout=60
    )
    assert response.status_code == 200 and "ndjson" in response.headers["content-type"]
    lines = [line for line in response.text.split("\n") if line]
    return lines if profiles else [line for line in lines if "profile" not in json.loads(line)]


def test_switches_short_circuit_at_the_ingress(engram_app: RunningApp) -> None:
    user = fresh("sw")
    kept = add(engram_app, user, "Keeps a sourdough starter")
    dropped = add(engram_app, user, "Went to a jazz concert", app_id="music")
    # Writes pass the Ingress's gate; HTTP recalls the Recall app's own (its replica is the ingress).
    gates = [
        serve.get_app_handle(engram_app.settings.serve.app_name),
        serve.get_app_handle(recall_app_name(engram_app.settings)),
    ]

    def refused() -> int:
        return sum(int(h.gate_stats.remote().result()["refused"]) for h in gates)

    before = refused()

    assert ok(engram_app, "user/switch", {"user_id": user, "enabled": False})["enabled"] is False
    for route, body in (
        ("add", {"user_id": user, "messages": [{"role": "user", "content": f"I live in Rome {MARK}"}]}),
        ("add_structured", {"user_id": user, "ownership": "USER", "mem_type": "SEMANTIC", "content": "x"}),
        ("recall", {"user_id": user, "query": "sourdough"}),
    ):
        status, payload = post(engram_app, route, body)
        assert (status, payload["code"]) == (403, 40301), route
    # Refused at the gates: nothing reached a shard (no task, no change) or the recall pipeline.
    assert refused() - before == 3
    changes = ok(engram_app, "change_log", {"user_id": user})["changes"]
    assert [c["op_type"] for c in changes] == ["ADD", "ADD"]
    listed = ok(engram_app, "user/list", {"user_id": user})
    assert {m["memory_id"] for m in listed["memories"]} == {kept, dropped}
    ok(engram_app, "delete", {"user_id": user, "memory_id": dropped})

    ok(engram_app, "user/switch", {"user_id": user, "enabled": True})
    assert recall_ids(engram_app, user, "sourdough starter") == [kept]
    add(engram_app, user, "Plays the violin", app_id="music")
    ok(engram_app, "user/switch", {"user_id": user, "app_id": "music", "enabled": False})
    assert recall_ids(engram_app, user, "violin sourdough", app_id="music") == [kept]  # global only
    assert (
        post(
            engram_app,
            "add_structured",
            {"user_id": user, "app_id": "music", "ownership": "USER", "mem_type": "SEMANTIC", "content": "y"},
        )[1]["code"]
        == 40301
    )


def test_list_pages_by_dimension(engram_app: RunningApp) -> None:
    user = fresh("ls")
    ids = [add(engram_app, user, f"Fact {i} of the list", app_id="a1" if i % 2 else None) for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        page = ok(
            engram_app, "user/list", {"user_id": user, "limit": 2, **({"cursor": cursor} if cursor else {})}
        )
        seen += [m["memory_id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    by_app = ok(engram_app, "user/list", {"user_id": user, "app_id": "a1"})["memories"]
    assert {m["memory_id"] for m in by_app} == {ids[1], ids[3]}
    assert post(engram_app, "user/list", {"user_id": user, "cursor": "forged"})[1]["code"] == 40001


def test_purge_is_immediate_and_the_sweep_finishes_it(engram_app: RunningApp) -> None:
    user = fresh("pg")
    keep = add(engram_app, user, "Speaks Finnish")
    travel = add(engram_app, user, "Flies with the travel app", app_id="travel")
    assert ok(engram_app, "user/purge", {"user_id": user, "app_id": "travel"}) == {
        "purged": 1,
        "shredded": False,
    }
    assert recall_ids(engram_app, user, "flies travel Finnish", app_id="travel") == [keep]

    # Recall runs in another process that has cached the user's key: it must notice the shred.
    assert ok(engram_app, "user/purge", {"user_id": user}) == {"purged": 1, "shredded": True}
    assert recall_ids(engram_app, user, "Finnish") == []
    history = ok(engram_app, "history", {"user_id": user, "memory_id": keep})
    assert history["memory"]["content"] is None and history["changes"][-1]["op_type"] == "PURGE"
    again = add(engram_app, user, "Started learning Estonian")
    assert recall_ids(engram_app, user, "learning Estonian") == [again]

    settings = engram_app.settings.model_copy(deep=True)
    later = utcnow() + timedelta(days=settings.lifecycle.purge_deleted_after_days + 1)
    report = run_job(settings, now=later, users=[user], prepare=ensure_shards)
    assert report.totals["failed_users"] == 0
    for memory_id in (keep, travel):
        assert post(engram_app, "history", {"user_id": user, "memory_id": memory_id})[1]["code"] == 40401
    assert ok(engram_app, "user/list", {"user_id": user, "status": "DELETED"})["memories"] == []


def test_export_download_and_import_round_trip(engram_app: RunningApp) -> None:
    source, target = fresh("ex"), fresh("im")
    first = add(engram_app, source, "Grows chillies on the windowsill", custom_tags=["garden"])
    add(engram_app, source, "Works night shifts at the hospital", app_id="jobs", is_important=True)
    ok(
        engram_app,
        "update",
        {"user_id": source, "memory_id": first, "content": f"Grows chillies and mint {MARK}"},
    )
    lines = export(engram_app, source)
    assert len(lines) == 2 and all(json.loads(line)["vector"] for line in lines)

    result = ok(engram_app, "user/import", {"user_id": target, "lines": lines})
    # The source's ids are another user's here: stored under fresh ids, the source is untouched.
    assert result == {"added": 2, "overwritten": 0, "skipped": 0, "reembedded": 0, "refused": 0}
    copied = export(engram_app, target)

    def normalised(items: list[str]) -> list[dict[str, Any]]:
        out = []
        for line in items:
            item = json.loads(line)
            item.pop("memory_id"), item.pop("user_id")
            item["changes"] = [c for c in item["changes"] if c["reason"] != "import"]
            out.append(item)
        return sorted(out, key=lambda i: i["content"])

    assert normalised(copied) == normalised(lines)
    again = ok(engram_app, "user/import", {"user_id": target, "lines": copied})
    assert again["skipped"] == 2 and again["added"] == 0
    status, payload = post(
        engram_app, "user/export/download", {"user_id": target, "task_id": "../../etc/passwd"}
    )
    assert (status, payload["code"]) == (400, 40001)


def test_isolation_holds_through_the_ray_app(engram_app: RunningApp) -> None:
    rng = random.Random(7)
    users = [fresh("iso") for _ in range(3)]
    truths: list[Truth] = []
    for user in users:
        for n, (level, app_id, session_id) in enumerate(slots()):
            ownership, mem_type = rng.choice(["USER", "AGENT"]), rng.choice(["SEMANTIC", "EPISODIC"])
            fields: dict[str, Any] = {"level": level, "ownership": ownership, "mem_type": mem_type}
            fields |= {"app_id": app_id} if app_id else {}
            fields |= {"session_id": session_id} if session_id else {}
            memory_id = add(engram_app, user, f"shared note {n}", **fields)
            truths.append(Truth(memory_id, user, app_id or "", session_id, level, ownership, mem_type))
    for _ in range(150):
        user = rng.choice([*users, "nobody"])
        scope: dict[str, Any] = {"include_global": rng.random() < 0.7}
        if rng.random() < 0.8:
            scope["app_id"] = rng.choice([*APPS, "elsewhere"])
        if rng.random() < 0.5:
            scope["session_id"] = rng.choice(SESSIONS)
        got = set(recall_ids(engram_app, user, "shared note", **scope))
        assert got == {t.memory_id for t in truths if visible(t, user, scope, [], [])}, scope


def test_logs_carry_no_content(engram_app: RunningApp) -> None:
    import ray

    own = f"Wk{uuid.uuid4().hex[:10]}"  # this test's own marker: no other test needs to have run
    user = fresh("logs")
    memory_id = add(engram_app, user, f"Keeps a diary in Latin {own}", app_id="notes")
    ok(engram_app, "update", {"user_id": user, "memory_id": memory_id, "content": f"Keeps a diary {own}"})
    accepted = ok(
        engram_app,
        "add",
        {"user_id": user, "messages": [{"role": "user", "content": f"I live in Oslo {own}."}]},
    )
    assert wait_done(engram_app, accepted["task_id"])["status"] == "DONE"
    ok(engram_app, "recall", {"user_id": user, "query": f"where do I live {own}", "min_relevance": 0})
    ok(engram_app, "history", {"user_id": user, "memory_id": memory_id})
    # Refused requests must not echo their bodies into logs either.
    assert post(engram_app, "add_structured", {"user_id": user, "content": f"no ownership {own}"})[0] == 400
    assert post(engram_app, "recall", {"user_id": user, "query": own, "top_k": -1})[0] == 400
    export(engram_app, user)
    ok(engram_app, "delete", {"user_id": user, "memory_id": memory_id})
    ok(engram_app, "user/purge", {"user_id": user})
    # Sent last with its own request id, which Serve's access log records: once that line is in
    # the logs, so is everything above.
    sentinel = str(uuid.uuid4())
    httpx.post(
        f"{engram_app.url}{V1}/task",
        json={"task_id": uuid.uuid4().hex},
        headers={"X-Request-ID": sentinel},
        timeout=60,
    )

    node = ray._private.worker._global_node
    assert node is not None
    logs = Path(node.get_session_dir_path()) / "logs"

    def texts() -> dict[Path, str]:
        return {p: p.read_bytes().decode("utf-8", "replace") for p in logs.rglob("*") if p.is_file()}

    deadline = time.monotonic() + 60
    scanned = texts()
    while not any(sentinel in t for t in scanned.values()):
        assert time.monotonic() < deadline, "the request logs never showed the last request"
        time.sleep(0.5)  # log files are flushed by other processes; bounded by the deadline
        scanned = texts()
    for path, text in scanned.items():
        assert own not in text, f"stored content found in {path.name}"
        assert MARK not in text, f"stored content found in {path.name}"
    # The scan saw this test's request logs (the access log names routes, never bodies).
    assert any("/memory/v1/user/purge" in t for t in scanned.values())
