"""Request and response models of the quarantine routes (P5, C12): memories held for review."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from engram.models.api import MemoryView
from engram.models.ids import Identifier, MemoryId


class QuarantineListRequest(BaseModel):
    """``quarantine/list``: held memories of one user, or of every user, oldest first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: Identifier | None = None
    app_id: Identifier | None = None
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = None
    limit: int = Field(50, ge=1, le=500)


class HeldMemory(MemoryView):
    """A memory held for review: whose it is and why it was held."""

    user_id: str
    reason: str


class QuarantinePage(BaseModel):
    """A page of held memories with the cursor of the next page (None at the end)."""

    memories: list[HeldMemory]
    next_cursor: str | None


class QuarantineDecisionRequest(BaseModel):
    """``quarantine/release`` and ``quarantine/delete``: held memories of one user, by id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: Identifier
    memory_ids: list[MemoryId] = Field(min_length=1, max_length=1000)


class RefusedRelease(BaseModel):
    """A held memory that admission refused (42901 capacity full, 42902 important limit): still held."""

    memory_id: str
    code: int
    msg: str


class QuarantineResult(BaseModel):
    """What became of each id: done (released or deleted), not held (unknown, another user's, or
    not in quarantine), or refused by admission (release only)."""

    done: list[str]
    not_held: list[str] = Field(default_factory=list)
    refused: list[RefusedRelease] = Field(default_factory=list)
