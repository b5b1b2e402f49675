"""Isolation resolver (SPEC P4, R1, R6): a recall scope becomes exact store filters.

The same rules are applied twice on purpose: once as the vector store's filter, so the ANN
over-fetch is spent on visible memories only, and again on every metadata row before ranking, so a
bug in one store's filtering can never leak a memory out of its scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from engram.models.api import RecallRequest
from engram.models.domain import GLOBAL_APP, Memory
from engram.models.enums import Level, MemType, Ownership, Status
from engram.models.errors import EngramError, ErrorCode
from engram.storage.vector_filters import VectorScope


@dataclass(frozen=True, slots=True)
class RecallFilter:
    """Everything that decides whether one memory may be returned by one recall."""

    scope: VectorScope
    tags: frozenset[str]
    entities: frozenset[str]
    include_archived: bool
    as_of: datetime | None


class Placed(Protocol):
    """What places a memory for the scope and validity gates: a whole ``Memory``, or the columns a
    cold recall reads before it opens any content (``vector_copies.PlacedCopy``)."""

    @property
    def user_id(self) -> str: ...
    @property
    def app_id(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def level(self) -> Level: ...
    @property
    def ownership(self) -> Ownership: ...
    @property
    def mem_type(self) -> MemType: ...
    @property
    def status(self) -> Status: ...
    @property
    def valid_at(self) -> datetime: ...
    @property
    def invalid_at(self) -> datetime | None: ...
    @property
    def expire_at(self) -> datetime | None: ...


def resolve(request: RecallRequest) -> RecallFilter:
    """Turn a recall request's scope and filter into store filters; 40302 for cross-app recall."""
    if request.scope.cross_app.enabled:
        raise EngramError(ErrorCode.CROSS_APP_NOT_ENABLED, "cross-app recall is not enabled")
    scope = VectorScope(
        user_id=request.user_id,
        include_global=request.scope.include_global,
        app_id=request.scope.app_id,
        session_id=request.scope.session_id,
        ownerships=frozenset(request.filter.ownership),
        mem_types=frozenset(request.filter.mem_type),
    )
    return RecallFilter(
        scope=scope,
        tags=frozenset(request.filter.custom_tags),
        entities=frozenset(e.casefold() for e in request.filter.entities),
        include_archived=request.include_archived,
        as_of=request.as_of,
    )


def in_scope(scope: VectorScope, memory: Placed) -> bool:
    """True when the memory belongs to the scope's user and its level is visible from the scope."""
    if memory.user_id != scope.user_id:
        return False
    if scope.ownerships and memory.ownership not in scope.ownerships:
        return False
    if scope.mem_types and memory.mem_type not in scope.mem_types:
        return False
    if memory.level is Level.GLOBAL:
        return scope.include_global
    if memory.level is Level.APP:
        return scope.app_id is not None and memory.app_id == scope.app_id
    if scope.session_id is None or memory.session_id != scope.session_id:
        return False
    # A session memory without an app is one of the user's global memories (P4): only with them.
    if memory.app_id == GLOBAL_APP:
        return scope.include_global
    return memory.app_id == scope.app_id


def is_current(memory: Placed, now: datetime, *, include_archived: bool) -> bool:
    """True when the memory is a currently valid, unexpired fact (R6 default)."""
    allowed = (Status.ACTIVE, Status.ARCHIVED) if include_archived else (Status.ACTIVE,)
    if memory.status not in allowed:
        return False
    if memory.invalid_at is not None and memory.invalid_at <= now:
        return False
    return memory.expire_at is None or memory.expire_at > now


def was_valid_at(memory: Placed, as_of: datetime, *, include_archived: bool) -> bool:
    """True when the fact was valid at ``as_of``: valid_at <= as_of < invalid_at (R6)."""
    allowed = {Status.ACTIVE, Status.SUPERSEDED}
    if include_archived:
        allowed.add(Status.ARCHIVED)
    if memory.status not in allowed:
        return False
    if memory.valid_at > as_of:
        return False
    return memory.invalid_at is None or as_of < memory.invalid_at


def visible(flt: RecallFilter, memory: Memory, now: datetime) -> bool:
    """The final gate: scope, tags and temporal validity of one memory for one recall."""
    if flt.tags and flt.tags.isdisjoint(memory.custom_tags):
        return False
    if flt.entities and flt.entities.isdisjoint(e.casefold() for e in memory.entities):
        return False
    return placed_visible(flt, memory, now)


def placed_visible(flt: RecallFilter, memory: Placed, now: datetime) -> bool:
    """Scope and temporal validity of one memory for one recall: ``visible`` without the tag and
    entity filters (which need the sealed labels)."""
    if not in_scope(flt.scope, memory):
        return False
    if flt.as_of is not None:
        return was_valid_at(memory, flt.as_of, include_archived=flt.include_archived)
    return is_current(memory, now, include_archived=flt.include_archived)
