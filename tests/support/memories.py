"""Memory rows for tests that need a ``models.domain.Memory`` without going through a write path."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership


def build_memory(at: datetime, **fields: Any) -> Memory:
    """An ACTIVE global USER/SEMANTIC memory of user "u" stamped ``at``; ``fields`` override any field."""
    base = Memory(
        memory_id="0" * 32,
        user_id="u",
        app_id="",
        level=Level.GLOBAL,
        ownership=Ownership.USER,
        mem_type=MemType.SEMANTIC,
        content="Likes tea",
        weight=0.8,
        weight_at=at,
        created_at=at,
        updated_at=at,
        valid_at=at,
        content_hash="h",
        embedding_model="m",
    )
    return replace(base, **fields)
