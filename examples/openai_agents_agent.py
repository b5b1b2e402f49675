"""An OpenAI Agents SDK agent with Engram's memory tools: ``python examples/openai_agents_agent.py [URL]``.

The model here is scripted (a ``Model`` that answers without an LLM), so the example runs offline
and in CI; drop ``model=`` to use OpenAI's and the tools stay the same. Tracing is off: the SDK would
send traces to OpenAI. Needs ``pip install 'engram[integrations]'``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from engram import AsyncEngramClient
from engram.integrations.memory_tools import MemoryTools
from engram.integrations.openai_agents import memory_function_tools

INSTRUCTIONS = "Store what the user tells you about themselves; search memory before answering."


class ScriptedModel(Model):
    """Stands in for an LLM: "Remember: ..." calls remember, any other prompt calls search_memory,
    and a tool's output becomes the answer."""

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}  # call id -> tool name

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = dict(items[-1])
        if last.get("type") == "function_call_output":
            if self.calls.get(str(last["call_id"])) == "remember":
                return _said("Noted.")
            found = [m["content"] for m in _json(last.get("output"))]
            return _said("From memory: " + "; ".join(found) if found else "I don't know.")
        prompt = str(last.get("content", ""))
        if prompt.startswith("Remember:"):
            return self._call("remember", {"fact": prompt.removeprefix("Remember:").strip()})
        return self._call("search_memory", {"query": prompt})

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")

    def _call(self, name: str, arguments: dict[str, str]) -> ModelResponse:
        call_id = f"call-{len(self.calls)}"
        self.calls[call_id] = name
        call = ResponseFunctionToolCall(
            type="function_call",
            call_id=call_id,
            name=name,
            arguments=json.dumps(arguments),
            status="completed",
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)


def _said(text: str) -> ModelResponse:
    message = ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


def _json(output: object) -> list[dict[str, Any]]:
    """A tool's output as the SDK hands it back (JSON text, or Python's repr of a list)."""
    text = str(output)
    try:
        value = json.loads(text)
    except ValueError:
        import ast

        value = ast.literal_eval(text)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


async def run(client: AsyncEngramClient, user_id: str = "openai-agents-user") -> str:
    """Tell the agent a fact, then ask about it; the agent's answer."""
    agent = Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        model=ScriptedModel(),
        tools=memory_function_tools(MemoryTools(client, user_id)),
    )
    config = RunConfig(tracing_disabled=True)
    await Runner.run(agent, "Remember: I prefer taking a taxi to work.", run_config=config)
    answer = await Runner.run(agent, "How do I get to work?", run_config=config)
    return str(answer.final_output)


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
