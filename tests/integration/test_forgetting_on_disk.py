"""Forgetting that reaches the disk (SPEC P8): after purge and its sweep, no file under the data
directory holds the purged user's plaintext, a key that opens their data, or their vectors.

Real SQLite (in the data directory, WAL mode), real milvus-lite, the real cold archive and export
files, through the in-process HTTP app. Every file is scanned as raw bytes; the scan is first
shown to find what it looks for (the vectors and the wrapped key before the purge), so that a
clean scan afterwards means the bytes are gone, not that the scan is blind.
"""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from engram.lifecycle.sweeps import Sweeper, run_inline, sweep_users
from engram.models.settings import Settings
from engram.storage.schema import user_keys, write_tasks
from engram.storage.stores import Stores, open_stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Vectors flushed into milvus-lite's segment files every two rows (the default 256 would keep
    a small test's vectors in its memtable, where a delete drops them before any file holds them)."""
    return Settings(
        storage={"data_dir": tmp_path / "data", "milvus_lite_flush_rows": 2}, recall={"timeout_ms": 30_000}
    )


@pytest.fixture
def database_url(settings: Settings) -> str:
    """SQLite inside the data directory, as the embedded default keeps it (WAL and SHM beside it)."""
    return f"sqlite+aiosqlite:///{settings.storage.data_dir / 'engram.db'}"


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    async with privacy_app(settings, stores, clock) as running:
        yield running


# --- helpers ----------------------------------------------------------------------------------------


def structured(user_id: str, content: str, **fields: Any) -> dict[str, Any]:
    return {"user_id": user_id, "ownership": "USER", "mem_type": "SEMANTIC", "content": content, **fields}


async def add_structured(app: PrivacyApp, user_id: str, content: str, **fields: Any) -> str:
    data = await app.ok("add_structured", structured(user_id, content, sync=True, **fields))
    return str(data["memory_id"])


async def add_messages(app: PrivacyApp, user_id: str, text: str, **fields: Any) -> str:
    """An ``add`` (extraction); returns its task id once it is DONE."""
    body = {"user_id": user_id, "messages": [{"role": "user", "content": text}], **fields}
    accepted = await app.ok("add", body)
    await app.write_path.drain()
    task = await app.ok("task", {"task_id": accepted["task_id"]})
    assert task["status"] == "DONE", task
    return str(accepted["task_id"])


async def export_lines(app: PrivacyApp, user_id: str) -> tuple[str, list[str]]:
    accepted = await app.ok("user/export", {"user_id": user_id})
    await app.write_path.drain()
    response = await app.http.post(
        "/memory/v1/user/export/download", json={"user_id": user_id, "task_id": accepted["task_id"]}
    )
    assert response.status_code == 200
    lines = [line for line in response.text.split("\n") if line and "memory_id" in line]
    return str(accepted["task_id"]), lines


async def import_with_reasons(app: PrivacyApp, user_id: str, template: str, marker: str) -> None:
    """Import a line whose content and change reasons carry ``marker`` (one reason holds a secret)."""
    item = json.loads(template)
    item.update(memory_id="f" * 31 + "1", content=f"Keeps a diary named {marker}diary", vector=None)
    change = item["changes"][0]
    item["changes"] = [
        {**change, "reason": f"evolution: the user said {marker}reason", "content_before": None},
        {**change, "op_type": "UPDATE", "reason": "api key sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"},
    ]
    result = await app.ok("user/import", {"user_id": user_id, "lines": [json.dumps(item)]})
    assert result["added"] == 1, result


async def wrapped_key(stores: Stores, user_id: str) -> bytes | None:
    async with stores.metadata.engine.connect() as conn:
        found = await conn.execute(select(user_keys.c.wrapped_key).where(user_keys.c.user_id == user_id))
        value = found.scalar_one_or_none()
    return bytes(value) if value is not None else None


