"""Per-user data keys: created on first write, cached, stored wrapped, shredded on purge."""

from __future__ import annotations

import secrets

from sqlalchemy import Executable, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from models.domain import utcnow
from storage.crypto import KEY_BYTES, ContentCipher, KeyProvider
from storage.schema import user_keys


class KeyRing:
    """Finds or creates each user's data key inside the caller's transaction and caches it.

    The cache is checked against the stored wrapped key on every lookup (one primary-key read):
    another process may have shredded the key, and a cipher cached here must not outlive it.
    """

    def __init__(self, provider: KeyProvider) -> None:
        self._provider = provider
        self._ciphers: dict[str, tuple[bytes, ContentCipher]] = {}

    async def cipher_for(self, conn: AsyncConnection, user_id: str) -> ContentCipher:
        """The user's cipher, creating their data key on first use."""
        wrapped = await self._load(conn, user_id)
        if wrapped is None:
            candidate = self._provider.wrap(secrets.token_bytes(KEY_BYTES), user_id)
            await conn.execute(_insert_ignore(conn, candidate, user_id, self._provider.key_id))
            # Another process may have won the race: whatever is stored now is the key.
            wrapped = await self._load(conn, user_id)
            assert wrapped is not None
        cached = self._ciphers.get(user_id)
        if cached is not None and cached[0] == wrapped:
            return cached[1]
        cipher = ContentCipher(user_id, self._provider.unwrap(wrapped, user_id))
        self._ciphers[user_id] = (wrapped, cipher)
        return cipher

    async def shred(self, conn: AsyncConnection, user_id: str) -> bool:
        """Destroy the user's data key; their stored content can never be read again."""
        self._ciphers.pop(user_id, None)
        result = await conn.execute(delete(user_keys).where(user_keys.c.user_id == user_id))
        return bool(result.rowcount)

    def forget(self, user_id: str) -> None:
        """Drop a cached key (another process shredded it)."""
        self._ciphers.pop(user_id, None)

    @staticmethod
    async def _load(conn: AsyncConnection, user_id: str) -> bytes | None:
        row = await conn.execute(select(user_keys.c.wrapped_key).where(user_keys.c.user_id == user_id))
        value = row.scalar_one_or_none()
        return bytes(value) if value is not None else None


def _insert_ignore(conn: AsyncConnection, wrapped: bytes, user_id: str, key_id: str) -> Executable:
    values = {"user_id": user_id, "wrapped_key": wrapped, "master_key_id": key_id, "created_at": utcnow()}
    if conn.dialect.name == "postgresql":
        return postgresql.insert(user_keys).values(**values).on_conflict_do_nothing()
    return sqlite.insert(user_keys).values(**values).on_conflict_do_nothing()
