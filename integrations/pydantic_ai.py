"""Engram's memory tools as a pydantic-ai toolset: ``Agent(model, toolsets=[memory_toolset(tools)])``."""

from __future__ import annotations

from pydantic_ai import Tool
from pydantic_ai.toolsets import FunctionToolset

from engram.integrations.memory_tools import MemoryTools, tool_functions


def memory_toolset(tools: MemoryTools) -> FunctionToolset[None]:
    """search_memory, remember, update_memory and forget_memory for one user, as pydantic-ai tools."""
    return FunctionToolset([Tool(f, takes_ctx=False, description=d) for f, d in tool_functions(tools)])
