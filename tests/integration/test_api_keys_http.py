"""API keys over the real HTTP app and MCP route, in one process over real stores: keys by hash,
added and revoked at run time, failed keys throttled per client address, nothing logged of a key."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engram.models.settings import Settings
from engram.serve.auth import Authenticator
from engram.serve.http_app import build_http_app
from engram.serve.settings_update import apply_overrides
from engram.serve.switch_gate import GatedBackend
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import V1, PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

SHOP = "shop-key-0123456789abcdef"
CLINIC = "clinic-key-0123456789abcdef"
NEW = "new-key-0123456789abcdefgh"
BURST = 3


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


HASHED = [
    {"name": "shop", "key_sha256": sha(SHOP), "app_ids": ["shop"], "global_scope": True},
    {"name": "clinic", "key_sha256": sha(CLINIC), "app_ids": ["clinic"], "global_scope": True},
]


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    settings.auth = settings.auth.model_validate({"api_keys": HASHED})
    settings.limits.auth_failure_burst = BURST
    settings.limits.auth_failures_per_minute = 0.001  # no refill during a test (unit-tested with a clock)
    async with privacy_app(settings, stores, clock) as running:
        yield running


@asynccontextmanager
async def from_address(app: PrivacyApp, host: str) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app.asgi, client=(host, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://engram") as client:
        yield client


async def code(client: httpx.AsyncClient, key: str | None, **headers: str) -> int:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = {"user_id": "u", "query": "tea", "scope": {"app_id": "shop"}}
    response = await client.post(f"{V1}/recall", json=body, headers=headers)
    payload = response.json()
    assert response.status_code == (200 if payload["code"] in (0, 20001) else payload["code"] // 100)
    return 0 if payload["code"] in (0, 20001) else int(payload["code"])


async def test_a_hashed_key_authenticates_and_a_wrong_one_does_not(app: PrivacyApp) -> None:
    async with from_address(app, "10.0.0.1") as client:
        assert await code(client, SHOP) == 0
        assert await code(client, SHOP + "x") == 40101
        assert await code(client, sha(SHOP)) == 40101, "the configured hash is not itself a key"


async def test_failed_keys_from_one_address_get_42903_while_another_address_is_unaffected(
    app: PrivacyApp,
) -> None:
    async with from_address(app, "10.0.0.1") as attacker, from_address(app, "10.0.0.2") as other:
        codes = [await code(attacker, f"guess-{i}-0123456789abcdef") for i in range(BURST + 3)]
        assert codes == [40101] * BURST + [42903] * 3
        assert await code(attacker, None) == 42903
        # A right key new to the flooded address gets the same answer as a guess: no oracle.
        assert await code(attacker, CLINIC) == 42903
        assert await code(other, "guess-0123456789abcdef") == 40101
        assert await code(other, SHOP) == 0
    assert app.embedder.calls == 1, "no refused request reached the embedder"


async def test_a_key_used_from_an_address_keeps_working_through_a_flood_from_it(app: PrivacyApp) -> None:
    async with from_address(app, "192.0.2.7") as shared:  # a NAT: the user and the guesser
        assert await code(shared, SHOP) == 0
        for i in range(BURST + 2):
            await code(shared, f"guess-{i}-0123456789abcdef")
        assert await code(shared, "guess-0123456789abcdef") == 42903
        assert await code(shared, SHOP) == 0
        assert await code(shared, CLINIC) == 42903


async def test_x_forwarded_for_counts_only_from_a_trusted_proxy(app: PrivacyApp) -> None:
    async with from_address(app, "10.0.0.1") as client:
        # Untrusted: a new X-Forwarded-For on every guess still counts against the connection.
        codes = [
            await code(client, f"guess-{i}-0123456789abcdef", **{"X-Forwarded-For": f"198.51.100.{i}"})
            for i in range(BURST + 1)
        ]
        assert codes[-1] == 42903
    app.settings.limits.trusted_proxies = ["127.0.0.9/32"]  # a run-time change, as user_config makes it
    async with from_address(app, "127.0.0.9") as proxy:
        for i in range(BURST):
            await code(proxy, f"guess-{i}-0123456789abcdef", **{"X-Forwarded-For": "203.0.113.1"})
        assert await code(proxy, SHOP, **{"X-Forwarded-For": "203.0.113.1"}) == 42903
        assert await code(proxy, SHOP, **{"X-Forwarded-For": "203.0.113.2"}) == 0
        # A client's own entry left of the proxy's is not where the proxy saw it come from.
        assert await code(proxy, SHOP, **{"X-Forwarded-For": "203.0.113.2, 203.0.113.1"}) == 42903


async def test_keys_added_and_revoked_at_run_time_count_at_once(app: PrivacyApp) -> None:
    async with from_address(app, "10.0.0.3") as client:
        assert await code(client, NEW) == 40101
        added = [*HASHED, {"name": "new", "key_sha256": sha(NEW), "app_ids": ["shop"], "global_scope": True}]
        apply_overrides(app.settings, {"auth": {"api_keys": added}})
        assert await code(client, NEW) == 0
        apply_overrides(app.settings, {"auth": {"api_keys": added[1:]}})  # shop revoked
        assert await code(client, SHOP) == 40101
        assert await code(client, NEW) == 0


async def test_no_key_nor_its_hash_is_logged(app: PrivacyApp, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with from_address(app, "10.0.0.4") as client:
        await code(client, SHOP)
        for i in range(BURST + 1):
            await code(client, f"{SHOP}-guess-{i}")
        bad = {"api_keys": [{"name": "new", "key_sha256": NEW}]}
        with pytest.raises(ValueError, match="64 hex digits"):
            apply_overrides(app.settings, {"auth": bad})
    logged = caplog.text + " ".join(repr(r.args) for r in caplog.records)
    assert "refused" in logged, "the refusals were logged (by key name)"
    for secret in (SHOP, sha(SHOP), NEW, sha(NEW)):
        assert secret not in logged


@asynccontextmanager
async def mcp_app(app: PrivacyApp) -> AsyncIterator[Any]:
    """The same backend and authenticator as ``app``, with the MCP route, its lifespan running."""
    authenticator = Authenticator(app.settings.auth, app.settings.limits)
    gate = GatedBackend(app.local, app.local.switches)
    asgi = build_http_app(lambda: gate, auth=lambda: authenticator, mcp=True)  # type: ignore[arg-type, return-value]
    async with asgi.router.lifespan_context(asgi):
        yield asgi


@asynccontextmanager
async def mcp_client(asgi: Any, key: str, host: str) -> AsyncIterator[Client]:
    transport = httpx2.ASGITransport(app=asgi, client=(host, 40000))
    async with (
        httpx2.AsyncClient(transport=transport, headers={"Authorization": f"Bearer {key}"}) as http,
        Client(streamable_http_client("http://engram/mcp", http_client=http)) as client,
    ):
        yield client


async def mcp_refusal(asgi: Any, key: str, host: str) -> int:
    """The envelope code a bare MCP ``initialize`` gets (every /mcp request needs a valid key)."""
    transport = httpx2.ASGITransport(app=asgi, client=(host, 40000))
    async with httpx2.AsyncClient(transport=transport, headers={"Authorization": f"Bearer {key}"}) as http:
        answer = await http.post(
            "http://127.0.0.1/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"accept": "application/json, text/event-stream"},
        )
    return int(answer.json()["code"])


async def tool_text(client: Client) -> str:
    result = await client.call_tool("search_memories", {"user_id": "u", "app_id": "shop", "query": "tea"})
    return "ok" if not result.is_error else str(result.content[0].text)  # type: ignore[union-attr]


async def test_the_mcp_route_follows_run_time_keys_and_throttles_its_callers_address(
    app: PrivacyApp,
) -> None:
    async with mcp_app(app) as asgi:
        async with mcp_client(asgi, SHOP, "10.0.1.1") as shop:
            assert await tool_text(shop) == "ok"
        added = [*HASHED, {"name": "new", "key_sha256": sha(NEW), "app_ids": ["shop"], "global_scope": True}]
        apply_overrides(app.settings, {"auth": {"api_keys": added}})
        async with mcp_client(asgi, NEW, "10.0.1.2") as new:
            assert await tool_text(new) == "ok"
            apply_overrides(app.settings, {"auth": {"api_keys": added[1:]}})
            assert await tool_text(new) == "ok"
        assert await mcp_refusal(asgi, SHOP, "10.0.1.1") == 40101
        # Failed keys over MCP count against the MCP caller's address, not the app's own.
        codes = [await mcp_refusal(asgi, f"guess-{i}-0123456789abcdef", "10.0.1.3") for i in range(BURST + 1)]
        assert codes[-1] == 42903
        async with mcp_client(asgi, NEW, "10.0.1.4") as elsewhere:
            assert await tool_text(elsewhere) == "ok"
