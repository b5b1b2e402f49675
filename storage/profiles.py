"""Stored user profiles (L7): one row per (user, app), the profile sealed with the user's key.

The profile is JSON of ``models.profile.UserProfile``, sealed like memory content and bound to its
user and app, so a row copied to another key opens as nothing. ``source_version`` is the user's
change version the profile was built from: a reader compares it with the current one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy import and_, delete, select

from engram.models.domain import Memory
from engram.models.enums import Level, Ownership, Status
from engram.models.profile import UserProfile
from engram.storage.crypto import ContentCipher
from engram.storage.metadata import MetadataTx
from engram.storage.repositories.rows import upsert
from engram.storage.schema import memories, user_profiles


@dataclass(frozen=True, slots=True)
class StoredProfile:
    """A stored profile and the user version it was built from."""

    profile: UserProfile
    source_version: int
    refreshed_at: datetime


def _label(user_id: str, app_id: str) -> str:
    return f"profile:{user_id}:{app_id}"


def seal_profile(cipher: ContentCipher, profile: UserProfile, app_id: str) -> bytes:
    """The profile as sealed bytes, bound to its user and app."""
    return cipher.seal_bytes(profile.model_dump_json().encode(), _label(profile.user_id, app_id))


def open_profile(cipher: ContentCipher, user_id: str, app_id: str, blob: bytes) -> UserProfile | None:
    """The profile in ``blob``, or None when it cannot be opened (key shredded) or read."""
    opened = cipher.open_bytes(blob, _label(user_id, app_id))
    if opened is None:
        return None
    try:
        return UserProfile.model_validate_json(opened)
    except ValidationError:
        return None  # written by another version of the model: the next refresh rewrites it


async def read_profile(tx: MetadataTx, user_id: str, app_id: str) -> StoredProfile | None:
    """The stored profile of ``user_id`` for ``app_id`` ("" = global), or None (none, or unreadable)."""
    row = (
        (
            await tx.conn.execute(
                select(user_profiles).where(
                    and_(user_profiles.c.user_id == user_id, user_profiles.c.app_id == app_id)
                )
            )
        )
        .mappings()
        .one_or_none()
    )
    if row is None:
        return None
    cipher = await tx.keys.existing(user_id)
    if cipher is None:
        return None
    profile = open_profile(cipher, user_id, app_id, bytes(row["content"]))
    if profile is None:
        return None
    return StoredProfile(profile, int(row["source_version"]), row["refreshed_at"])


async def profile_apps(tx: MetadataTx, user_id: str) -> list[str]:
    """The app ids ("" = global) the user has a stored profile for."""
    query = select(user_profiles.c.app_id).where(user_profiles.c.user_id == user_id)
    return sorted(str(a) for a in (await tx.conn.execute(query)).scalars())


async def write_profile(
    tx: MetadataTx, cipher: ContentCipher, profile: UserProfile, app_id: str, source_version: int
) -> None:
    """Insert or replace the stored profile of ``profile.user_id`` for ``app_id``."""
    values = {
        "user_id": profile.user_id,
        "app_id": app_id,
        "content": seal_profile(cipher, profile, app_id),
        "source_version": source_version,
        "refreshed_at": profile.refreshed_at,
    }
    statement = upsert(tx.conn, user_profiles, values)
    await tx.conn.execute(
        statement.on_conflict_do_update(
            index_elements=["user_id", "app_id"],
            set_={k: v for k, v in values.items() if k not in ("user_id", "app_id")},
        )
    )


async def delete_profiles(tx: MetadataTx, user_id: str, app_id: str | None = None) -> int:
    """Remove the user's stored profiles (of one app when given); returns how many rows went."""
    condition = user_profiles.c.user_id == user_id
    if app_id is not None:
        condition = and_(condition, user_profiles.c.app_id == app_id)
    result = await tx.conn.execute(delete(user_profiles).where(condition))
    return int(result.rowcount or 0)


async def profile_memories(tx: MetadataTx, user_id: str) -> list[Memory]:
    """The user's ACTIVE facts about themselves, global or of an app (the candidates of any profile)."""
    query = select(memories).where(
        and_(
            memories.c.user_id == user_id,
            memories.c.status == Status.ACTIVE.value,
            memories.c.ownership == Ownership.USER.value,
            memories.c.level.in_([Level.GLOBAL.value, Level.APP.value]),
        )
    )
    return await tx.memories.load(user_id, query)
