"""One walk through a cold archive's operations, shared by the local and the S3 archive tests."""

from __future__ import annotations

import os

import numpy as np

from engram.lifecycle.archive import ArchivedItem, ColdArchive
from engram.storage.crypto import ContentCipher


def cipher(user_id: str) -> ContentCipher:
    """A fresh data key for ``user_id`` (a second call is another key: a shredded one)."""
    return ContentCipher(user_id, os.urandom(32))


def item(memory_id: str) -> ArchivedItem:
    """An archived memory whose content names its id."""
    return ArchivedItem(memory_id, f"content of {memory_id}", np.arange(8, dtype=np.float32) / 7)


async def roundtrip(archive: ColdArchive) -> None:
    """Put, get, list and delete two users' memories; sealed with each user's key."""
    alice, bob = cipher("alice"), cipher("bob")
    for mid in ("a1", "a2", "a3"):
        await archive.put(alice, "alice", item(mid))
    await archive.put(bob, "bob", item("b1"))
    got = await archive.get(alice, "alice", "a2")
    assert got is not None and got.content == "content of a2"
    np.testing.assert_array_equal(got.vector, item("a2").vector)
    assert await archive.memory_ids("alice") == {"a1", "a2", "a3"}
    assert await archive.memory_ids("bob") == {"b1"}
    # Sealed with the owner's key: another key (a shredded one) reads nothing.
    assert await archive.get(cipher("alice"), "alice", "a2") is None
    await archive.delete("alice", ["a1", "a2", "missing"])
    assert await archive.memory_ids("alice") == {"a3"}
    assert await archive.get(alice, "alice", "a1") is None
