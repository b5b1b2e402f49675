"""Authentication and tenancy (P4) through the running Ray Serve app, redeployed with API keys.

The session's app is updated in place with keys (no second Ray session), and put back afterwards.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engram.models.api import (
    AddStructuredRequest,
    RecallRequest,
    TaskRequest,
    UserExportRequest,
    UserListRequest,
)
from engram.models.privacy import ExportDownloadRequest
from engram.serve.client import EngramApiError, EngramClient
from tests.e2e.conftest import RunningApp, redeployed_with_keys

pytestmark = pytest.mark.e2e
V1 = "/memory/v1"
ADMIN = "e2e-admin-key-0123456789abcdef"
SHOP = "e2e-shop-key-0123456789abcdef"
NEW = "e2e-new-key-0123456789abcdef"
KEYS = [
    {"name": "ops", "key": ADMIN, "admin": True},
    {"name": "shop", "key": SHOP, "app_ids": ["shop"], "global_scope": True},
]


@pytest.fixture(scope="module")
def secured(engram_app: RunningApp) -> Iterator[RunningApp]:
    with redeployed_with_keys(engram_app, KEYS) as app:
        yield app


def post(app: RunningApp, route: str, body: dict[str, Any], key: str | None) -> tuple[int, int]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(f"{app.url}{V1}/{route}", json=body, headers=headers, timeout=60)
    return response.status_code, int(response.json()["code"])


def test_every_route_needs_a_valid_key(secured: RunningApp) -> None:
    body = {"user_id": "auth-u", "query": "anything"}
    assert post(secured, "recall", body, None) == (401, 40101)
    assert post(secured, "recall", body, "e2e-wrong-key-0123456789abcdef") == (401, 40101)
    assert post(secured, "user/list", {"user_id": "auth-u"}, None) == (401, 40101)
    assert httpx.get(f"{secured.url}/healthz").status_code == 200


def test_a_tenant_reaches_only_its_apps_and_no_privacy_route(secured: RunningApp) -> None:
    user = f"auth-{uuid.uuid4().hex[:8]}"
    shop = EngramClient(secured.url, timeout_s=60, api_key=SHOP)
    created = shop.add_structured(
        AddStructuredRequest(
            user_id=user,
            app_id="shop",
            ownership="USER",
            mem_type="SEMANTIC",
            content="Bought boots",
            sync=True,
        )
    )
    found = shop.recall(RecallRequest(user_id=user, query="boots", scope={"app_id": "shop"}, min_relevance=0))
    assert [m.memory_id for m in found.memories] == [created.memory_id]
    other = {"user_id": user, "app_id": "bank", "ownership": "USER", "mem_type": "SEMANTIC", "content": "x"}
    assert post(secured, "add_structured", other, SHOP) == (403, 40303)
    assert post(secured, "recall", {"user_id": user, "query": "q", "scope": {"app_id": "bank"}}, SHOP) == (
        403,
        40303,
    )
    with pytest.raises(EngramApiError) as refused:
        shop.user_list(UserListRequest(user_id=user))
    assert refused.value.code == 40303

    admin = EngramClient(secured.url, timeout_s=60, api_key=ADMIN)
    bank = admin.add_structured(
        AddStructuredRequest(
            user_id=user,
            app_id="bank",
            ownership="USER",
            mem_type="SEMANTIC",
            content="Has a savings account",
            sync=True,
        )
    )
    # Another app's memory is answered as an unknown one (no 40303/40401 oracle, #27).
    assert post(secured, "delete", {"user_id": user, "memory_id": bank.memory_id}, SHOP) == (404, 40401)
    assert post(secured, "history", {"user_id": user, "memory_id": bank.memory_id}, ADMIN) == (200, 0)
    assert [m.memory_id for m in admin.user_list(UserListRequest(user_id=user)).memories] == [
        created.memory_id,
        bank.memory_id,
    ]
    task = admin.user_export(UserExportRequest(user_id=user))
    deadline = time.monotonic() + 60
    while admin.task(TaskRequest(task_id=task.task_id)).status != "DONE":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    lines = list(admin.export_lines(ExportDownloadRequest(user_id=user, task_id=task.task_id)))
    # Two memory lines, then the user's profile (L7).
    assert len(lines) == 3 and "profile" in json.loads(lines[-1])
    with pytest.raises(EngramApiError) as refused:
        list(shop.export_lines(ExportDownloadRequest(user_id=user, task_id=task.task_id)))
    assert refused.value.code == 40303


def test_keys_added_and_revoked_through_user_config_count_at_once(secured: RunningApp) -> None:
    from engram.serve.app import deploy

    def hashed(name: str, key: str, **grants: Any) -> dict[str, Any]:
        return {"name": name, "key_sha256": hashlib.sha256(key.encode()).hexdigest(), **grants}

    original = [hashed("ops", ADMIN, admin=True), hashed("shop", SHOP, app_ids=["shop"], global_scope=True)]
    added = [*original, hashed("new", NEW, app_ids=["shop"], global_scope=True)]
    user = f"auth-{uuid.uuid4().hex[:8]}"
    recall = {"user_id": user, "query": "boots", "scope": {"app_id": "shop"}}
    write = {"user_id": user, "app_id": "shop", "ownership": "USER", "mem_type": "SEMANTIC", "content": "x"}
    assert post(secured, "recall", recall, NEW) == (401, 40101)
    # Serve's reconfigure reaches every replica: the Ingress (routes, MCP) and the Recall app's.
    deploy(secured.settings, {"auth": {"api_keys": added}})
    try:
        assert post(secured, "recall", recall, NEW) == (200, 20001)
        assert post(secured, "add_structured", {**write, "sync": True}, NEW) == (200, 0)
        deploy(secured.settings, {"auth": {"api_keys": added[:1] + added[2:]}})  # shop revoked
        assert post(secured, "recall", recall, SHOP) == (401, 40101)
        assert post(secured, "add_structured", write, SHOP) == (401, 40101)
        assert post(secured, "recall", recall, NEW)[1] in (0, 20001)
    finally:
        deploy(secured.settings, {"auth": {"api_keys": original}})
    assert post(secured, "recall", recall, SHOP)[1] in (0, 20001)
    assert post(secured, "recall", recall, NEW) == (401, 40101)
