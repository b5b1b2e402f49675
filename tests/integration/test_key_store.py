"""A key store apart from the content (#17): a purge shreds the key where backups of the content
cannot bring it back; with the keys beside the content, such a backup can (the documented caveat)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engram.models.settings import Settings
from engram.storage.database import create_engine
from engram.storage.keyring import keyring_for
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade
from engram.storage.stores import Stores, open_stores
from tests.conftest import ManualClock
from tests.support.privacy_app import privacy_app

pytestmark = pytest.mark.integration


async def _write_backup_purge(settings: Settings, clock: ManualClock, backup: Path) -> tuple[str, str]:
    """Two users' memories; a backup of the metadata database; a full purge of the first user."""
    stores: Stores = await open_stores(settings)
    try:
        async with privacy_app(settings, stores, clock) as app:
            ids = []
            for user in ("gone", "kept"):
                body = {
                    "user_id": user,
                    "ownership": "USER",
                    "mem_type": "SEMANTIC",
                    "content": f"{user} secret",
                }
                ids.append((await app.ok("add_structured", {**body, "sync": True}))["memory_id"])
            # A consistent copy of the content database, as a nightly backup would take it.
            source = sqlite3.connect(settings.storage.data_dir / "engram.db")
            target = sqlite3.connect(backup)
            try:
                source.backup(target)
            finally:
                source.close()
                target.close()
            await app.ok("user/purge", {"user_id": "gone"})
    finally:
        await stores.close()
    return ids[0], ids[1]


async def _read_backup(settings: Settings, backup: Path, memory_id: str, user: str) -> str | None:
    """A memory's content as read from the restored backup, with the key store as it is now."""
    restored = settings.model_copy(deep=True)
    restored.storage.database_url = f"sqlite+aiosqlite:///{backup}"
    engine = create_engine(restored.storage.resolved_database_url())
    await upgrade(engine)
    store = MetadataStore(engine, keyring_for(restored.storage))
    try:
        async with store.transaction(readonly=True) as tx:
            rows = await tx.memories.get_many(user, [memory_id])
        return rows[memory_id].content
    finally:
        await store.close()


async def test_a_separate_key_store_keeps_a_purged_user_out_of_old_backups(
    tmp_path: Path, clock: ManualClock
) -> None:
    settings = Settings(
        storage={
            "data_dir": tmp_path / "data",
            "key_database_url": f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}",
        },
        recall={"timeout_ms": 30_000},
    )
    backup = tmp_path / "backup.db"
    gone, kept = await _write_backup_purge(settings, clock, backup)
    # The content database never held a key: the backup has ciphertext and nothing to open it with.
    assert await _read_backup(settings, backup, kept, "kept") == "kept secret"
    assert await _read_backup(settings, backup, gone, "gone") is None
    engine = create_engine(f"sqlite+aiosqlite:///{backup}")
    async with engine.connect() as conn:
        assert (await conn.exec_driver_sql("SELECT count(*) FROM user_keys")).scalar_one() == 0
    await engine.dispose()


async def test_keys_beside_the_content_come_back_with_a_backup(tmp_path: Path, clock: ManualClock) -> None:
    # The default layout, and why docs/privacy.md says backups must expire or purges be replayed.
    settings = Settings(storage={"data_dir": tmp_path / "data"}, recall={"timeout_ms": 30_000})
    backup = tmp_path / "backup.db"
    gone, _ = await _write_backup_purge(settings, clock, backup)
    assert await _read_backup(settings, backup, gone, "gone") == "gone secret"


def test_rotation_rewraps_the_keys_in_the_key_store(tmp_path: Path, clock: ManualClock) -> None:
    import asyncio

    import yaml

    from engram.serve.cli import main
    from engram.storage.crypto import key_fingerprint, read_key_file

    keys_url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    storage = {"data_dir": str(tmp_path / "data"), "key_database_url": keys_url}
    settings = Settings(storage=storage, recall={"timeout_ms": 30_000})
    _, kept = asyncio.run(_write_backup_purge(settings, clock, tmp_path / "backup.db"))
    config = tmp_path / "engram.yaml"
    config.write_text(yaml.safe_dump({"storage": storage}))
    assert main(["--config", str(config), "keys", "rotate"]) == 0
    new_id = key_fingerprint(read_key_file(settings.storage.resolved_master_key_file()))
    with sqlite3.connect(tmp_path / "keys.db") as conn:
        assert conn.execute("SELECT DISTINCT master_key_id FROM user_keys").fetchall() == [(new_id,)]
    # The live database still reads through the re-wrapped key; the purged user stays gone.
    live = settings.model_copy(deep=True)
    assert (
        asyncio.run(_read_backup(live, settings.storage.data_dir / "engram.db", kept, "kept"))
        == "kept secret"
    )
