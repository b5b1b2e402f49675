"""Privacy routes (P1, P2, C7) through the real HTTP app over real stores, in one process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from engram.actors.export_import import is_profile_line
from engram.lifecycle.sweeps import Sweeper
from engram.models.settings import Settings
from engram.storage.crypto import LocalKeyFileProvider
from engram.storage.keyring import KeyRing
from engram.storage.metadata import MetadataStore
from engram.storage.schema import capacity_counters, change_log, memories, user_keys, write_tasks
from engram.storage.stores import Stores, open_stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    async with privacy_app(settings, stores, clock) as running:
        yield running


def memory(user_id: str, content: str, **fields: Any) -> dict[str, Any]:
    return {
        "user_id": user_id,
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": content,
        "sync": True,
        **fields,
    }


async def add(app: PrivacyApp, user_id: str, content: str, **fields: Any) -> str:
    data = await app.ok("add_structured", memory(user_id, content, **fields))
    return str(data["memory_id"])


async def recall_ids(app: PrivacyApp, user_id: str, query: str, **scope: Any) -> list[str]:
    body = {"user_id": user_id, "query": query, "min_relevance": 0, "top_k": 100, "scope": scope}
    data = await app.ok("recall", body)
    return [m["memory_id"] for m in data["memories"]]


async def count_rows(stores: Stores, table: Any, user_id: str) -> int:
    async with stores.metadata.engine.connect() as conn:
        query = select(func.count()).select_from(table).where(table.c.user_id == user_id)
        return int((await conn.execute(query)).scalar_one())


# --- switches (P1) ------------------------------------------------------------------------------


async def test_switched_off_user_costs_no_model_time(app: PrivacyApp) -> None:
    kept = await add(app, "sw1", "Keeps bees in the garden")
    dropped = await add(app, "sw1", "Collects vinyl records")
    state = await app.ok("user/switch", {"user_id": "sw1", "enabled": False})
    assert state == {"user_id": "sw1", "enabled": False, "apps": {}}
    embedded, extracted, refused = app.embedder.texts, app.engine.requests, app.gate.refused

    for route, body in (
        ("add", {"user_id": "sw1", "messages": [{"role": "user", "content": "I moved to Oslo."}]}),
        ("add_structured", memory("sw1", "Plays chess on Sundays")),
        ("recall", {"user_id": "sw1", "query": "bees"}),
        ("update", {"user_id": "sw1", "memory_id": kept, "content": "Keeps two hives"}),
        ("session/close", {"user_id": "sw1", "session_id": "s1", "to_be_continued": True}),
    ):
        status, payload = await app.post(route, body)
        assert (status, payload["code"]) == (403, 40301), route
    await app.write_path.drain()
    # The counters: not one text embedded, not one engine request, five refusals at the gate.
    assert (app.embedder.texts, app.engine.requests, app.gate.refused) == (embedded, extracted, refused + 5)

    # list and delete still work while off, and nothing new was stored.
    listed = await app.ok("user/list", {"user_id": "sw1"})
    assert {m["memory_id"] for m in listed["memories"]} == {kept, dropped}
    await app.ok("delete", {"user_id": "sw1", "memory_id": dropped})

    await app.ok("user/switch", {"user_id": "sw1", "enabled": True})
    assert await recall_ids(app, "sw1", "bees in the garden") == [kept]


async def test_app_switch_off_keeps_global_memories(app: PrivacyApp) -> None:
    global_id = await add(app, "sw2", "Is allergic to peanuts")
    app_id = await add(app, "sw2", "Prefers dark mode in the editor", app_id="editor")
    assert set(await recall_ids(app, "sw2", "peanuts editor", app_id="editor")) == {global_id, app_id}

    state = await app.ok("user/switch", {"user_id": "sw2", "app_id": "editor", "enabled": False})
    assert state == {"user_id": "sw2", "enabled": True, "apps": {"editor": False}}
    assert await recall_ids(app, "sw2", "peanuts editor", app_id="editor") == [global_id]
    status, refused = await app.post("add_structured", memory("sw2", "Uses tabs", app_id="editor"))
    assert (status, refused["code"]) == (403, 40301)
    status, refused = await app.post(
        "recall",
        {"user_id": "sw2", "query": "dark mode", "scope": {"app_id": "editor", "include_global": False}},
    )
    assert refused["code"] == 40301
    await add(app, "sw2", "Lives in Bergen")  # global writes still flow
    await add(app, "sw2", "Uses vim", app_id="terminal")  # other apps too

    await app.ok("user/switch", {"user_id": "sw2", "app_id": "editor", "enabled": True})
    assert app_id in await recall_ids(app, "sw2", "dark mode editor", app_id="editor")


async def test_switch_without_enabled_reads_the_switches(app: PrivacyApp) -> None:
    assert await app.ok("user/switch", {"user_id": "sw3"}) == {"user_id": "sw3", "enabled": True, "apps": {}}
    await app.ok("user/switch", {"user_id": "sw3", "app_id": "notes", "enabled": False})
    await app.ok("user/switch", {"user_id": "sw3", "enabled": False})
    expected = {"user_id": "sw3", "enabled": False, "apps": {"notes": False}}
    # Read twice, with and without an app: a read changes nothing.
    assert await app.ok("user/switch", {"user_id": "sw3", "app_id": "notes"}) == expected
    assert await app.ok("user/switch", {"user_id": "sw3"}) == expected


# --- list (C7) ------------------------------------------------------------------------------------


async def test_list_by_dimension_with_cursor(app: PrivacyApp, clock: ManualClock) -> None:
    ids: dict[str, str] = {}
    for i in range(7):
        clock.advance(seconds=1)
        fields: dict[str, Any] = {"app_id": "a1"} if i % 2 else {}
        if i == 6:
            fields = {"app_id": "a1", "session_id": "s1", "level": "SESSION", "mem_type": "EPISODIC"}
        ids[f"m{i}"] = await add(app, "ls1", f"Fact number {i} about the user", **fields)
    await add(app, "ls-other", "Someone else's fact")

    seen: list[str] = []
    cursor = None
    while True:
        body: dict[str, Any] = {"user_id": "ls1", "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = await app.ok("user/list", body)
        seen += [m["memory_id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [ids[f"m{i}"] for i in range(7)]  # oldest first, each once, nobody else's

    by_app = await app.ok("user/list", {"user_id": "ls1", "app_id": "a1"})
    assert {m["memory_id"] for m in by_app["memories"]} == {ids["m1"], ids["m3"], ids["m5"], ids["m6"]}
    by_level = await app.ok("user/list", {"user_id": "ls1", "level": "SESSION"})
    assert [m["memory_id"] for m in by_level["memories"]] == [ids["m6"]]
    by_type = await app.ok("user/list", {"user_id": "ls1", "mem_type": "EPISODIC"})
    assert [m["memory_id"] for m in by_type["memories"]] == [ids["m6"]]
    by_session = await app.ok("user/list", {"user_id": "ls1", "app_id": "a1", "session_id": "s1"})
    assert [m["memory_id"] for m in by_session["memories"]] == [ids["m6"]]
    assert (await app.ok("user/list", {"user_id": "ls1", "session_id": "s2"}))["memories"] == []
    await app.ok("delete", {"user_id": "ls1", "memory_id": ids["m0"]})
    deleted = await app.ok("user/list", {"user_id": "ls1", "status": "DELETED"})
    assert [m["memory_id"] for m in deleted["memories"]] == [ids["m0"]]

    for bad in ("not-a-cursor", "eyJhIjogMX0=", "' OR 1=1 --"):
        status, payload = await app.post("user/list", {"user_id": "ls1", "cursor": bad})
        assert (status, payload["code"]) == (400, 40001)


# --- purge (P2) ------------------------------------------------------------------------------------


async def test_scoped_purge_is_out_of_recall_at_once(app: PrivacyApp, stores: Stores) -> None:
    keep = await add(app, "pg1", "Speaks Portuguese")
    purged = [
        await add(app, "pg1", "Books flights with the travel app", app_id="travel"),
        await add(app, "pg1", "Prefers aisle seats", app_id="travel", is_important=True),
    ]
    other_app = await add(app, "pg1", "Runs 10k on Saturdays", app_id="fitness")
    assert set(purged) <= set(await recall_ids(app, "pg1", "flights aisle seats", app_id="travel"))

    result = await app.ok("user/purge", {"user_id": "pg1", "app_id": "travel"})
    assert result == {"purged": 2, "shredded": False}
    assert set(await recall_ids(app, "pg1", "flights aisle seats", app_id="travel")) == {keep}
    assert other_app in await recall_ids(app, "pg1", "running", app_id="fitness")
    assert await stores.vectors.get_vectors(purged) == {}
    for memory_id in purged:
        history = await app.ok("history", {"user_id": "pg1", "memory_id": memory_id})
        assert history["memory"]["status"] == "DELETED" and history["memory"]["content"] is None
        assert history["changes"][-1]["op_type"] == "PURGE"
        assert all(c["content_before"] is None and c["content_after"] is None for c in history["changes"])
    async with stores.metadata.transaction(readonly=True) as tx:
        counters = await tx.counters.read("pg1")
    assert counters["app:travel"] == 0 and counters["important:app:travel"] == 0 and counters["total"] == 2

    # One level only: the user's global memories.
    result = await app.ok("user/purge", {"user_id": "pg1", "level": "GLOBAL"})
    assert result == {"purged": 1, "shredded": False}
    assert await recall_ids(app, "pg1", "Portuguese") == []


async def test_full_purge_shreds_the_key_and_the_sweep_leaves_nothing(
    app: PrivacyApp, stores: Stores, settings: Settings, clock: ManualClock
) -> None:
    ids = [
        await add(app, "pg2", f"Private fact {i} about the user", app_id="a" if i % 2 else None)
        for i in range(4)
    ]
    await app.ok("update", {"user_id": "pg2", "memory_id": ids[0], "content": "Private fact zero, revised"})
    export = await app.ok("user/export", {"user_id": "pg2"})
    await app.write_path.drain()
    # A second process (the recall deployment) caches the user's key before the purge.
    other = MetadataStore(
        stores.metadata.engine, KeyRing(LocalKeyFileProvider(settings.storage.resolved_master_key_file()))
    )
    async with other.transaction(readonly=True) as tx:
        assert (await tx.memories.get("pg2", ids[1])) is not None

    result = await app.ok("user/purge", {"user_id": "pg2"})
    assert result == {"purged": 4, "shredded": True}
    assert await count_rows(stores, user_keys, "pg2") == 0
    assert await count_rows(stores, write_tasks, "pg2") == 0
    assert await count_rows(stores, capacity_counters, "pg2") == 0
    assert await stores.vectors.count("pg2") == 0
    assert await recall_ids(app, "pg2", "private fact") == []
    _status, gone = await app.post("user/export/download", {"user_id": "pg2", "task_id": export["task_id"]})
    assert gone["code"] == 40401
    async with stores.metadata.engine.connect() as conn:
        blobs = (
            (await conn.execute(select(memories.c.content).where(memories.c.user_id == "pg2")))
            .scalars()
            .all()
        )
        logged = (
            await conn.execute(
                select(change_log.c.content_before, change_log.c.content_after).where(
                    change_log.c.user_id == "pg2"
                )
            )
        ).all()
    assert blobs and all(bytes(b) == b"" for b in blobs)
    assert logged and all(before is None and after is None for before, after in logged)

    # The user may come back: a new key, readable in the other process too (its cached key is stale).
    again = await add(app, "pg2", "A new beginning")
    async with other.transaction(readonly=True) as tx:
        found = await tx.memories.get("pg2", again)
    assert found is not None and found.content == "A new beginning"

    # After the deleted-retention period the sweep removes every purged row.
    clock.advance(days=settings.lifecycle.purge_deleted_after_days + 1)
    await Sweeper(app.local.lifecycle).sweep_user("pg2", clock())
    async with stores.metadata.engine.connect() as conn:
        left = (
            (await conn.execute(select(memories.c.memory_id).where(memories.c.user_id == "pg2")))
            .scalars()
            .all()
        )
    assert left == [again]
    assert await app.local.lifecycle.archive.memory_ids("pg2") == set()


# --- export and import (P2) --------------------------------------------------------------------------


async def export_lines(app: PrivacyApp, user_id: str, *, profiles: bool = False) -> list[str]:
    """The lines of a fresh export of the user: its memories (and the profile lines when asked, L7)."""
    accepted = await app.ok("user/export", {"user_id": user_id})
    await app.write_path.drain()
    task = await app.ok("task", {"task_id": accepted["task_id"]})
    assert task["status"] == "DONE", task
    response = await app.http.post(
        "/memory/v1/user/export/download", json={"user_id": user_id, "task_id": accepted["task_id"]}
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    lines = [line for line in response.text.split("\n") if line]
    return lines if profiles else [line for line in lines if not is_profile_line(line)]


def comparable(lines: list[str]) -> list[dict[str, Any]]:
    """Export lines without what an import adds: its own change-log entry."""
    items = [json.loads(line) for line in lines]
    for item in items:
        item["changes"] = [c for c in item["changes"] if c["reason"] != "import"]
    return sorted(items, key=lambda i: i["memory_id"])


async def test_export_then_import_into_a_fresh_instance_round_trips(
    app: PrivacyApp, settings: Settings, tmp_path: Path, clock: ManualClock, embedder: Any
) -> None:
    first = await add(app, "ex1", "Grows tomatoes on the balcony", custom_tags=["garden"])
    await add(
        app, "ex1", "Works at a bakery", app_id="jobs", is_important=True, context="Where do you work now?"
    )
    await add(app, "ex1", "Met Ana at the conference", app_id="jobs", session_id="s9", level="SESSION")
    await app.ok("update", {"user_id": "ex1", "memory_id": first, "content": "Grows tomatoes and basil"})
    await app.ok("recall", {"user_id": "ex1", "query": "tomatoes", "min_relevance": 0})
    await app.write_path.drain()
    lines = await export_lines(app, "ex1")
    assert len(lines) == 3
    item = json.loads(next(line for line in lines if json.loads(line)["memory_id"] == first))
    assert [c["op_type"] for c in item["changes"]] == ["ADD", "UPDATE"] and item["vector"]
    # The context (the message a memory answered) goes with it, and an import keeps it.
    assert sorted(str(json.loads(line)["context"]) for line in lines) == [
        "None",
        "None",
        "Where do you work now?",
    ]

    fresh_settings = Settings(storage={"data_dir": tmp_path / "fresh"}, recall={"timeout_ms": 30_000})
    fresh_stores = await open_stores(fresh_settings, embedder=embedder)
    try:
        async with privacy_app(fresh_settings, fresh_stores, clock) as fresh:
            result = await fresh.ok("user/import", {"user_id": "ex1", "lines": lines})
            assert result == {"added": 3, "overwritten": 0, "skipped": 0, "reembedded": 0, "refused": 0}
            assert comparable(await export_lines(fresh, "ex1")) == comparable(lines)
            found = await fresh.ok("recall", {"user_id": "ex1", "query": "tomatoes and basil"})
            assert found["memories"][0]["memory_id"] == first
    finally:
        await fresh_stores.close()


async def test_import_conflicts_and_reembedding(app: PrivacyApp, stores: Stores) -> None:
    mine = await add(app, "im1", "Likes jazz")
    theirs = await add(app, "im2", "Likes opera")
    [line] = await export_lines(app, "im1")
    item = json.loads(line)

    skipped = await app.ok("user/import", {"user_id": "im1", "lines": [line]})
    assert skipped == {"added": 0, "overwritten": 0, "skipped": 1, "reembedded": 0, "refused": 0}
    changed = {**item, "content": "Likes cool jazz", "embedding_model": "another-model", "vector": None}
    over = await app.ok(
        "user/import", {"user_id": "im1", "lines": [json.dumps(changed)], "on_conflict": "overwrite"}
    )
    assert over == {"added": 0, "overwritten": 1, "skipped": 0, "reembedded": 1, "refused": 0}
    listed = await app.ok("user/list", {"user_id": "im1"})
    assert [(m["memory_id"], m["content"], m["embedding_model"]) for m in listed["memories"]] == [
        (mine, "Likes cool jazz", stores.embedder.model_name)
    ]
    assert mine in await recall_ids(app, "im1", "cool jazz")

    # Another user's id is never reached: the line is stored under a fresh id, theirs is untouched.
    foreign = {**item, "memory_id": theirs, "content": "Overwritten?"}
    result = await app.ok(
        "user/import", {"user_id": "im1", "lines": [json.dumps(foreign)], "on_conflict": "overwrite"}
    )
    assert result["added"] == 1 and result["overwritten"] == 0
    history = await app.ok("history", {"user_id": "im2", "memory_id": theirs})
    assert history["memory"]["content"] == "Likes opera"

    for bad in (
        "not json",
        json.dumps({**item, "memory_id": "../../etc/passwd"}),
        json.dumps({**item, "extra": 1}),
    ):
        status, payload = await app.post("user/import", {"user_id": "im1", "lines": [bad]})
        assert (status, payload["code"]) == (400, 40001)
        assert "passwd" not in payload["msg"] and "jazz" not in payload["msg"]


async def test_export_files_are_named_by_task_and_owned(app: PrivacyApp, settings: Settings) -> None:
    await add(app, "..", "A user whose id looks like a parent directory")
    lines = await export_lines(app, "..")
    assert len(lines) == 1
    export_dir = settings.storage.data_dir / settings.privacy.export_dir
    files = list(export_dir.iterdir())
    assert len(files) == 1 and files[0].parent == export_dir
    assert b"parent directory" not in files[0].read_bytes()  # sealed with the user's key
    task_id = files[0].name.split(".")[0]

    status, payload = await app.post("user/export/download", {"user_id": "someone-else", "task_id": task_id})
    assert (status, payload["code"]) == (404, 40401)
    for bad in ("../../etc/passwd", "..", task_id + "/../x", "%2e%2e%2f"):
        status, payload = await app.post("user/export/download", {"user_id": "..", "task_id": bad})
        assert (status, payload["code"]) == (400, 40001)


async def test_import_respects_capacity(app: PrivacyApp) -> None:
    app.settings.capacity.global_limit = 2
    await add(app, "cap1", "One")
    lines = [
        json.dumps(
            {
                **json.loads((await export_lines(app, "cap1"))[0]),
                "memory_id": f"{i:032x}",
                "content": f"Fact {i}",
            }
        )
        for i in range(1, 4)
    ]
    status, payload = await app.post("user/import", {"user_id": "cap1", "lines": lines})
    assert (status, payload["code"]) == (429, 42901)
    listed = await app.ok("user/list", {"user_id": "cap1"})
    assert len(listed["memories"]) == 1  # nothing of the refused import was kept
