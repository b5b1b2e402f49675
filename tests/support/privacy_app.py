"""The in-process Engram HTTP app as the privacy tests use it: switch gate, auth, counting engines.

The embedder and the engine are the real ones, wrapped only to count calls: a switched-off user
must cost no model time, and the counters prove it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel

from engram.actors.engines.base import Engine, EngineError, StructuredRequest
from engram.actors.engines.factory import engine_from_settings
from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.settings import Settings
from engram.serve.auth import Authenticator
from engram.serve.client import AsyncEngramClient
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from engram.serve.switch_gate import GatedBackend
from engram.storage.embedders import Embedder
from engram.storage.stores import Stores

V1 = "/memory/v1"


class CountingEmbedder:
    """A real embedder that counts the texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.calls = 0
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return await self._inner.embed(texts)


class CountingEngine:
    """A real extraction engine that counts its requests."""

    def __init__(self, inner: Engine) -> None:
        self._inner = inner
        self.name = inner.name
        self.is_llm = inner.is_llm
        self.requests = 0

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        self.requests += len(requests)
        return await self._inner.generate(requests)

    async def close(self) -> None:
        await self._inner.close()


@dataclass
class PrivacyApp:
    """Everything a privacy test drives or inspects."""

    http: httpx.AsyncClient
    service: MemoryService
    write_path: WritePath
    local: LocalBackend
    gate: GatedBackend
    embedder: CountingEmbedder
    engine: CountingEngine
    settings: Settings
    asgi: Any = None  # the FastAPI app, for clients of other addresses (httpx.ASGITransport(client=...))

    async def post(self, route: str, body: Any, key: str | None = None) -> tuple[int, dict[str, Any]]:
        """POST a route; the HTTP status and the envelope."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        response = await self.http.post(f"{V1}/{route}", json=body, headers=headers)
        return response.status_code, response.json()

    async def ok(self, route: str, body: Any, key: str | None = None) -> Any:
        """POST a route that must succeed (code 0 or 20001); its data."""
        status, payload = await self.post(route, body, key)
        assert payload["code"] in (0, 20001), (route, status, payload["code"], payload["msg"])
        return payload["data"]

    @asynccontextmanager
    async def client(self, key: str) -> AsyncIterator[AsyncEngramClient]:
        """The typed async client of this app carrying ``key``, as an agent's process would hold it."""
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.asgi),
            base_url="http://127.0.0.1",
            headers={"Authorization": f"Bearer {key}"},
        )
        async with http:
            yield AsyncEngramClient("http://127.0.0.1", client=http)


@asynccontextmanager
async def privacy_app(
    settings: Settings,
    stores: Stores,
    clock: Any,
    *,
    mcp: bool = False,
    api_keys: Sequence[dict[str, Any]] | None = None,
) -> AsyncIterator[PrivacyApp]:
    """The real FastAPI app over real stores, gated and guarded as the ingress does it; with ``mcp``
    also the MCP tools at /mcp (the app's lifespan runs their session manager); with ``api_keys``
    the tenants' keys it authenticates (``auth.api_keys``)."""
    if api_keys is not None:
        settings.auth = settings.auth.model_validate({"api_keys": list(api_keys)})
    embedder = CountingEmbedder(stores.embedder)
    engine = CountingEngine(engine_from_settings(settings.engine))
    service = MemoryService(settings, stores.metadata, stores.vectors, embedder, clock=clock, engine=engine)
    write_path = WritePath(service)
    local = LocalBackend(wire_core(service, write_path))
    gate = GatedBackend(local, local.switches)
    authenticator = Authenticator(settings.auth, settings.limits)
    app = build_http_app(
        lambda: gate,  # type: ignore[arg-type,return-value]
        max_body_bytes=settings.limits.max_request_bytes,
        auth=lambda: authenticator,
        mcp=mcp,
    )
    transport = httpx.ASGITransport(app=app)
    async with (
        running_lifespan(app) if mcp else nullcontext(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
    ):
        try:
            yield PrivacyApp(http, service, write_path, local, gate, embedder, engine, settings, app)
        finally:
            await write_path.close()
            await service.drain()


@asynccontextmanager
async def running_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan run in a task of its own: it is entered and left in the same task (anyio's
    rule), while a test's fixture may be set up and torn down in different ones."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()

    task = asyncio.create_task(run())
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiting.cancel()
        task.result()  # the lifespan failed to start: raise why
    try:
        yield
    finally:
        stop.set()
        await task
