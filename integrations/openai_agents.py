"""Engram's memory tools for the OpenAI Agents SDK: ``Agent(..., tools=memory_function_tools(tools))``."""

from __future__ import annotations

from agents import FunctionTool, function_tool

from engram.integrations.memory_tools import MemoryTools, tool_functions


def memory_function_tools(tools: MemoryTools) -> list[FunctionTool]:
    """search_memory, remember, update_memory and forget_memory for one user, as function tools."""
    return [function_tool(f, description_override=d) for f, d in tool_functions(tools)]