async def vector_patterns(stores: Stores, memory_ids: list[str]) -> dict[str, bytes]:
    """A 32-byte run (8 float32 values) from the middle of each memory's stored vector."""
    found = await stores.vectors.get_vectors(memory_ids)
    assert set(found) == set(memory_ids)
    return {mid: np.asarray(v, dtype="<f4").tobytes()[64:96] for mid, v in found.items()}


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def holders(root: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    """For each needle that some file under ``root`` holds, the files holding it."""
    contents = {p: p.read_bytes() for p in files_under(root)}
    found: dict[str, list[str]] = {}
    for name, needle in needles.items():
        where = [str(p.relative_to(root)) for p, data in contents.items() if needle in data]
        if where:
            found[name] = where
    return found


async def sweep(app: PrivacyApp, settings: Settings, clock: ManualClock, *users: str) -> None:
    """The lifecycle sweep past every retention (deleted rows, finished tasks), as the daily job runs it."""
    days = max(settings.lifecycle.purge_deleted_after_days, settings.privacy.task_retention_hours / 24) + 1
    clock.advance(days=days)
    counts = await sweep_users(Sweeper(app.local.lifecycle), list(users), clock(), run_inline)
    assert counts.failed_users == 0, counts.failures


# --- a full purge -------------------------------------------------------------------------------------


async def test_full_purge_and_sweep_leave_no_byte_of_the_user_on_disk(
    app: PrivacyApp, stores: Stores, settings: Settings, clock: ManualClock
) -> None:
    data_dir = settings.storage.data_dir
    markers = {f"a{i}": f"QZXA{i}mark".encode() for i in range(5)}
    ids = [
        await add_structured(app, "fa", "Plays the QZXA0mark flute on weekends"),
        await add_structured(app, "fa", "Works on the QZXA1mark project", app_id="shop"),
        # Archived by the sweep below: its content and vector go to the cold archive first.
        await add_structured(
            app, "fa", "Booked the QZXA2mark hotel", expire_at=(clock() + _days(1)).isoformat()
        ),
    ]
    await add_messages(app, "fa", "I live in QZXA3mark street and I love sailing.")
    _task, lines = await export_lines(app, "fa")
    await import_with_reasons(app, "fa", lines[0], "QZXA4mark")
    keep = await add_structured(app, "fb", "Grows QZXB0mark tomatoes")
    # The sweep archives the expired memory (archive object written, vector removed from the index).
    clock.advance(days=2)
    await sweep_users(Sweeper(app.local.lifecycle), ["fa", "fb"], clock(), run_inline)
    assert ids[2] in await app.local.lifecycle.archive.memory_ids("fa")
    export_task, _ = await export_lines(app, "fa")
    listed = await app.ok("user/list", {"user_id": "fa"})
    indexed = [m["memory_id"] for m in listed["memories"] if m["status"] in ("ACTIVE", "SUPERSEDED")]
    assert len(indexed) >= 4
    patterns = await vector_patterns(stores, indexed)
    key = await wrapped_key(stores, "fa")
    assert key is not None
    await app.write_path.drain()

    # The scan sees what it looks for while the user exists.
    before = holders(data_dir, {**patterns, "key": key})
    assert set(patterns) <= set(before) and "key" in before, before
    assert any(p.name.startswith(export_task) for p in files_under(data_dir / "exports"))

    assert (await app.ok("user/purge", {"user_id": "fa"}))["shredded"] is True
    await sweep(app, settings, clock, "fa", "fb")

    left = holders(data_dir, {**markers, **patterns, "key": key, "secret": b"sk-live-4f9a8b7c6d5e"})
    assert left == {}, f"after purge and sweep the data directory still holds: {left}"
    assert await wrapped_key(stores, "fa") is None
    # The other user is untouched: readable, recallable, their vector still in the index.
    found = await app.ok("recall", {"user_id": "fb", "query": "tomatoes", "min_relevance": 0})
    assert [m["memory_id"] for m in found["memories"]] == [keep]
    assert found["memories"][0]["content"] == "Grows QZXB0mark tomatoes"
    assert holders(data_dir, await vector_patterns(stores, [keep])) != {}


def _days(n: float) -> Any:
    from datetime import timedelta

    return timedelta(days=n)


# --- an app or level purge ----------------------------------------------------------------------------


async def test_app_purge_leaves_no_text_in_tasks_and_no_vector_on_disk(
    app: PrivacyApp, stores: Stores, settings: Settings, clock: ManualClock
) -> None:
    task_id = await add_messages(app, "ap", "I live in QZXP0mark street and I love sailing.", app_id="shop")
    task = await app.ok("task", {"task_id": task_id})
    assert "QZXP0mark" in json.dumps(task), task  # the decisions quote the fact while it exists
    shop = await add_structured(app, "ap", "Ordered the QZXP1mark lamp", app_id="shop")
    kept = await add_structured(app, "ap", "Speaks QZXK0mark Portuguese")
    _export, lines = await export_lines(app, "ap")
    template = next(line for line in lines if json.loads(line)["memory_id"] == shop)
    item = json.loads(template)
    item.update(memory_id="e" * 31 + "2", content="Returned the QZXP2mark chair", vector=None)
    item["changes"] = [{**item["changes"][0], "reason": "merged: QZXP3mark in the reason"}]
    await app.ok("user/import", {"user_id": "ap", "lines": [json.dumps(item)]})
    listed = await app.ok("user/list", {"user_id": "ap", "app_id": "shop"})
    purged = [m["memory_id"] for m in listed["memories"]]
    patterns = await vector_patterns(stores, purged)
    await app.write_path.drain()
    # Finished tasks keep no payload (the raw request is held only until the task is done).
    async with stores.metadata.engine.connect() as conn:
        payloads = (
            await conn.execute(select(write_tasks.c.payload).where(write_tasks.c.user_id == "ap"))
        ).scalars()
        assert all(bytes(p) == b"" for p in payloads)

    await app.ok("user/purge", {"user_id": "ap", "app_id": "shop"})

    task = await app.ok("task", {"task_id": task_id})
    assert "QZXP0mark" not in json.dumps(task), task
    log = await app.ok("change_log", {"user_id": "ap", "limit": 100})
    assert not any(f"QZXP{i}mark" in json.dumps(log) for i in range(4)), log
    history = await app.ok("history", {"user_id": "ap", "memory_id": item["memory_id"]})
    assert "QZXP" not in json.dumps(history), history

    await sweep(app, settings, clock, "ap")
    markers = {f"p{i}": f"QZXP{i}mark".encode() for i in range(4)}
    left = holders(settings.storage.data_dir, {**markers, **patterns})
    assert left == {}, f"after the app purge and sweep the data directory still holds: {left}"
    # What the purge did not reach is intact.
    still = await app.ok("history", {"user_id": "ap", "memory_id": kept})
    assert still["memory"]["content"] == "Speaks QZXK0mark Portuguese"


async def test_level_purge_scrubs_the_tasks_of_what_it_purged(app: PrivacyApp, clock: ManualClock) -> None:
    task_id = await add_messages(
        app,
        "lp",
        "I live in QZXL0mark street and I love sailing.",
        app_id="shop",
        session_id="s1",
        level="SESSION",
    )
    assert "QZXL0mark" in json.dumps(await app.ok("task", {"task_id": task_id}))
    await app.ok("user/purge", {"user_id": "lp", "level": "SESSION"})
    assert "QZXL0mark" not in json.dumps(await app.ok("task", {"task_id": task_id}))


# --- retention of finished tasks ------------------------------------------------------------------


async def test_finished_tasks_and_exports_expire_after_the_retention(
    app: PrivacyApp, settings: Settings, clock: ManualClock
) -> None:
    task_id = await add_messages(app, "rt", "I live in QZXT0mark street and I love sailing.")
    export_task, _ = await export_lines(app, "rt")
    exports = settings.storage.data_dir / "exports"
    hours = settings.privacy.task_retention_hours
    clock.advance(hours=hours - 1)
    await sweep_users(Sweeper(app.local.lifecycle), ["rt"], clock(), run_inline)
    assert (await app.ok("task", {"task_id": task_id}))["status"] == "DONE"  # kept within the retention
    assert any(p.name.startswith(export_task) for p in exports.iterdir())
    clock.advance(hours=2)
    counts = await sweep_users(Sweeper(app.local.lifecycle), ["rt"], clock(), run_inline)
    assert counts.expired_tasks == 2  # the add and the export
    for gone in (task_id, export_task):
        _status, payload = await app.post("task", {"task_id": gone})
        assert payload["code"] == 40401
    assert not any(exports.iterdir())
    assert holders(settings.storage.data_dir, {"t0": b"QZXT0mark"}) == {}


# --- imported reasons -----------------------------------------------------------------------------------


async def test_imported_reasons_are_sealed_screened_and_purged(
    app: PrivacyApp, stores: Stores, settings: Settings
) -> None:
    await add_structured(app, "ir", "Collects stamps")
    _task, lines = await export_lines(app, "ir")
    await import_with_reasons(app, "ir", lines[0], "QZXR0mark")
    imported = "f" * 31 + "1"
    history = await app.ok("history", {"user_id": "ir", "memory_id": imported})
    reasons = [c["reason"] for c in history["changes"]]
    assert "evolution: the user said QZXR0markreason" in reasons  # readable by its owner
    assert not any("sk-live-4f9a8b7c6d5e" in r for r in reasons), reasons  # the secret is redacted
    await app.write_path.drain()
    assert holders(settings.storage.data_dir, {"reason": b"QZXR0markreason"}) == {}  # sealed at rest

    await app.ok("user/purge", {"user_id": "ir", "app_id": None, "level": "GLOBAL"})
    log = await app.ok("change_log", {"user_id": "ir", "limit": 100})
    assert "QZXR0mark" not in json.dumps(log)


# --- reads never create keys -------------------------------------------------------------------------


async def test_reading_a_purged_user_creates_no_key(app: PrivacyApp, stores: Stores) -> None:
    mid = await add_structured(app, "rk", "Rides a QZXK9mark bicycle")
    await app.ok("user/purge", {"user_id": "rk"})
    assert await wrapped_key(stores, "rk") is None
    log = await app.ok("change_log", {"user_id": "rk", "limit": 50})
    assert [c["op_type"] for c in log["changes"]] == ["PURGE", "ADD"]
    await app.post("history", {"user_id": "rk", "memory_id": mid})
    await app.post("user/list", {"user_id": "rk", "status": "DELETED"})
    assert await wrapped_key(stores, "rk") is None
    # A user who never wrote gets no key from a read either.
    await app.ok("change_log", {"user_id": "never-wrote", "limit": 10})
    assert await wrapped_key(stores, "never-wrote") is None


# --- file modes --------------------------------------------------------------------------------------


async def test_every_file_and_directory_is_private(
    app: PrivacyApp, settings: Settings, clock: ManualClock
) -> None:
    await add_structured(app, "fm", "Paints watercolours", expire_at=(clock() + _days(1)).isoformat())
    await add_messages(app, "fm", "I live in Lisbon and I love sailing.")
    await export_lines(app, "fm")
    clock.advance(days=2)
    await sweep_users(Sweeper(app.local.lifecycle), ["fm"], clock(), run_inline)
    data_dir = settings.storage.data_dir
    assert any((data_dir / "archive").rglob("*")) and any((data_dir / "exports").iterdir())
    wide = {
        str(p.relative_to(data_dir)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in [data_dir, *data_dir.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) & 0o077
    }
    assert wide == {}, wide


async def test_a_data_dir_left_open_is_tightened(tmp_path: Path, embedder: Any) -> None:
    data_dir = tmp_path / "old"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    settings = Settings(storage={"data_dir": data_dir})
    opened = await open_stores(settings, embedder=embedder)
    await opened.close()
    database = data_dir / "engram.db"
    database.chmod(0o644)
    opened = await open_stores(settings, embedder=embedder)
    await opened.close()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


async def test_migration_0009_drops_the_payloads_of_finished_tasks(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from engram.storage.database import create_engine
    from engram.storage.migrate import upgrade

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        await upgrade(engine, "0007")
        at = datetime(2026, 1, 1, tzinfo=UTC)
        async with engine.begin() as conn:
            for task_id, status in (("a" * 32, "DONE"), ("b" * 32, "FAILED"), ("c" * 32, "PENDING")):
                await conn.execute(
                    write_tasks.insert().values(
                        task_id=task_id,
                        user_id="u",
                        kind="add",
                        status=status,
                        payload=b"sealed request",
                        result=None,
                        error=None,
                        attempts=0,
                        created_at=at,
                        updated_at=at,
                    )
                )
        await upgrade(engine)
        async with engine.connect() as conn:
            rows = (await conn.execute(select(write_tasks.c.status, write_tasks.c.payload))).all()
        assert {status: bytes(payload) for status, payload in rows} == {
            "DONE": b"",
            "FAILED": b"",
            "PENDING": b"sealed request",
        }
    finally:
        await engine.dispose()
