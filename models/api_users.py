"""Request and response models of the per-user operations: listing, purge, switches, export and
import (P1-P3), the profile (L7), closing a session and restoring an archived memory."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from engram.models.api_base import RequestModel
from engram.models.enums import Level, MemType, Status
from engram.models.ids import Identifier, MemoryId


class UserListRequest(RequestModel):
    """``user/list`` (C7)."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier | None = None
    level: Level | None = None
    mem_type: MemType | None = None
    status: Status | None = None
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: int = Field(50, ge=1, le=500)


class UserPurgeRequest(RequestModel):
    """``user/purge`` (C7)."""

    user_id: Identifier
    app_id: Identifier | None = None
    level: Level | None = None


class UserSwitchRequest(RequestModel):
    """``user/switch`` (C7); without ``enabled`` it only reads the switches (the console shows them)."""

    user_id: Identifier
    app_id: Identifier | None = None
    enabled: bool | None = None


class UserExportRequest(RequestModel):
    """``user/export`` (C7)."""

    user_id: Identifier


class UserImportRequest(RequestModel):
    """``user/import`` (C7)."""

    user_id: Identifier
    lines: list[str] = Field(min_length=1, max_length=10_000)
    on_conflict: Literal["skip", "overwrite"] = "skip"


class ProfileRequest(RequestModel):
    """``profile`` (C11, L7): the user's derived profile, global facts plus one app's when named."""

    user_id: Identifier
    app_id: Identifier | None = None


class SessionCloseRequest(RequestModel):
    """``session/close`` (C8, L6)."""

    user_id: Identifier
    app_id: Identifier | None = None
    session_id: Identifier
    to_be_continued: bool = False
    must_promote: list[MemoryId] = Field(default_factory=list, max_length=1000)
    # False: the user's app-less session memories stay as they are (a key without global scope
    # always closes this way, P4).
    include_global: bool = True


class SessionCloseResult(BaseModel):
    """What ``session/close`` did with the session's memories (L6)."""

    promoted: list[str]
    dropped: list[str]
    # Valued for promotion but refused by the capacity check (42901 on their target): dropped too.
    capacity_refused: list[str] = Field(default_factory=list)
    continuity_memory_id: str | None = None


class RestoreRequest(RequestModel):
    """``restore``: bring an archived memory back to ACTIVE (L2)."""

    user_id: Identifier
    memory_id: MemoryId
