"""Engram's MCP tools driven by the SDK's own client: over streamable HTTP against the live Serve
app, and over stdio against ``engram mcp`` (#14)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from engram.serve.mcp_tools import TOOL_NAMES
from tests.e2e.conftest import RunningApp, redeployed_with_keys

pytestmark = pytest.mark.e2e

ADMIN = "e2e-mcp-admin-0123456789abcdef"
SHOP = "e2e-mcp-shop-0123456789abcdef"
OTHER = "e2e-mcp-other-0123456789abcdef"
KEYS = [
    {"name": "ops", "key": ADMIN, "admin": True},
    {"name": "shop", "key": SHOP, "app_ids": ["shop"], "global_scope": True},
    {"name": "other", "key": OTHER, "app_ids": ["other"]},
]


@asynccontextmanager
async def http_client(url: str, key: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    assert result.structured_content is not None
    return result.structured_content


async def refusal(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool error (fails the test if the tool succeeded)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    return str(result.content[0].text)  # type: ignore[union-attr]


async def wait_done(client: Client, task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        task = await call(client, "get_task", task_id=task_id)
        if task["status"] in ("DONE", "FAILED"):
            return task
        assert time.monotonic() < deadline, f"task still {task['status']}"
        await asyncio.sleep(0.2)


async def remember_search_change_forget(client: Client, user_id: str) -> None:
    """The acceptance flow: list, add, wait, search, update, history, delete."""
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools == set(TOOL_NAMES)
    added = await call(client, "add_memory", user_id=user_id, text="My favourite tea is genmaicha.")
    assert (await wait_done(client, added["task_id"]))["status"] == "DONE"
    found = await call(client, "search_memories", user_id=user_id, query="which tea do I like?")
    assert found["hit"] is True
    hit = next(m for m in found["memories"] if "genmaicha" in m["content"])
    assert {"memory_id", "score", "relevance", "valid_at"} <= set(hit)
    memory_id = hit["memory_id"]
    updated = await call(
        client, "update_memory", user_id=user_id, memory_id=memory_id, content="My favourite tea is sencha."
    )
    assert updated["content"] == "My favourite tea is sencha."
    assert (await call(client, "get_memory", user_id=user_id, memory_id=memory_id))["content"].endswith(
        "sencha."
    )
    history = await call(client, "memory_history", user_id=user_id, memory_id=memory_id)
    assert [c["op_type"] for c in history["changes"]][-1] == "UPDATE"
    assert (await call(client, "delete_memory", user_id=user_id, memory_id=memory_id))["deleted"] == [
        memory_id
    ]
    after = await call(client, "search_memories", user_id=user_id, query="which tea do I like?")
    assert memory_id not in {m["memory_id"] for m in after["memories"]}


def test_the_tools_over_streamable_http(engram_app: RunningApp) -> None:
    async def scenario() -> None:
        async with http_client(engram_app.url) as client:
            await remember_search_change_forget(client, "mcp-http-user")
            text = await refusal(client, "get_memory", user_id="mcp-http-user", memory_id="0" * 32)
            assert text.split(": ", 1)[-1].startswith("40401")

    asyncio.run(scenario())


def test_the_tools_over_stdio_against_engram_mcp(engram_app: RunningApp) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram.serve.cli", "mcp", "--url", engram_app.url, "--user-id", "mcp-stdio-user"],
        env=dict(os.environ),
    )

    async def scenario() -> None:
        async with Client(params) as client:
            await remember_search_change_forget(client, "mcp-stdio-user")
            # The user bound on the command line stands in for a missing user_id.
            found = await call(client, "search_memories", query="tea")
            assert found["hit"] in (True, False)

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def secured(engram_app: RunningApp) -> Iterator[RunningApp]:
    with redeployed_with_keys(engram_app, KEYS) as app:
        yield app


def test_keys_tenancy_and_switches_hold_for_the_tools(secured: RunningApp) -> None:
    shop_user = {"user_id": "mcp-shop-user", "app_id": "shop"}

    async def scenario() -> None:
        # Without a key not even initialize or tools/list is answered (#27).
        async with httpx.AsyncClient(base_url=secured.url, timeout=60) as anonymous:
            for method in ("initialize", "tools/list"):
                answer = await anonymous.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {}},
                    headers={"Accept": "application/json, text/event-stream"},
                )
                assert (answer.status_code, answer.json()["code"]) == (401, 40101), method
        async with http_client(secured.url, SHOP) as shop:
            added = await call(shop, "add_memory", **shop_user, text="I collect blue teapots.")
            assert (await wait_done(shop, added["task_id"]))["status"] == "DONE"
            found = await call(shop, "search_memories", **shop_user, query="teapots")
            assert found["hit"] is True
        async with http_client(secured.url, OTHER) as other:
            text = await refusal(other, "search_memories", **shop_user, query="teapots")
            assert "40303" in text
        async with httpx.AsyncClient(base_url=secured.url, timeout=60) as admin:
            switched = await admin.post(
                "/memory/v1/user/switch",
                json={"user_id": "mcp-shop-user", "enabled": False},
                headers={"Authorization": f"Bearer {ADMIN}"},
            )
        assert switched.json()["code"] == 0
        async with http_client(secured.url, SHOP) as shop:
            assert "40301" in await refusal(shop, "add_memory", **shop_user, text="More teapots.")
            assert "40301" in await refusal(shop, "search_memories", **shop_user, query="teapots")

    asyncio.run(scenario())
