"""The HTTP contract (C1-C9) through the real FastAPI app over real stores, in one process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.models.api import AddStructuredRequest, RecallRequest
from engram.models.settings import Settings
from engram.serve.client import AsyncEngramClient, EngramApiError
from engram.serve.envelope import TRACE_HEADER
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.integration
V1 = "/memory/v1"


@pytest.fixture
async def write_path(service: MemoryService) -> AsyncIterator[WritePath]:
    path = WritePath(service)
    yield path
    await path.close()


@pytest.fixture
async def http(write_path: WritePath, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    backend = LocalBackend(wire_core(write_path.service, write_path))
    app = build_http_app(
        lambda: backend, auth=lambda: AUTH_OFF, max_body_bytes=settings.limits.max_request_bytes
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def post(http: httpx.AsyncClient, route: str, body: Any) -> tuple[int, dict[str, Any]]:
    response = await http.post(f"{V1}/{route}", json=body)
    payload = response.json()
    assert set(payload) == {"code", "msg", "trace_id", "data"}
    assert response.headers[TRACE_HEADER] == payload["trace_id"]
    return response.status_code, payload


def structured(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "user_id": "u1",
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": content,
        "sync": True,
        **fields,
    }


async def test_add_then_task_done_then_recall(http: httpx.AsyncClient, write_path: WritePath) -> None:
    status, accepted = await post(
        http, "add", {"user_id": "u1", "messages": [{"role": "user", "content": "I live in Lisbon."}]}
    )
    assert (status, accepted["code"], accepted["data"]["accepted"]) == (200, 0, True)
    await write_path.drain()
    _, task = await post(http, "task", {"task_id": accepted["data"]["task_id"]})
    assert task["data"]["status"] == "DONE"
    assert [d["op"] for d in task["data"]["decisions"]] == ["ADD"]
    _, recalled = await post(http, "recall", {"user_id": "u1", "query": "where do I live"})
    assert recalled["code"] == 0 and "Lisbon" in recalled["data"]["memories"][0]["content"]


async def test_structured_update_delete_are_seen_at_once(http: httpx.AsyncClient) -> None:
    _, created = await post(http, "add_structured", structured("Prefers window seats on flights"))
    memory_id = created["data"]["memory_id"]
    _, updated = await post(
        http, "update", {"user_id": "u1", "memory_id": memory_id, "content": "Prefers aisle seats on flights"}
    )
    assert updated["data"]["content"] == "Prefers aisle seats on flights"
    _, recalled = await post(http, "recall", {"user_id": "u1", "query": "aisle seat"})
    assert recalled["data"]["memories"][0]["memory_id"] == memory_id
    _, deleted = await post(http, "delete", {"user_id": "u1", "memory_id": memory_id})
    assert deleted["data"]["deleted"] == [memory_id]
    status, empty = await post(http, "recall", {"user_id": "u1", "query": "aisle seat"})
    assert (status, empty["code"], empty["data"]["hit"]) == (200, 20001, False)
    _, history = await post(http, "history", {"user_id": "u1", "memory_id": memory_id})
    assert [c["op_type"] for c in history["data"]["changes"]] == ["ADD", "UPDATE", "DELETE"]
    _, log = await post(http, "change_log", {"user_id": "u1", "limit": 2})
    assert [c["op_type"] for c in log["data"]["changes"]] == ["DELETE", "UPDATE"]


@pytest.mark.parametrize(
    ("route", "body", "code", "status"),
    [
        ("recall", {"user_id": "bad id!", "query": "q"}, 40001, 400),
        ("recall", {"user_id": "u1"}, 40001, 400),
        ("add", {"user_id": "u1", "messages": [{"role": "user", "content": "x"}] * 201}, 40001, 400),
        ("recall", {"user_id": "u1", "query": "q", "scope": {"cross_app": {"enabled": True}}}, 40302, 403),
        ("delete", {"user_id": "u1", "memory_id": "0" * 32}, 40401, 404),
        ("task", {"task_id": "0" * 32}, 40401, 404),
    ],
)
async def test_error_codes_and_statuses(
    http: httpx.AsyncClient, route: str, body: Any, code: int, status: int
) -> None:
    got_status, payload = await post(http, route, body)
    assert (got_status, payload["code"]) == (status, code)
    assert payload["data"] is None


async def test_starlette_refusals_answer_in_the_envelope_too(http: httpx.AsyncClient) -> None:
    # Found by the contract fuzzer: a body that is not JSON got FastAPI's {"detail": ...}.
    response = await http.post(
        f"{V1}/add", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["code"] == 40001 and response.json()["trace_id"]
    response = await http.post(f"{V1}/no-such-route", json={})
    assert (response.status_code, response.json()["code"]) == (404, 40401)
    response = await http.get(f"{V1}/add")
    assert (response.status_code, response.json()["code"]) == (400, 40001)  # the status follows the code


async def test_validation_messages_name_fields_not_values(http: httpx.AsyncClient) -> None:
    _, payload = await post(http, "recall", {"user_id": "secret value!", "query": "q"})
    assert "user_id" in payload["msg"] and "secret value" not in payload["msg"]


async def test_oversized_body_is_refused(http: httpx.AsyncClient) -> None:
    big = structured("x" * 10, custom_tags=["t" * 60] * 10, padding="y" * (1024 * 1024))
    response = await http.post(f"{V1}/add_structured", json=big)
    assert (response.status_code, response.json()["code"]) == (400, 40001)
    assert "exceeds" in response.json()["msg"]


async def test_capacity_and_important_limits(http: httpx.AsyncClient, settings: Settings) -> None:
    settings.capacity.app_limit = 2
    settings.capacity.important_ratio = 1.0
    for i in range(2):
        _, ok = await post(http, "add_structured", structured(f"Key fact {i}", app_id="a", is_important=True))
        assert ok["code"] == 0
    status, full = await post(http, "add_structured", structured("One too many", app_id="a"))
    assert (status, full["code"]) == (429, 42901)
    settings.capacity.important_ratio = 0.2
    settings.capacity.app_limit = 10  # room again, but 20% of 10 = 2 important marks, both taken
    status, marked = await post(
        http, "add_structured", structured("Another key fact", app_id="a", is_important=True)
    )
    assert (status, marked["code"]) == (429, 42902)


async def test_trace_id_is_echoed_when_well_formed(http: httpx.AsyncClient) -> None:
    response = await http.post(
        f"{V1}/recall", json={"user_id": "u1", "query": "q"}, headers={TRACE_HEADER: "abc-123"}
    )
    assert response.json()["trace_id"] == "abc-123"
    response = await http.post(
        f"{V1}/recall", json={"user_id": "u1", "query": "q"}, headers={TRACE_HEADER: "bad id!"}
    )
    assert response.json()["trace_id"] != "bad id!"


async def test_concurrent_writes_for_one_user_keep_exact_counters(
    http: httpx.AsyncClient, settings: Settings, service: MemoryService
) -> None:
    settings.capacity.global_limit = 20
    results = await asyncio.gather(
        *(post(http, "add_structured", structured(f"Visited museum number {i}")) for i in range(200))
    )
    assert {payload["code"] for _, payload in results} == {0}
    async with service.metadata.transaction() as tx:
        counters = await tx.counters.read("u1")
        active = await tx.memories.count_active("u1")
    assert counters["global"] == sum(active.values()) <= 20
    assert counters["total"] == counters["global"]


async def test_typed_client_speaks_the_same_contract(http: httpx.AsyncClient) -> None:
    client = AsyncEngramClient("http://127.0.0.1", client=http)
    created = await client.add_structured(
        AddStructuredRequest.model_validate(structured("Owns a red bicycle"))
    )
    found = await client.recall(RecallRequest(user_id="u1", query="bicycle"))
    assert found.hit and found.memories[0].memory_id == getattr(created, "memory_id", None)
    none = await client.recall(RecallRequest(user_id="u1", query="quantum chromodynamics lecture"))
    assert none.hit is False
    with pytest.raises(EngramApiError) as err:
        await client.recall(RecallRequest(user_id="u1", query="q", scope={"cross_app": {"enabled": True}}))
    assert err.value.code == 40302
