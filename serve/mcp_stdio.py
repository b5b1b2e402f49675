"""``engram mcp``: Engram's MCP tools over stdio, for desktop and IDE agents (#14).

The tools call a running Engram over HTTP (``--url``) with the API key from ``ENGRAM_API_KEY``
(secrets come from the environment, never from the command line); ``--user-id`` names the user a
personal agent remembers for, so its tool calls may omit it. Nothing but protocol messages goes to
stdout.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from engram.serve.client import AsyncEngramClient
from engram.serve.mcp_tools import Credentials, build_mcp_server

API_KEY_ENV = "ENGRAM_API_KEY"


def serve_stdio(url: str, user_id: str | None = None, timeout_s: float = 60.0) -> None:
    """Serve the MCP tools on stdin/stdout until the client closes them."""
    api_key = os.environ.get(API_KEY_ENV) or None

    @asynccontextmanager
    async def clients(_credentials: Credentials) -> AsyncIterator[AsyncEngramClient]:
        client = AsyncEngramClient(url, api_key=api_key, timeout_s=timeout_s)
        try:
            yield client
        finally:
            await client.aclose()

    build_mcp_server(clients, lambda _credentials: user_id).run("stdio")
