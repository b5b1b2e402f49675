"""Master key rotation (#17): every data key re-wrapped, content still readable, resumable after a
kill -9 that lands mid-run, and the old master key gone at the end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select

from engram.models.api import AddStructuredRequest, HistoryRequest
from engram.models.enums import MemType, Ownership
from engram.models.settings import Settings
from engram.storage.crypto import (
    DecryptionError,
    LocalKeyFileProvider,
    key_fingerprint,
    next_key_file,
    read_key_file,
)
from engram.storage.database import create_engine
from engram.storage.keyring import KeyRing
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade
from engram.storage.schema import user_keys
from engram.storage.stores import open_stores

pytestmark = pytest.mark.integration

KEYS = 3000  # enough single-key batches that the kill lands while most are still to do
READERS = ["reader-a", "reader-b", "zz-reader"]


async def _seed(settings: Settings) -> dict[str, str]:
    """Memories for a few users, and data keys for many more; memory id -> user id."""
    from engram.actors.memory_service import MemoryService

    stores = await open_stores(settings)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        owned = {}
        for user in READERS:
            request = AddStructuredRequest(
                user_id=user,
                ownership=Ownership.USER,
                mem_type=MemType.SEMANTIC,
                content=f"{user} keeps a sourdough starter",
                sync=True,
            )
            created = await service.add_structured(request)
            owned[created.memory_id] = user
        async with stores.metadata.engine.begin() as conn:
            for n in range(KEYS):
                await stores.metadata.keyring.cipher_for(conn, f"user-{n:05d}")
        return owned
    finally:
        await stores.close()


async def _key_ids(settings: Settings) -> dict[str, int]:
    engine = create_engine(settings.storage.resolved_database_url())
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                select(user_keys.c.master_key_id, func.count()).group_by(user_keys.c.master_key_id)
            )
            return {str(k): int(n) for k, n in rows.all()}
    finally:
        await engine.dispose()


async def _contents(settings: Settings, owned: dict[str, str]) -> set[str]:
    """What a fresh process reads of the seeded memories (through the master key files as they are)."""
    engine = create_engine(settings.storage.resolved_database_url())
    await upgrade(engine)
    store = MetadataStore(engine, KeyRing(LocalKeyFileProvider(settings.storage.resolved_master_key_file())))
    try:
        found = set()
        async with store.transaction(readonly=True) as tx:
            for memory_id, user in owned.items():
                rows = await tx.memories.get_many(user, [memory_id])
                found.add(rows[memory_id].content or "")
        return found
    finally:
        await store.close()


def _rotate(config: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, ENGRAM_CONFIG=str(config), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "engram.serve.cli", "keys", "rotate", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_rotation_survives_a_kill_mid_run_and_retires_the_old_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = Settings(storage={"data_dir": data_dir})
    config = tmp_path / "engram.yaml"
    config.write_text(yaml.safe_dump({"storage": {"data_dir": str(data_dir)}}))
    owned = asyncio.run(_seed(settings))
    expected = {f"{u} keeps a sourdough starter" for u in READERS}
    key_file = settings.storage.resolved_master_key_file()
    old_key = read_key_file(key_file)
    old_id = key_fingerprint(old_key)
    assert asyncio.run(_key_ids(settings)) == {old_id: KEYS + len(READERS)}

    # kill -9 once some batches have committed.
    process = _rotate(config, "--batch", "1")
    assert process.stdout is not None
    seen = 0
    for line in process.stdout:
        if json.loads(line).get("rewrapped", 0) >= 50:
            seen += 1
            break
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert seen and process.returncode == -signal.SIGKILL
    halfway = asyncio.run(_key_ids(settings))
    new_id = key_fingerprint(read_key_file(next_key_file(key_file)))
    # The kill landed mid-run: some data keys moved to the new master key, some not yet.
    assert halfway.get(new_id, 0) >= 50 and halfway.get(old_id, 0) > 0, halfway
    assert sum(halfway.values()) == KEYS + len(READERS)
    # Half-rotated, a fresh process still reads every user's content.
    assert asyncio.run(_contents(settings, owned)) == expected

    # The rerun goes on where the kill stopped it and installs the new key.
    kept = tmp_path / "old.key"
    finished = _rotate(config, "--batch", "400", "--keep-old", str(kept))
    out, err = finished.communicate(timeout=300)
    assert finished.returncode == 0, err[-2000:]
    report = json.loads(out.strip().splitlines()[-1])["rotated"]
    assert report["new_key_id"] == new_id and report["unreadable"] == 0
    assert report["rewrapped"] == halfway.get(old_id, 0)  # only what the killed run had not done
    assert asyncio.run(_key_ids(settings)) == {new_id: KEYS + len(READERS)}
    assert not next_key_file(key_file).exists()
    assert key_fingerprint(read_key_file(key_file)) == new_id
    assert read_key_file(kept) == old_key
    assert asyncio.run(_contents(settings, owned)) == expected

    # The old master key alone opens nothing any more.
    old_only = tmp_path / "only-old.key"
    old_only.write_bytes(kept.read_bytes())
    provider = LocalKeyFileProvider(old_only)
    engine = create_engine(settings.storage.resolved_database_url())

    async def first_wrapped() -> tuple[str, bytes]:
        async with engine.connect() as conn:
            row = (await conn.execute(select(user_keys.c.user_id, user_keys.c.wrapped_key).limit(1))).one()
        await engine.dispose()
        return str(row[0]), bytes(row[1])

    user, wrapped = asyncio.run(first_wrapped())
    with pytest.raises(DecryptionError):
        provider.unwrap(wrapped, user)


def test_history_reads_through_a_provider_that_learns_of_the_rotation(tmp_path: Path) -> None:
    # A process started before the rotation holds only the old key; it reads the new wrapping
    # by reading its key files again when a data key opens with none of its keys.
    settings = Settings(storage={"data_dir": tmp_path / "data"})

    async def scenario() -> str | None:
        from engram.actors.memory_service import MemoryService
        from engram.storage.key_rotation import rotate_master_key

        stores = await open_stores(settings)
        try:
            service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
            request = AddStructuredRequest(
                user_id="u1",
                ownership=Ownership.USER,
                mem_type=MemType.SEMANTIC,
                content="Likes figs",
                sync=True,
            )
            memory_id = (await service.add_structured(request)).memory_id
            await rotate_master_key(stores.metadata.engine, settings.storage.resolved_master_key_file())
            stores.metadata.keyring.forget("u1")  # as another process would find it: nothing cached
            view = await service.history(HistoryRequest(user_id="u1", memory_id=memory_id))
            return view.memory.content
        finally:
            await stores.close()

    assert asyncio.run(scenario()) == "Likes figs"
