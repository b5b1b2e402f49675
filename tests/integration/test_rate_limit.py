"""42903 through the HTTP app: a user, or a key, over its rate is refused before any work; others are not."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.settings import Settings
from engram.serve.auth import Authenticator
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from engram.serve.rate_limit import RateLimitedBackend, RateLimiter
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.integration
V1 = "/memory/v1"


@pytest.fixture
async def limited(service: MemoryService, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings.limits.user_rate_per_s = 0.001  # effectively no refill during the test
    settings.limits.user_burst = 3
    write_path = WritePath(service)
    backend = RateLimitedBackend(LocalBackend(wire_core(service, write_path)), RateLimiter(settings.limits))
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


KA = "app-a-key-0123456789abcdef"
KB = "app-b-key-0123456789abcdef"


@pytest.fixture
async def keyed(service: MemoryService, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP app with two tenants' keys (B's given by its hash) and low limits."""
    settings.auth = settings.auth.model_validate(
        {
            "api_keys": [
                {"name": "tenant-a", "key": KA, "app_ids": ["shop"], "global_scope": True},
                {
                    "name": "tenant-b",
                    "key_sha256": hashlib.sha256(KB.encode()).hexdigest(),
                    "app_ids": ["clinic"],
                },
            ]
        }
    )
    settings.limits.user_rate_per_s = 0.001  # effectively no refill during the test
    settings.limits.user_burst = 3
    settings.limits.key_rate_per_s = 0.001
    settings.limits.key_burst = 6
    write_path = WritePath(service)
    backend = RateLimitedBackend(LocalBackend(wire_core(service, write_path)), RateLimiter(settings.limits))
    auth = Authenticator(settings.auth, settings.limits)
    app = build_http_app(lambda: backend, auth=lambda: auth)  # type: ignore[arg-type, return-value]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://engram") as client:
        yield client
    await write_path.close()


async def recall_code(client: httpx.AsyncClient, key: str, user: str, app_id: str) -> int:
    body = {"user_id": user, "query": "tea", "scope": {"app_id": app_id, "include_global": False}}
    response = await client.post(f"{V1}/recall", json=body, headers={"Authorization": f"Bearer {key}"})
    return int(response.json()["code"])


async def test_one_apps_flood_leaves_another_apps_key_unthrottled_for_the_same_user(
    keyed: httpx.AsyncClient,
) -> None:
    flood = [await recall_code(keyed, KA, "shared", "shop") for _ in range(5)]
    assert [c == 42903 for c in flood] == [False, False, False, True, True]
    assert all(c in (0, 20001) for c in flood[:3])
    assert await recall_code(keyed, KB, "shared", "clinic") in (0, 20001), "tenant B is not throttled"


async def test_a_keys_total_spans_its_users_and_no_other_key(keyed: httpx.AsyncClient) -> None:
    codes = [await recall_code(keyed, KA, f"user-{i}", "shop") for i in range(7)]
    assert [c == 42903 for c in codes] == [False] * 6 + [True]
    task = await keyed.post(f"{V1}/task", json={"task_id": "0" * 32}, headers={"X-API-Key": KA})
    assert task.json()["code"] == 42903, "a request that names no user counts against its key too"
    assert all([await recall_code(keyed, KB, f"user-{i}", "clinic") in (0, 20001) for i in range(3)])
