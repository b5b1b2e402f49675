"""An MCP client that starts ``engram mcp`` over stdio, as a desktop agent does:
``python examples/mcp_stdio.py [URL]`` (the API key, if any, in ``ENGRAM_API_KEY``)."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from mcp import Client, StdioServerParameters


async def run(url: str) -> dict[str, Any]:
    """Start ``engram mcp`` for one user and search that user's memories through it."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram.serve.cli", "mcp", "--url", url, "--user-id", "stdio-example"],
        env=dict(os.environ),  # the child gets only a few variables unless told
    )
    async with Client(server) as client:
        print("tools:", [tool.name for tool in (await client.list_tools()).tools])
        found = await client.call_tool("search_memories", {"query": "what do I like?"})
        return found.structured_content or {}


def main(url: str = "http://127.0.0.1:8000") -> dict[str, Any]:
    """Run the example; returns the search result."""
    return asyncio.run(run(url))


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
