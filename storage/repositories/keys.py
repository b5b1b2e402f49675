"""Each user's content cipher within one transaction (their data key, read or made once)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncConnection

from engram.storage.crypto import ContentCipher
from engram.storage.keyring import KeyRing


class UserKeys:
    """The ciphers of the users one transaction touches."""

    def __init__(self, conn: AsyncConnection, keyring: KeyRing) -> None:
        self.conn = conn
        self._keyring = keyring
        # The keyring checks its cache against the stored key once per user and transaction.
        self._ciphers: dict[str, ContentCipher] = {}

    async def cipher(self, user_id: str) -> ContentCipher:
        """The user's content cipher (creates their data key on first use)."""
        cipher = self._ciphers.get(user_id)
        if cipher is None:
            cipher = await self._keyring.cipher_for(self.conn, user_id)
            self._ciphers[user_id] = cipher
        return cipher

    async def prefetch(self, user_ids: Iterable[str]) -> None:
        """Have the ciphers of these users ready for the transaction (their keys read at once)."""
        missing = {u for u in user_ids if u not in self._ciphers}
        if missing:
            self._ciphers.update(await self._keyring.ciphers_for(self.conn, missing))

    async def prefetch_existing(self, user_ids: Iterable[str]) -> None:
        """``prefetch_ciphers`` for reads: the keys of these users read at once, none created."""
        missing = {u for u in user_ids if u not in self._ciphers}
        if missing:
            self._ciphers.update(await self._keyring.existing_ciphers(self.conn, missing))

    async def existing(self, user_id: str) -> ContentCipher | None:
        """The user's content cipher if they have a data key; never creates one (sweeps of purged users)."""
        cipher = self._ciphers.get(user_id)
        if cipher is None:
            cipher = await self._keyring.existing_cipher(self.conn, user_id)
            if cipher is not None:
                self._ciphers[user_id] = cipher
        return cipher

    async def shred(self, user_id: str) -> bool:
        """Destroy the user's data key: all their stored content becomes unreadable."""
        self._ciphers.pop(user_id, None)
        return await self._keyring.shred(self.conn, user_id)
