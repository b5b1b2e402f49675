"""Memory as an agent's tools (#29): search, remember, update and forget, bound to one user (and
app) and to the caller's key, over the async HTTP client. The framework adapters
(``integrations.pydantic_ai``, ``integrations.openai_agents``) only wrap these four.

What a tool returns is what the model reads: short JSON-friendly values, each memory with its id so
that the model can update or forget it. A refusal (bad input, a switch off, no quota) comes back as
``EngramApiError``, which the frameworks hand the model as the tool's error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

from engram.models.api import AddStructuredRequest, DeleteRequest, RecallRequest, RecallScope, UpdateRequest
from engram.models.enums import Level, MemType, Ownership
from engram.serve.client import AsyncEngramClient

SEARCH_HELP = "Search the user's long-term memory for facts relevant to a question."
REMEMBER_HELP = "Store one fact about the user in long-term memory, stated in one sentence."
UPDATE_HELP = "Replace the content of one remembered fact (by its memory_id) with a corrected sentence."
FORGET_HELP = "Forget one remembered fact by its memory_id (it leaves recall at once)."


class FoundMemory(TypedDict):
    """One memory as a search tool returns it."""

    memory_id: str
    content: str
    relevance: float


class MemoryTools:
    """The four memory tools of one user, over ``client`` (which carries the caller's key)."""

    def __init__(
        self, client: AsyncEngramClient, user_id: str, *, app_id: str | None = None, top_k: int = 5
    ) -> None:
        self.client = client
        self.user_id = user_id
        self.app_id = app_id
        self.top_k = top_k

    async def search(self, query: str) -> list[FoundMemory]:
        """The memories most relevant to ``query``, best first."""
        answer = await self.client.recall(
            RecallRequest(
                user_id=self.user_id, query=query, scope=RecallScope(app_id=self.app_id), top_k=self.top_k
            )
        )
        return [
            FoundMemory(memory_id=m.memory_id, content=m.content, relevance=round(m.relevance, 3))
            for m in answer.memories
        ]

    async def remember(self, fact: str) -> str:
        """Store ``fact`` now (screened and redacted like every write); the new memory's id."""
        created = await self.client.add_structured(
            AddStructuredRequest(
                user_id=self.user_id,
                app_id=self.app_id,
                level=Level.APP if self.app_id else Level.GLOBAL,
                ownership=Ownership.USER,
                mem_type=MemType.SEMANTIC,
                content=fact,
                sync=True,
            )
        )
        return str(getattr(created, "memory_id", ""))

    async def update(self, memory_id: str, content: str) -> str:
        """Replace a memory's content; its status afterwards (ACTIVE, or QUARANTINED if held)."""
        view = await self.client.update(
            UpdateRequest(user_id=self.user_id, memory_id=memory_id, content=content)
        )
        return view.status.value

    async def forget(self, memory_id: str) -> str:
        """Delete one memory; "forgotten"."""
        await self.client.delete(DeleteRequest(user_id=self.user_id, memory_id=memory_id))
        return "forgotten"


ToolFunction = Callable[..., Awaitable[Any]]


def tool_functions(tools: MemoryTools) -> list[tuple[ToolFunction, str]]:
    """The four tools as plain async functions with the names, parameters and descriptions a
    framework turns into its tool schema: search_memory, remember, update_memory, forget_memory."""

    async def search_memory(query: str) -> list[FoundMemory]:
        return await tools.search(query)

    async def remember(fact: str) -> str:
        return await tools.remember(fact)

    async def update_memory(memory_id: str, content: str) -> str:
        return await tools.update(memory_id, content)

    async def forget_memory(memory_id: str) -> str:
        return await tools.forget(memory_id)

    return [
        (search_memory, SEARCH_HELP),
        (remember, REMEMBER_HELP),
        (update_memory, UPDATE_HELP),
        (forget_memory, FORGET_HELP),
    ]
