"""Engram's memory tools as a pydantic-ai toolset: ``Agent(model, toolsets=[memory_toolset(tools)])``."""

from __future__ import annotations

from pydantic_ai import Tool
from pydantic_ai.toolsets import FunctionToolset

from engram.integrations.memory_tools import (
    FORGET_HELP,
    REMEMBER_HELP,
    SEARCH_HELP,
    UPDATE_HELP,
    FoundMemory,
    MemoryTools,
)


def memory_toolset(tools: MemoryTools) -> FunctionToolset[None]:
    """search_memory, remember, update_memory and forget_memory for one user, as pydantic-ai tools."""

    async def search_memory(query: str) -> list[FoundMemory]:
        return await tools.search(query)

    async def remember(fact: str) -> str:
        return await tools.remember(fact)

    async def update_memory(memory_id: str, content: str) -> str:
        return await tools.update(memory_id, content)

    async def forget_memory(memory_id: str) -> str:
        return await tools.forget(memory_id)

    return FunctionToolset(
        [
            Tool(search_memory, takes_ctx=False, description=SEARCH_HELP),
            Tool(remember, takes_ctx=False, description=REMEMBER_HELP),
            Tool(update_memory, takes_ctx=False, description=UPDATE_HELP),
            Tool(forget_memory, takes_ctx=False, description=FORGET_HELP),
        ]
    )
