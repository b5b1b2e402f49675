"""Authentication and tenancy (P4) through the real HTTP app over real stores, in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from engram.models.settings import Settings
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

ADMIN = "admin-key-0123456789abcdef"
TENANT_A = "tenant-a-key-0123456789abcd"
TENANT_B = "tenant-b-key-0123456789abcd"
TENANT_C = "tenant-c-key-0123456789abcd"
PERSONAL = "personal-agent-key-0123456789"
CONSOLE = "console-key-of-alice-01234567"
KEYS = [
    {"name": "ops", "key": ADMIN, "admin": True},
    {"name": "tenant-a", "key": TENANT_A, "app_ids": ["shop"], "global_scope": True},
    {"name": "tenant-b", "key": TENANT_B, "app_ids": ["clinic"], "global_scope": False},
    # Nothing said about global memories: no access to them (the grant is explicit).
    {"name": "tenant-c", "key": TENANT_C, "app_ids": ["bank"]},
    {"name": "personal", "key": PERSONAL, "app_ids": ["*"], "global_scope": True, "user_id": "alice"},
    {"name": "console", "key": CONSOLE, "admin": True, "user_id": "alice"},
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
    # Another app's memory is answered as an unknown one (P9: no 40303/40401 oracle).
    for route, body in (
        ("history", {"user_id": "u", "memory_id": clinic}),
        ("delete", {"user_id": "u", "memory_id": clinic}),
        ("update", {"user_id": "u", "memory_id": clinic, "content": "changed"}),
    ):
        assert await code(app, route, body, TENANT_A) == 40401, route
    batch = await app.ok("batch_delete", {"user_id": "u", "memory_ids": [shop, clinic]}, TENANT_A)
    assert batch == {"deleted": [shop], "not_found": [clinic]}
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


async def test_global_memories_need_an_explicit_grant(app: PrivacyApp) -> None:
    assert await code(app, "add_structured", structured("lives in Porto"), TENANT_C) == 40303
    assert (
        await code(app, "add_structured", structured("a", app_id="bank", level="GLOBAL"), TENANT_C) == 40303
    )
    recall = {"user_id": "u", "query": "q", "scope": {"app_id": "bank"}}
    assert await code(app, "recall", recall, TENANT_C) == 40303
    assert await code(
        app, "recall", {**recall, "scope": {"app_id": "bank", "include_global": False}}, TENANT_C
    ) in (
        0,
        20001,
    )
    assert await code(app, "add_structured", structured("a bank note", app_id="bank"), TENANT_C) == 0
    # The same request with a key granted global memories goes through.
    assert await code(app, "add_structured", structured("lives in Porto"), TENANT_A) == 0


async def test_a_user_bound_key_acts_for_its_user_only(app: PrivacyApp) -> None:
    mine = (
        await app.ok("add_structured", {**structured("Alice plays the cello"), "user_id": "alice"}, PERSONAL)
    )["memory_id"]
    theirs = (await app.ok("add_structured", structured("Bob's secret plan"), ADMIN))["memory_id"]
    found = await app.ok("recall", {"user_id": "alice", "query": "cello", "min_relevance": 0}, PERSONAL)
    assert [m["memory_id"] for m in found["memories"]] == [mine]
    for route, body in (
        ("recall", {"user_id": "u", "query": "secret plan", "min_relevance": 0}),
        ("add", {"user_id": "u", "messages": [{"role": "user", "content": "I like tea."}]}),
        ("add_structured", structured("planted")),
        ("history", {"user_id": "u", "memory_id": theirs}),
        ("delete", {"user_id": "u", "memory_id": theirs}),
        ("change_log", {"user_id": "u", "app_id": "shop"}),
        ("session/close", {"user_id": "u", "session_id": "s1"}),
    ):
        assert await code(app, route, body, PERSONAL) == 40303, route
    # Another user's id in the body with this key's memory id changes nothing either.
    assert await code(app, "delete", {"user_id": "u", "memory_id": mine}, PERSONAL) == 40303
    # A user-bound admin key (the console) manages its own user, nobody else.
    assert await code(app, "user/list", {"user_id": "alice"}, CONSOLE) == 0
    assert await code(app, "user/export", {"user_id": "alice"}, CONSOLE) == 0
    for route, body in (
        ("user/list", {"user_id": "u"}),
        ("user/purge", {"user_id": "u"}),
        ("user/switch", {"user_id": "u", "enabled": False}),
        ("user/export", {"user_id": "u"}),
        ("history", {"user_id": "u", "memory_id": theirs}),
    ):
        assert await code(app, route, body, CONSOLE) == 40303, route
    # Nothing of the refused calls happened.
    history = await app.ok("history", {"user_id": "u", "memory_id": theirs}, ADMIN)
    assert history["memory"]["status"] == "ACTIVE"
    # The personal key itself may not call the privacy routes (no admin role).
    assert await code(app, "user/list", {"user_id": "alice"}, PERSONAL) == 40303


async def test_an_authenticator_that_cannot_be_had_refuses_instead_of_letting_through(
    app: PrivacyApp,
) -> None:
    from engram.models.errors import EngramError, ErrorCode
    from engram.serve.auth import Authenticator
    from engram.serve.http_app import build_http_app

    with pytest.raises(TypeError):
        build_http_app(lambda: app.gate)  # type: ignore[call-arg,arg-type,return-value]
    ready: list[Authenticator] = []

    def authenticator() -> Authenticator:
        if not ready:
            raise EngramError(ErrorCode.DEPENDENCY_UNAVAILABLE, "the service is starting")
        return ready[0]

    guarded = build_http_app(lambda: app.gate, auth=authenticator)  # type: ignore[arg-type,return-value]
    transport = httpx.ASGITransport(app=guarded)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        body = {"user_id": "u", "query": "anything"}
        answer = await http.post("/memory/v1/recall", json=body)
        assert (answer.status_code, answer.json()["code"]) == (503, 50301)
        answer = await http.post("/memory/v1/user/list", json={"user_id": "u"})
        assert answer.json()["code"] == 50301
        assert (await http.get("/healthz")).status_code == 200
        ready.append(Authenticator(app.settings.auth))
        assert (await http.post("/memory/v1/recall", json=body)).json()["code"] == 40101
    assert app.embedder.calls == 0  # no refused request did any work
