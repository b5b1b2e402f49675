"""Which shard owns a user, and what the shard actors are called (the app and the sweep job agree)."""

from __future__ import annotations

import hashlib


def shard_of(user_id: str, shard_count: int) -> int:
    """The shard that owns a user: a stable hash, the same in every process and run."""
    digest = hashlib.blake2b(user_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shard_count


def shard_name(app_name: str, index: int) -> str:
    """The Ray actor name of a shard (namespaced: named actors share the "serve" namespace)."""
    return f"{app_name}:shard:{index}"
