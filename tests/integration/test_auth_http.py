"""Authentication and tenancy (P4) through the real HTTP app over real stores, in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from models.settings import Settings
from storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

ADMIN = "admin-key-0123456789abcdef"
TENANT_A = "tenant-a-key-0123456789abcd"
TENANT_B = "tenant-b-key-0123456789abcd"
KEYS = [
    {"name": "ops", "key": ADMIN, "admin": True},
    {"name": "tenant-a", "key": TENANT_A, "app_ids": ["shop"]},
    {"name": "tenant-b", "key": TENANT_B, "app_ids": ["clinic"], "global_scope": False},
]


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    settings.auth = settings.auth.model_validate({"api_keys": KEYS})
    async with privacy_app(settings, stores, clock) as running:
        yield running


def structured(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "user_id": "u",
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": content,
        "sync": True,
        **fields,
    }


async def code(app: PrivacyApp, route: str, body: Any, key: str | None) -> int:
    status, payload = await app.post(route, body, key)
    assert status == (200 if payload["code"] in (0, 20001) else payload["code"] // 100)
    return int(payload["code"])


async def test_requests_without_a_valid_key_get_40101(app: PrivacyApp) -> None:
    body = {"user_id": "u", "query": "anything"}
    assert await code(app, "recall", body, None) == 40101
    assert await code(app, "recall", body, "not-a-key-at-all-000000") == 40101
    assert await code(app, "recall", body, TENANT_A[:-1]) == 40101
    response = await app.http.post("/memory/v1/recall", json=body, headers={"X-API-Key": TENANT_A})
    assert response.json()["code"] in (0, 20001)
    # Malformed bodies are refused for the key first: nothing about validation leaks to strangers.
    assert await code(app, "add", {"junk": True}, None) == 40101
    assert (await app.http.get("/healthz")).status_code == 200
    assert app.embedder.calls == 1  # only the authenticated recall reached the embedder


async def test_a_key_reaches_only_its_own_apps(app: PrivacyApp) -> None:
    shop = (await app.ok("add_structured", structured("Bought red shoes", app_id="shop"), TENANT_A))[
        "memory_id"
    ]
    clinic = (
        await app.ok("add_structured", structured("Allergic to penicillin", app_id="clinic"), TENANT_B)
    )["memory_id"]
    assert await code(app, "add_structured", structured("x", app_id="clinic"), TENANT_A) == 40303
    assert await code(app, "add", {"user_id": "u", "app_id": "clinic", "messages": []}, TENANT_A) == 40303
    assert (
        await code(app, "recall", {"user_id": "u", "query": "q", "scope": {"app_id": "clinic"}}, TENANT_A)
        == 40303
    )
    for route, body in (
        ("history", {"user_id": "u", "memory_id": clinic}),
        ("delete", {"user_id": "u", "memory_id": clinic}),
        ("update", {"user_id": "u", "memory_id": clinic, "content": "changed"}),
        ("batch_delete", {"user_id": "u", "memory_ids": [shop, clinic]}),
    ):
        assert await code(app, route, body, TENANT_A) == 40303, route
    assert await code(app, "change_log", {"user_id": "u"}, TENANT_A) == 40303
    assert await code(app, "change_log", {"user_id": "u", "app_id": "shop"}, TENANT_A) == 0
    # Tenant B may not touch the user's global memories at all.
    assert await code(app, "add_structured", structured("global fact"), TENANT_B) == 40303
    assert (
        await code(app, "recall", {"user_id": "u", "query": "q", "scope": {"app_id": "clinic"}}, TENANT_B)
        == 40303
    )
    found = await app.ok(
        "recall",
        {
            "user_id": "u",
            "query": "penicillin",
            "min_relevance": 0,
            "scope": {"app_id": "clinic", "include_global": False},
        },
        TENANT_B,
    )
    assert [m["memory_id"] for m in found["memories"]] == [clinic]
    # Nothing of the refused calls happened.
    history = await app.ok("history", {"user_id": "u", "memory_id": clinic}, ADMIN)
    assert (
        history["memory"]["status"] == "ACTIVE" and history["memory"]["content"] == "Allergic to penicillin"
    )


async def test_privacy_routes_need_the_admin_role(app: PrivacyApp) -> None:
    for route, body in (
        ("user/list", {"user_id": "u"}),
        ("user/purge", {"user_id": "u"}),
        ("user/switch", {"user_id": "u", "enabled": False}),
        ("user/export", {"user_id": "u"}),
        ("user/export/download", {"user_id": "u", "task_id": "0" * 32}),
        ("user/import", {"user_id": "u", "lines": ["{}"]}),
    ):
        assert await code(app, route, body, TENANT_A) == 40303, route
        assert await code(app, route, body, None) == 40101, route
    assert await code(app, "user/list", {"user_id": "u"}, ADMIN) == 0
