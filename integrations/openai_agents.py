"""Engram's memory tools for the OpenAI Agents SDK: ``Agent(..., tools=memory_function_tools(tools))``."""

from __future__ import annotations

from agents import FunctionTool, function_tool

from engram.integrations.memory_tools import (
    FORGET_HELP,
    REMEMBER_HELP,
    SEARCH_HELP,
    UPDATE_HELP,
    FoundMemory,
    MemoryTools,
)


def memory_function_tools(tools: MemoryTools) -> list[FunctionTool]:
    """search_memory, remember, update_memory and forget_memory for one user, as function tools."""

    async def search_memory(query: str) -> list[FoundMemory]:
        return await tools.search(query)

    async def remember(fact: str) -> str:
        return await tools.remember(fact)

    async def update_memory(memory_id: str, content: str) -> str:
        return await tools.update(memory_id, content)

    async def forget_memory(memory_id: str) -> str:
        return await tools.forget(memory_id)

    return [
        function_tool(search_memory, description_override=SEARCH_HELP),
        function_tool(remember, description_override=REMEMBER_HELP),
        function_tool(update_memory, description_override=UPDATE_HELP),
        function_tool(forget_memory, description_override=FORGET_HELP),
    ]
