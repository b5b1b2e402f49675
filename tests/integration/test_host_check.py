"""DNS rebinding (SPEC P7, issue #27): with auth off, every route of the real HTTP app, over real
stores, answers only requests addressed to a loopback name, from no foreign page; with keys on,
the key is the guard and any name goes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Route

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.settings import AuthSettings, Settings
from engram.serve.auth import Authenticator
from engram.serve.http_app import RECALL_PATH, build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.mcp_routes import MCP_PATH
from engram.serve.memory_core import wire_core
from engram.serve.operations import OPERATIONS
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.integration

ADMIN = "admin-key-0123456789abcdef"
REBOUND_HOSTS = [
    "evil.example",
    "evil.example:8000",
    "127.0.0.1.nip.io:8000",
    "192.168.1.20:8000",
    "[::2]:8000",
]
FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example:8000",
    "null",
    "http://127.0.0.1.evil.example",
]
LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000"]
LOOPBACK_ORIGINS = [None, "http://127.0.0.1:8000", "http://localhost:3000", "https://[::1]"]
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str


def endpoints(app: FastAPI) -> list[Endpoint]:
    """Every route the app answers (the API, export download, /mcp, /ui, /healthz), one method each."""
    found = []
    for route in app.routes:
        if isinstance(route, APIRoute | Route):
            methods = route.methods or {"POST"}  # the MCP endpoint takes every method
            method = "POST" if "POST" in methods else sorted(methods - {"HEAD"})[0]
            path = route.path.replace("{name}", "console.js")
            found.append(Endpoint(method, path))
    return found


@pytest.fixture
async def write_path(service: MemoryService) -> AsyncIterator[WritePath]:
    path = WritePath(service)
    yield path
    await path.close()


def app_over(
    write_path: WritePath, settings: Settings, auth: Authenticator, recall_only: bool = False
) -> FastAPI:
    backend = LocalBackend(wire_core(write_path.service, write_path))
    return build_http_app(
        lambda: backend,
        auth=lambda: auth,
        max_body_bytes=settings.limits.max_request_bytes,
        recall_only=recall_only,
        mcp=not recall_only,
    )


async def send(
    app: FastAPI,
    endpoint: Endpoint,
    host: str,
    origin: str | None = None,
    key: str | None = None,
    root_path: str = "",
) -> httpx.Response:
    headers = {"Host": host, **MCP_HEADERS}
    if origin is not None:
        headers["Origin"] = origin
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = MCP_INIT if endpoint.path == MCP_PATH else {"user_id": "u1", "query": "coffee"}
    transport = httpx.ASGITransport(app=app, root_path=root_path)  # Serve mounts the recall app so
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        if endpoint.method == "POST":
            return await http.post(endpoint.path, json=body, headers=headers)
        return await http.request(endpoint.method, endpoint.path, headers=headers)


def refused(response: httpx.Response) -> bool:
    """A 40303 in the envelope (and its HTTP status)."""
    if response.status_code != 403:
        return False
    payload = response.json()
    return set(payload) == {"code", "msg", "trace_id", "data"} and payload["code"] == 40303


async def test_with_auth_off_every_route_refuses_rebound_hosts_and_foreign_origins(
    write_path: WritePath, settings: Settings
) -> None:
    app = app_over(write_path, settings, AUTH_OFF)
    routes = endpoints(app)
    paths = {e.path for e in routes}
    # The surface under test: the API, the export download, MCP, the console and the health check.
    assert {MCP_PATH, "/healthz", "/ui", "/memory/v1/recall", "/memory/v1/user/export/download"} <= paths
    assert {op.url_path for op in OPERATIONS} <= paths
    async with app.router.lifespan_context(app):
        for endpoint in routes:
            for host in REBOUND_HOSTS:
                response = await send(app, endpoint, host)
                assert refused(response), (endpoint, host, response.status_code, response.text[:200])
            for origin in FOREIGN_ORIGINS:
                response = await send(app, endpoint, "127.0.0.1:8000", origin)
                assert refused(response), (endpoint, origin, response.status_code, response.text[:200])
            # A loopback name from a loopback page reaches the route (whatever the route then says).
            response = await send(app, endpoint, "localhost:8000", "http://localhost:8000")
            assert response.status_code != 403, (endpoint, response.text[:200])


async def test_with_auth_off_loopback_names_are_served(write_path: WritePath, settings: Settings) -> None:
    app = app_over(write_path, settings, AUTH_OFF)
    recall, health, mcp = (
        Endpoint("POST", "/memory/v1/recall"),
        Endpoint("GET", "/healthz"),
        Endpoint("POST", MCP_PATH),
    )
    async with app.router.lifespan_context(app):
        for host in LOOPBACK_HOSTS:
            for origin in LOOPBACK_ORIGINS:
                answer = await send(app, recall, host, origin)
                assert answer.status_code == 200 and answer.json()["code"] in (0, 20001), (
                    host,
                    origin,
                    answer.text,
                )
                assert (await send(app, health, host, origin)).json() == {"status": "ok"}
                initialized = await send(app, mcp, host, origin)
                assert initialized.status_code == 200, (host, origin, initialized.text[:300])
                assert initialized.json()["result"]["serverInfo"], initialized.text[:300]


async def test_the_recall_app_checks_host_too(write_path: WritePath, settings: Settings) -> None:
    app = app_over(write_path, settings, AUTH_OFF, recall_only=True)
    recall, mounted = Endpoint("POST", RECALL_PATH), {"root_path": RECALL_PATH}
    for host in REBOUND_HOSTS:
        assert refused(await send(app, recall, host, **mounted))
    assert refused(await send(app, recall, "127.0.0.1", "http://evil.example", **mounted))
    answer = await send(app, recall, "127.0.0.1:8000", "http://127.0.0.1:8000", **mounted)
    assert answer.status_code == 200 and answer.json()["code"] in (0, 20001), answer.text


async def test_a_request_with_two_host_headers_or_none_is_refused(
    write_path: WritePath, settings: Settings
) -> None:
    app = app_over(write_path, settings, AUTH_OFF)
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def collect(message: dict[str, object]) -> None:
        sent.append(message)

    for headers in ([(b"host", b"127.0.0.1"), (b"host", b"evil.example")], []):
        sent.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/healthz",
            "raw_path": b"/healthz",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
        }
        await app(scope, receive, collect)  # type: ignore[arg-type]
        assert sent[0]["status"] == 403, headers


async def test_with_keys_configured_the_key_is_the_guard_and_any_host_goes(
    write_path: WritePath, settings: Settings
) -> None:
    keyed = Authenticator(
        AuthSettings.model_validate({"api_keys": [{"name": "ops", "key": ADMIN, "admin": True}]})
    )
    app = app_over(write_path, settings, keyed)
    recall = Endpoint("POST", "/memory/v1/recall")
    async with app.router.lifespan_context(app):
        for host in REBOUND_HOSTS:
            answer = await send(app, recall, host, "https://console.example", key=ADMIN)
            assert answer.status_code == 200 and answer.json()["code"] in (0, 20001), (host, answer.text)
            # Without the key: unauthenticated, never served.
            assert (await send(app, recall, host)).json()["code"] == 40101
