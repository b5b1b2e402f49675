"""Master key rotation: every user's data key re-wrapped under a new master key (``engram keys rotate``).

Resumable. The next key is created first beside the current one (``<file>.next``); from then on
every provider wraps new data keys under it and opens data keys wrapped under either. Data keys
are re-wrapped a batch per transaction, in user order, so a crash loses nothing and a rerun goes on
where the last committed batch ended. When none is left under the old key, the next key replaces
the current file in one rename and the old key is gone (``keep_old`` writes it elsewhere first).
Content is never re-encrypted: only the data keys' wrapping changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from engram.storage.crypto import (
    DecryptionError,
    LocalKeyFileProvider,
    key_fingerprint,
    load_or_create_key_file,
    next_key_file,
    read_key_file,
)
from engram.storage.schema import user_keys

Progress = Callable[[int, int], None]
"""Told (data keys re-wrapped so far, data keys in all) after each committed batch."""


@dataclass
class RotationReport:
    """What a rotation run did."""

    old_key_id: str
    new_key_id: str
    rewrapped: int
    unreadable: int
    total: int


async def rotate_master_key(
    engine: AsyncEngine,
    key_file: Path,
    *,
    batch: int = 500,
    keep_old: Path | None = None,
    on_batch: Progress | None = None,
) -> RotationReport:
    """Re-wrap every data key under a new master key, then make it the master key file's key."""
    upcoming = next_key_file(key_file)
    old_id = key_fingerprint(read_key_file(key_file))
    new_key = load_or_create_key_file(upcoming)  # resumes with the key a crashed run created
    new_id = key_fingerprint(new_key)
    provider = LocalKeyFileProvider(key_file)  # wraps under the next key, opens with either
    async with engine.connect() as conn:
        total = int((await conn.execute(select(func.count()).select_from(user_keys))).scalar_one())
    rewrapped = unreadable = 0
    after = ""
    while True:
        async with engine.begin() as conn:
            rows = (
                await conn.execute(
                    select(user_keys.c.user_id, user_keys.c.wrapped_key)
                    .where(user_keys.c.user_id > after, user_keys.c.master_key_id != new_id)
                    .order_by(user_keys.c.user_id)
                    .limit(batch)
                )
            ).all()
            for user_id, wrapped in rows:
                try:
                    data_key = provider.unwrap(bytes(wrapped), user_id)
                except DecryptionError:
                    unreadable += 1  # opens with neither key: nothing to save, and kept as it is
                    continue
                await conn.execute(
                    update(user_keys)
                    .where(user_keys.c.user_id == user_id)
                    .values(wrapped_key=provider.wrap(data_key, user_id), master_key_id=new_id)
                )
                rewrapped += 1
        if not rows:
            break
        after = rows[-1][0]
        if on_batch is not None:
            on_batch(rewrapped, total)
    _install(key_file, upcoming, keep_old)
    return RotationReport(old_id, new_id, rewrapped, unreadable, total)


def _install(key_file: Path, upcoming: Path, keep_old: Path | None) -> None:
    if keep_old is not None:
        keep_old.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(keep_old, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key_file.read_bytes())
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(upcoming, key_file)  # one rename: the file holds the old key or the new, never neither
    directory = os.open(key_file.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
