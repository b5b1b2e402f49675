"""Building new memory records from what a write asked for."""

from __future__ import annotations

from datetime import datetime

from engram.models.domain import GLOBAL_APP, Memory
from engram.models.enums import Level, MemType, Ownership
from engram.models.ids import new_id
from engram.models.rules.decay import initial_weight
from engram.models.settings import InitialWeights


def placement(level: Level | None, app_id: str | None, session_id: str | None) -> tuple[Level, str]:
    """The level a memory is stored at and its app_id ("" for global memories, D1)."""
    del session_id  # a session memory keeps its app (if any); the session id is stored as is
    if level is None:
        level = Level.APP if app_id else Level.GLOBAL
    if level is Level.GLOBAL:
        return level, GLOBAL_APP
    return level, app_id or GLOBAL_APP


def new_memory(
    weights: InitialWeights,
    *,
    user_id: str,
    app_id: str,
    level: Level,
    session_id: str | None,
    ownership: Ownership,
    mem_type: MemType,
    content: str,
    content_hash: str,
    embedding_model: str,
    now: datetime,
    valid_at: datetime | None = None,
    is_important: bool = False,
    expire_at: datetime | None = None,
    source_msg_id: str | None = None,
    custom_tags: list[str] | None = None,
    entities: list[str] | None = None,
    source_type: str = "conversation",
    context: str | None = None,
) -> Memory:
    """A new ACTIVE memory at its type's initial weight (W7)."""
    memory_id = new_id()
    return Memory(
        memory_id=memory_id,
        user_id=user_id,
        app_id=app_id,
        session_id=session_id,
        level=level,
        ownership=ownership,
        mem_type=mem_type,
        content=content,
        weight=initial_weight(
            weights, ownership, mem_type, is_important=is_important, time_bound=expire_at is not None
        ),
        weight_at=now,
        created_at=now,
        updated_at=now,
        valid_at=valid_at or now,
        content_hash=content_hash,
        embedding_model=embedding_model,
        is_important=is_important,
        expire_at=expire_at,
        source_session_id=session_id,
        source_msg_id=source_msg_id,
        custom_tags=tuple(dict.fromkeys(custom_tags or [])),
        entities=tuple(dict.fromkeys(entities or [])),
        vector_ref=memory_id,
        source_type=source_type,
        context=context,
    )
