"""A group's data keys are checked in one read (#11), and still as strictly as one by one: a key
made for a first write, a shredded key never served from the cache (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import delete, event

from engram.storage.schema import user_keys
from engram.storage.stores import Stores

pytestmark = pytest.mark.integration


@contextmanager
def key_reads(stores: Stores) -> Iterator[list[str]]:
    """The statements that touch the key table while the block runs."""
    seen: list[str] = []
    engine = (stores.metadata.keyring.engine or stores.metadata.engine).sync_engine

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "user_keys" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def test_one_read_checks_every_users_key(stores: Stores) -> None:
    async with stores.metadata.transaction() as tx:
        blobs = {user: (await tx.keys.cipher(user)).encrypt(f"{user} fact") for user in ("k1", "k2", "k3")}
    async with stores.metadata.transaction() as tx:
        with key_reads(stores) as reads:
            await tx.keys.prefetch(["k1", "k2", "k3", "k2"])
            ciphers = {user: await tx.keys.cipher(user) for user in ("k1", "k2", "k3")}
    assert len(reads) == 1
    assert {user: c.decrypt(blobs[user]) for user, c in ciphers.items()} == {
        "k1": "k1 fact",
        "k2": "k2 fact",
        "k3": "k3 fact",
    }


async def test_a_first_write_gets_a_key_and_a_shredded_key_is_not_served(stores: Stores) -> None:
    async with stores.metadata.transaction() as tx:
        old = (await tx.keys.cipher("k4")).encrypt("before the purge")
    # Another process shreds it: this keyring still caches the old key; the grouped read must see
    # that the stored one is gone.
    engine = stores.metadata.keyring.engine or stores.metadata.engine
    async with engine.begin() as conn:
        assert (await conn.execute(delete(user_keys).where(user_keys.c.user_id == "k4"))).rowcount == 1
    async with stores.metadata.transaction() as tx:
        await tx.keys.prefetch(["k4", "k5"])
        renewed, fresh = await tx.keys.cipher("k4"), await tx.keys.cipher("k5")
    assert renewed.decrypt(old) is None  # a new key: the shredded content stays unreadable
    assert fresh.decrypt(fresh.encrypt("first")) == "first"
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await tx.keys.existing("k5") is not None
