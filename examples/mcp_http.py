"""An MCP client over streamable HTTP: ``python examples/mcp_http.py [URL] [API_KEY]``.

What an agent framework does with Engram's ``/mcp`` endpoint: list the tools, remember, search.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def run(url: str, api_key: str | None = None) -> dict[str, Any]:
    """Remember a fact for a user, wait until it is stored, search for it; returns the search."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        print("tools:", [tool.name for tool in (await client.list_tools()).tools])
        added = await client.call_tool("add_memory", {"user_id": "mcp-example", "text": "I live in Porto."})
        task_id = (added.structured_content or {})["task_id"]
        while True:
            task = (await client.call_tool("get_task", {"task_id": task_id})).structured_content or {}
            if task["status"] in ("DONE", "FAILED"):
                break
            await asyncio.sleep(0.2)
        found = await client.call_tool(
            "search_memories", {"user_id": "mcp-example", "query": "where do I live?"}
        )
        return found.structured_content or {}


def main(url: str = "http://127.0.0.1:8000", api_key: str | None = None) -> dict[str, Any]:
    """Run the example; returns the search result."""
    return asyncio.run(run(url, api_key))


if __name__ == "__main__":
    print(main(*sys.argv[1:3]))
