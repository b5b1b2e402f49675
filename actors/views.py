"""Conversions from domain records to the API's response models."""

from __future__ import annotations

from engram.models.api import ChangeView, MemoryView, RecalledMemory
from engram.models.domain import ChangeLogEntry, Memory
from engram.models.provenance import source_of, trust_of

SHREDDED = ""
"""What callers see in place of content whose data key was destroyed."""


def memory_view(memory: Memory, weight: float | None = None) -> MemoryView:
    """Full metadata view of a memory; ``weight`` overrides the stored one (e.g. decayed to now)."""
    return MemoryView(
        memory_id=memory.memory_id,
        app_id=memory.app_id,
        session_id=memory.session_id,
        level=memory.level,
        ownership=memory.ownership,
        mem_type=memory.mem_type,
        content=memory.content,
        weight=memory.weight if weight is None else weight,
        status=memory.status,
        is_important=memory.is_important,
        recall_count=memory.recall_count,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        last_recalled_at=memory.last_recalled_at,
        expire_at=memory.expire_at,
        valid_at=memory.valid_at,
        invalid_at=memory.invalid_at,
        superseded_by=memory.superseded_by,
        source_session_id=memory.source_session_id,
        source_msg_id=memory.source_msg_id,
        custom_tags=list(memory.custom_tags),
        entities=list(memory.entities),
        embedding_model=memory.embedding_model,
        source_type=(source := source_of(memory.source_type, memory.ownership)),
        trust=trust_of(source),
    )


def recalled_memory(memory: Memory, *, relevance: float, weight: float, score: float) -> RecalledMemory:
    """One recall hit."""
    return RecalledMemory(
        memory_id=memory.memory_id,
        content=memory.content if memory.content is not None else SHREDDED,
        level=memory.level,
        ownership=memory.ownership,
        mem_type=memory.mem_type,
        weight=round(weight, 6),
        relevance=round(relevance, 6),
        score=round(score, 6),
        is_important=memory.is_important,
        valid_at=memory.valid_at,
        invalid_at=memory.invalid_at,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        source_session_id=memory.source_session_id,
        source_msg_id=memory.source_msg_id,
        custom_tags=list(memory.custom_tags),
        entities=list(memory.entities),
        source_type=(source := source_of(memory.source_type, memory.ownership)),
        trust=trust_of(source),
    )


def change_view(entry: ChangeLogEntry) -> ChangeView:
    """One change-log entry."""
    return ChangeView(
        change_id=entry.change_id,
        memory_id=entry.memory_id,
        app_id=entry.app_id,
        op_type=entry.op_type,
        op_source=entry.op_source,
        op_time=entry.op_time,
        reason=entry.reason,
        content_before=entry.content_before,
        content_after=entry.content_after,
        sanitized=entry.sanitized,
    )
