"""42903 through the HTTP app: a user over their rate is refused before any work; others are not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.settings import Settings
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.rate_limit import RateLimitedBackend, RateLimiter
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.integration
V1 = "/memory/v1"


@pytest.fixture
async def limited(service: MemoryService, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings.limits.user_rate_per_s = 0.001  # effectively no refill during the test
    settings.limits.user_burst = 3
    write_path = WritePath(service)
    backend = RateLimitedBackend(LocalBackend(service, write_path), RateLimiter(settings.limits))
    app = build_http_app(lambda: backend, auth=lambda: AUTH_OFF)  # type: ignore[arg-type, return-value]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client
    await write_path.close()


async def test_requests_over_the_burst_get_42903_with_status_429(limited: httpx.AsyncClient) -> None:
    body = {
        "user_id": "busy",
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": "Likes tea",
        "sync": True,
    }
    answers = [await limited.post(f"{V1}/add_structured", json=body) for _ in range(3)]
    assert [a.json()["code"] for a in answers] == [0, 0, 0]
    refused = await limited.post(f"{V1}/recall", json={"user_id": "busy", "query": "tea"})
    assert (refused.status_code, refused.json()["code"]) == (429, 42903)
    assert "busy" not in refused.json()["msg"]
    other = await limited.post(f"{V1}/recall", json={"user_id": "calm", "query": "tea"})
    assert other.json()["code"] in (0, 20001)
    listed = await limited.post(f"{V1}/change_log", json={"user_id": "busy"})
    assert listed.json()["code"] == 42903, "every route keyed by user_id is limited"
