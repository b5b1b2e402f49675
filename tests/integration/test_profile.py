"""The user profile (L7) through the real HTTP app over SQLite + milvus-lite and the rules engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Connection

from engram.lifecycle.sweeps import Sweeper, sweep_users
from engram.models.settings import Settings
from engram.storage.database import create_engine
from engram.storage.migrate import upgrade
from engram.storage.schema import metadata, user_keys, user_profiles
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

SECTIONS = ("identity", "preferences", "relationships", "routines", "plans")


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    async with privacy_app(settings, stores, clock) as running:
        yield running


class Say(Protocol):
    async def __call__(self, user_id: str, *turns: str, app_id: str | None = None) -> None: ...


@pytest.fixture
def say(app: PrivacyApp, clock: ManualClock) -> Say:
    """One ``add`` per user turn, each processed before the next and a minute later (evolution
    orders facts by the time they were said)."""

    async def run(user_id: str, *turns: str, app_id: str | None = None) -> None:
        for turn in turns:
            body: dict[str, Any] = {"user_id": user_id, "messages": [{"role": "user", "content": turn}]}
            if app_id:
                body["app_id"] = app_id
            accepted = await app.ok("add", body)
            await app.write_path.drain()
            task = await app.ok("task", {"task_id": accepted["task_id"]})
            assert task["status"] == "DONE", task
            clock.advance(minutes=1)

    return run


def contents(profile: dict[str, Any], section: str) -> list[str]:
    return [f["content"] for f in profile[section]]


def every_content(profile: dict[str, Any]) -> set[str]:
    return {c for section in SECTIONS for c in contents(profile, section)}


async def count_rows(stores: Stores, table: Any, user_id: str) -> int:
    async with stores.metadata.engine.connect() as conn:
        query = select(func.count()).select_from(table).where(table.c.user_id == user_id)
        return int((await conn.execute(query)).scalar_one())


async def test_the_profile_holds_the_current_facts_after_a_conversation(
    app: PrivacyApp, say: Say, stores: Stores
) -> None:
    await say("p1", "I live in Lisbon.")
    before = await app.ok("profile", {"user_id": "p1"})
    assert contents(before, "identity") == ["Lives in Lisbon"]
    await say(
        "p1",
        "I work as a nurse at Santa Maria hospital.",
        "I love jazz music.",
        "I prefer window seats on flights.",
        "I have a sister named Ana.",
        "I moved to Porto last month.",
    )
    profile = await app.ok("profile", {"user_id": "p1"})
    assert sorted(contents(profile, "identity")) == [
        "Moved to Porto last month",
        "Works as a nurse at Santa Maria hospital",
    ]
    assert sorted(contents(profile, "preferences")) == ["Loves jazz music", "Prefers window seats on flights"]
    assert contents(profile, "relationships") == ["Has a sister named Ana"]
    assert "Lives in Lisbon" not in every_content(profile)  # superseded: gone at the refresh
    assert profile["user_id"] == "p1" and profile["app_id"] is None
    # Stored, sealed: the table holds no plaintext; the profile is not a memory (no counter moved).
    async with stores.metadata.engine.connect() as conn:
        blob = (await conn.execute(select(user_profiles.c.content))).scalar_one()
    assert b"Porto" not in bytes(blob) and b"nurse" not in bytes(blob)
    async with stores.metadata.transaction(readonly=True) as tx:
        counters = await tx.counters.read("p1")
    assert counters["total"] == 5  # the five current memories; Lisbon is history, the profile nothing


async def test_many_writes_coalesce_into_one_refresh(app: PrivacyApp, say: Say) -> None:
    await say("p2", "I love tea.")
    refreshes = app.local.profiles.refreshes
    # Hold the user's mailbox so that five writes queue behind it, then let them all run.
    gate = asyncio.Event()
    app.write_path.host.submit_nowait("p2", gate.wait)
    for turn in ("I love hiking.", "I have a brother named Tom.", "I go swimming every Sunday.",
                 "I plan to visit Rome in May.", "I prefer aisle seats."):  # fmt: skip
        await app.ok("add", {"user_id": "p2", "messages": [{"role": "user", "content": turn}]})
    gate.set()
    await app.write_path.drain()
    assert app.local.profiles.refreshes - refreshes == 1
    # The stored profile is current: reading it rebuilds nothing.
    profile = await app.ok("profile", {"user_id": "p2"})
    assert app.local.profiles.refreshes - refreshes == 1
    assert contents(profile, "relationships") == ["Has a brother named Tom"]
    assert contents(profile, "routines") == ["Goes swimming every Sunday"]
    assert contents(profile, "plans") == ["Plans to visit Rome in May"]


def fact(user_id: str, content: str) -> dict[str, Any]:
    """A ready memory, stored before the answer (``sync``)."""
    return {"user_id": user_id, "ownership": "USER", "mem_type": "SEMANTIC", "content": content, "sync": True}


async def test_refreshes_wait_until_the_shards_pending_writes_are_done(app: PrivacyApp) -> None:
    refreshes = app.local.profiles.refreshes
    # Another user's task stays pending behind a held mailbox while p5 writes three times.
    gate = asyncio.Event()
    app.write_path.host.submit_nowait("p6", gate.wait)
    await app.ok("add", {"user_id": "p6", "messages": [{"role": "user", "content": "I love jazz."}]})
    for content in ("Loves tea", "Lives in Oslo", "Has a sister named Ana"):
        await app.ok("add_structured", fact("p5", content))
    assert app.local.profiles.refreshes == refreshes  # p5 is noted, not rebuilt, while p6 waits
    assert app.local.profile_refresher.deferred == 1
    # A read meanwhile is current all the same: it builds from the stores.
    profile = await app.ok("profile", {"user_id": "p5"})
    assert contents(profile, "relationships") == ["Has a sister named Ana"]
    gate.set()
    await app.write_path.drain()
    # The shard went idle: one refresh each for p5 and p6, both stored profiles current.
    assert app.local.profiles.refreshes - refreshes == 2
    assert app.local.profile_refresher.deferred == 0
    assert await app.local.profiles.stored_if_fresh("p5", None) is not None
    assert await app.local.profiles.stored_if_fresh("p6", None) is not None


async def test_a_busy_shard_defers_a_refresh_no_longer_than_the_bound(
    app: PrivacyApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    refresher = app.local.profile_refresher
    moments = iter([0.0, 10.0, 31.0])
    monkeypatch.setattr(refresher, "_clock", lambda: next(moments))  # the write-end times
    monkeypatch.setattr(refresher, "_busy", lambda: True)  # a load that never lets the shard go idle
    refreshes = app.local.profiles.refreshes
    for user in ("p7", "p8"):
        await app.ok("add_structured", fact(user, "Loves jazz"))
    await app.write_path.drain()
    assert app.local.profiles.refreshes == refreshes and refresher.deferred == 2
    refresher.changed("p9")  # 31 s after p7's write: everyone waiting is refreshed now
    await app.write_path.drain()
    assert refresher.deferred == 0
    assert app.local.profiles.refreshes - refreshes == 2  # p9 has no data key yet: nothing stored


async def test_a_stale_profile_is_rebuilt_by_the_next_read_and_by_the_sweep(
    app: PrivacyApp, say: Say, settings: Settings, clock: ManualClock
) -> None:
    # As after a crash that lost the queued refresh: nothing refreshes after writes.
    settings.profile.refresh_after_writes = False
    await say("p3", "I live in Oslo.")
    assert app.local.profiles.refreshes == 0
    profile = await app.ok("profile", {"user_id": "p3"})
    assert contents(profile, "identity") == ["Lives in Oslo"]
    await say("p3", "I moved to Bergen.")
    sweeper = Sweeper(app.local.lifecycle, after_user=app.local.profiles.sweep)
    counts = await sweep_users(sweeper, ["p3"], clock(), app.write_path.host.submit)
    assert counts.profiles_refreshed == 1
    again = await sweep_users(sweeper, ["p3"], clock(), app.write_path.host.submit)
    assert again.profiles_refreshed == 0 and again.changes() == 0  # a rerun changes nothing
    stored = await app.local.profiles.stored_if_fresh("p3", None)
    assert stored is not None and contents(stored.model_dump(mode="json"), "identity") == ["Moved to Bergen"]


async def test_app_profiles_recall_include_profile_and_switches(app: PrivacyApp, say: Say) -> None:
    await say("p4", "I love sushi.")
    await say("p4", "I prefer morning flights.", app_id="travel")
    global_only = await app.ok("profile", {"user_id": "p4"})
    assert contents(global_only, "preferences") == ["Loves sushi"]
    travel = await app.ok("profile", {"user_id": "p4", "app_id": "travel"})
    assert sorted(contents(travel, "preferences")) == ["Loves sushi", "Prefers morning flights"]
    assert travel["app_id"] == "travel"

    plain = await app.ok("recall", {"user_id": "p4", "query": "sushi", "min_relevance": 0})
    assert "profile" not in plain
    with_profile = await app.ok(
        "recall",
        {
            "user_id": "p4",
            "query": "flights",
            "min_relevance": 0,
            "include_profile": True,
            "scope": {"app_id": "travel"},
        },
    )
    assert sorted(contents(with_profile["profile"], "preferences")) == [
        "Loves sushi",
        "Prefers morning flights",
    ]
    status, payload = await app.post(
        "recall", {"user_id": "p4", "query": "x", "include_profile": True, "scope": {"include_global": False}}
    )
    assert (status, payload["code"]) == (400, 40001)

    # One app off: its facts leave the profile, as they leave recall; global off: 40301.
    await app.ok("user/switch", {"user_id": "p4", "app_id": "travel", "enabled": False})
    narrowed = await app.ok("profile", {"user_id": "p4", "app_id": "travel"})
    assert contents(narrowed, "preferences") == ["Loves sushi"] and narrowed["app_id"] is None
    await app.ok("user/switch", {"user_id": "p4", "enabled": False})
    status, payload = await app.post("profile", {"user_id": "p4"})
    assert (status, payload["code"]) == (403, 40301)


async def test_export_contains_the_profile_and_purge_removes_it(
    app: PrivacyApp, say: Say, stores: Stores
) -> None:
    await say("p5", "I live in Madrid.", "I love flamenco.")
    await say("p5", "I prefer hotels near the beach.", app_id="travel")
    await app.ok("profile", {"user_id": "p5", "app_id": "travel"})
    accepted = await app.ok("user/export", {"user_id": "p5"})
    await app.write_path.drain()
    response = await app.http.post(
        "/memory/v1/user/export/download", json={"user_id": "p5", "task_id": accepted["task_id"]}
    )
    lines = [json.loads(line) for line in response.text.split("\n") if line]
    profiles = {p["profile"]["app_id"]: p["profile"] for p in lines if "profile" in p}
    assert set(profiles) == {None, "travel"}
    assert every_content(profiles[None]) == {"Lives in Madrid", "Loves flamenco"}
    assert "Prefers hotels near the beach" in every_content(profiles["travel"])
    # An import of that export takes the memories and skips the profile lines (rebuilt instead).
    result = await app.ok("user/import", {"user_id": "p5-copy", "lines": response.text.split("\n")[:-1]})
    assert result["added"] == 3 and result["refused"] == 0
    assert every_content(await app.ok("profile", {"user_id": "p5-copy"})) == {
        "Lives in Madrid",
        "Loves flamenco",
    }

    # An app purge takes that app's facts out of every profile at once.
    await app.ok("user/purge", {"user_id": "p5", "app_id": "travel"})
    await app.write_path.drain()
    # The purge dropped every profile; the refresh after it rebuilt the global one, without the app's.
    async with stores.metadata.engine.connect() as conn:
        query = select(user_profiles.c.app_id).where(user_profiles.c.user_id == "p5")
        assert (await conn.execute(query)).scalars().all() == [""]
    travel = await app.ok("profile", {"user_id": "p5", "app_id": "travel"})
    assert every_content(travel) == {"Lives in Madrid", "Loves flamenco"}
    # A full purge: no profile row, and reading one makes no new key for the user.
    await app.ok("user/purge", {"user_id": "p5"})
    await app.write_path.drain()
    assert await count_rows(stores, user_profiles, "p5") == 0
    empty = await app.ok("profile", {"user_id": "p5"})
    assert every_content(empty) == set()
    await app.write_path.drain()
    assert await count_rows(stores, user_profiles, "p5") == 0
    assert await count_rows(stores, user_keys, "p5") == 0


async def test_migration_0007_upgrades_a_database_at_0006(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        await upgrade(engine, "0006")

        def tables(conn: Connection) -> set[str]:
            return set(inspect(conn).get_table_names())

        def diff(conn: Connection) -> list[object]:
            return list(compare_metadata(MigrationContext.configure(conn), metadata))

        async with engine.connect() as conn:
            assert "user_profiles" not in await conn.run_sync(tables)
        await upgrade(engine, "0007")
        async with engine.connect() as conn:
            assert "user_profiles" in await conn.run_sync(tables)
        await upgrade(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()


async def test_a_profile_follows_the_keys_tenancy(
    settings: Settings, stores: Stores, clock: ManualClock
) -> None:
    keys = [
        {"name": "shop", "key": "shop-key-0123456789abcdef", "app_ids": ["shop"], "global_scope": True},
        {"name": "clinic", "key": "clinic-key-0123456789abcd", "app_ids": ["clinic"], "global_scope": False},
    ]
    settings.auth = settings.auth.model_validate({"api_keys": keys})
    async with privacy_app(settings, stores, clock) as secured:
        shop, clinic = keys[0]["key"], keys[1]["key"]
        for body, key, expected in (
            ({"user_id": "t1"}, shop, 0),
            ({"user_id": "t1", "app_id": "shop"}, shop, 0),
            ({"user_id": "t1", "app_id": "clinic"}, shop, 40303),  # another tenant's app
            ({"user_id": "t1", "app_id": "clinic"}, clinic, 40303),  # a profile holds global facts
        ):
            _status, payload = await secured.post("profile", body, str(key))
            assert payload["code"] == expected, (body, key)
