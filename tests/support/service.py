"""Writing and recalling through a ``MemoryService`` in as few words as the tests need."""

from __future__ import annotations

from typing import Any

from engram.actors.memory_service import MemoryService
from engram.models.api import AddStructuredRequest, MemoryCreated, RecallRequest
from engram.models.enums import MemType, Ownership


async def remember(
    service: MemoryService,
    content: str,
    user_id: str = "u1",
    *,
    ownership: Ownership = Ownership.USER,
    mem_type: MemType = MemType.SEMANTIC,
    **fields: Any,
) -> str:
    """Store ``content`` synchronously (a USER / SEMANTIC memory unless told otherwise); its id."""
    request = AddStructuredRequest(
        user_id=user_id, ownership=ownership, mem_type=mem_type, content=content, sync=True, **fields
    )
    created = await service.add_structured(request)
    assert isinstance(created, MemoryCreated)
    return created.memory_id


async def recall_ids(service: MemoryService, query: str, user_id: str = "u1", **fields: Any) -> list[str]:
    """The ids a recall returns, best first."""
    response = await service.recall(RecallRequest(user_id=user_id, query=query, **fields))
    return [m.memory_id for m in response.memories]
