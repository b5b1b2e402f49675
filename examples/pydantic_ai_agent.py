"""A pydantic-ai agent with Engram's memory tools: ``python examples/pydantic_ai_agent.py [URL]``.

The model here is scripted (pydantic-ai's ``FunctionModel``), so the example runs offline and in CI;
give ``Agent`` a real model instead ("openai:gpt-4.1", ...) and the tools stay the same.
Needs ``pip install 'engram[integrations]'``.
"""

from __future__ import annotations

import asyncio
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from engram import AsyncEngramClient
from engram.integrations.memory_tools import MemoryTools
from engram.integrations.pydantic_ai import memory_toolset

INSTRUCTIONS = "Store what the user tells you about themselves; search memory before answering."


async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for an LLM: "Remember: ..." calls remember, any other prompt calls search_memory,
    and a tool's result becomes the answer."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        if isinstance(part, ToolReturnPart):
            if part.tool_name == "remember":
                return ModelResponse(parts=[TextPart("Noted.")])
            found = [m["content"] for m in part.content] if isinstance(part.content, list) else []
            return ModelResponse(
                parts=[TextPart("From memory: " + "; ".join(found) if found else "I don't know.")]
            )
    prompt = str(last.parts[-1].content)
    if prompt.startswith("Remember:"):
        return ModelResponse(
            parts=[ToolCallPart("remember", {"fact": prompt.removeprefix("Remember:").strip()})]
        )
    return ModelResponse(parts=[ToolCallPart("search_memory", {"query": prompt})])


async def run(client: AsyncEngramClient, user_id: str = "pydantic-ai-user") -> str:
    """Tell the agent a fact, then ask about it; the agent's answer."""
    agent = Agent(
        FunctionModel(scripted),
        instructions=INSTRUCTIONS,
        toolsets=[memory_toolset(MemoryTools(client, user_id))],
    )
    await agent.run("Remember: I prefer taking a taxi to work.")
    answer = await agent.run("How do I get to work?")
    return answer.output


def main(url: str = "http://127.0.0.1:8000", api_key: str | None = None) -> str:
    """``run`` against the Engram at ``url``."""

    async def go() -> str:
        client = AsyncEngramClient(url, api_key=api_key, timeout_s=60)
        try:
            return await run(client)
        finally:
            await client.aclose()

    return asyncio.run(go())


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
