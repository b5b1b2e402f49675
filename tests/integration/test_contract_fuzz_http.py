"""The contract fuzz (``engram.loadtest.fuzz``) against the in-process app over real stores (#27).

The app is the real FastAPI app (switch gate, auth guard, body parse) over SQLite and milvus-lite,
served by uvicorn in the test's event loop; the fuzzer runs in a thread and calls it over HTTP. A
short round: every operation, and the edge round (bodies that are
no JSON object, values past the stores' range), which must all answer 40001.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import pytest
import uvicorn
from fastapi import FastAPI

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.loadtest.fuzz import fuzz
from engram.models.settings import Settings
from engram.serve.auth import Authenticator
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from engram.serve.switch_gate import GatedBackend
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.net import free_port

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "1"))
START_WAIT_S = 30.0


async def served(app: FastAPI) -> AsyncIterator[str]:
    """``app`` on a loopback port in this event loop, until the generator is closed."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + START_WAIT_S
    while not server.started:  # uvicorn sets the flag once its socket listens
        assert not task.done() and time.monotonic() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@pytest.fixture
async def url(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[str]:
    """The app as the ingress builds it (gate, guard with auth off, body limit), served over HTTP."""
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    write_path = WritePath(service)
    local = LocalBackend(wire_core(service, write_path))
    gate = GatedBackend(local, local.switches)
    authenticator = Authenticator(settings.auth)
    app = build_http_app(
        lambda: gate,  # type: ignore[arg-type,return-value]
        max_body_bytes=settings.limits.max_request_bytes,
        auth=lambda: authenticator,
    )
    try:
        async for address in served(app):
            yield address
    finally:
        await write_path.close()
        await service.drain()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_every_answer_documented_and_every_edge_40001(url: str) -> None:
    # No linked sequences here: the e2e round runs them (generating them in this process is slow).
    report = await asyncio.to_thread(fuzz, url, EXAMPLES, 0)
    print(f"\nfuzz: {report.requests} requests ({report.edge_requests} edge), {dict(report.statuses)}")
    assert report.failures == {}
    assert report.undocumented == 0
    assert report.operations >= 17 and len(report.by_operation) == report.operations
    # The edge round ran every operation's bad bodies and spoiled values.
    assert report.edge_requests >= (report.operations - 1) * 11  # every POST operation
