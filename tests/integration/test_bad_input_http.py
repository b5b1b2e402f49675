"""Bad input over HTTP (issue #27, C1, C9): every case is 40001 in the envelope, HTTP 400, for an
admin key, a non-admin key and with auth off, and nothing is written.

Each case once reached the wrong code: malformed JSON was 40303 for non-admin keys (the guard parsed
the body its own way), deep nesting a RecursionError (50301), a 19-digit cursor, a naive or
year-9999 datetime and a huge count in an import line overflowed the stores (50301).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func, select

from engram.models.settings import Settings
from engram.serve.body import MAX_DEPTH
from engram.storage import schema
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import V1, PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

ADMIN = "admin-key-0123456789abcdef"
TENANT = "tenant-shop-key-0123456789ab"
KEYS = [
    {"name": "ops", "key": ADMIN, "admin": True},
    {"name": "shop", "key": TENANT, "app_ids": ["shop"], "global_scope": True},
]
USER = "bad-input-user"
MEMORY_ID = "0" * 32

# The routes a non-admin key may call, with a well-formed body each (the cases below spoil them).
TENANT_ROUTES: dict[str, dict[str, Any]] = {
    "add": {"user_id": USER, "app_id": "shop", "messages": [{"role": "user", "content": "I like tea."}]},
    "add_structured": {
        "user_id": USER,
        "app_id": "shop",
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": "Likes green tea",
        "sync": True,
    },
    "batch_add_structured": {
        "user_id": USER,
        "app_id": "shop",
        "items": [{"ownership": "USER", "mem_type": "SEMANTIC", "content": "Likes oolong"}],
        "sync": True,
    },
    "recall": {"user_id": USER, "query": "tea", "scope": {"app_id": "shop"}},
    "update": {"user_id": USER, "memory_id": MEMORY_ID, "content": "Likes black tea"},
    "delete": {"user_id": USER, "memory_id": MEMORY_ID},
    "history": {"user_id": USER, "memory_id": MEMORY_ID},
    "change_log": {"user_id": USER, "app_id": "shop"},
    "task": {"task_id": MEMORY_ID},
    "profile": {"user_id": USER, "app_id": "shop"},
    "session/close": {"user_id": USER, "app_id": "shop", "session_id": "s1"},
}
ADMIN_ROUTES: dict[str, dict[str, Any]] = {
    "user/list": {"user_id": USER},
    "user/import": {"user_id": USER, "lines": ["{}"]},
    "user/purge": {"user_id": USER},
    "user/switch": {"user_id": USER, "enabled": False},
    "quarantine/list": {"user_id": USER},
}
TABLES = [
    schema.memories,
    schema.change_log,
    schema.write_tasks,
    schema.user_keys,
    schema.capacity_counters,
    schema.switches,
    schema.user_versions,
    schema.memory_vectors,
    schema.user_profiles,
]
NAIVE = "2026-03-01T12:00:00"
OUT_OF_RANGE = ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59Z"]


@pytest.fixture(params=["admin", "tenant", "auth-off"])
def caller(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def app(
    settings: Settings, stores: Stores, clock: ManualClock, caller: str
) -> AsyncIterator[PrivacyApp]:
    if caller != "auth-off":
        settings.auth = settings.auth.model_validate({"api_keys": KEYS})
    async with privacy_app(settings, stores, clock) as running:
        yield running


def key_of(caller: str) -> str | None:
    return {"admin": ADMIN, "tenant": TENANT}.get(caller)


def routes_of(caller: str) -> dict[str, dict[str, Any]]:
    """The routes ``caller`` may call: a non-admin key's others answer 40303 to a well-formed body."""
    return TENANT_ROUTES if caller == "tenant" else {**TENANT_ROUTES, **ADMIN_ROUTES}


async def send(app: PrivacyApp, route: str, raw: bytes, key: str | None, **headers: str) -> dict[str, Any]:
    """POST raw bytes; the envelope, after checking it is one."""
    sent = {"content-type": "application/json", **headers}
    if key:
        sent["authorization"] = f"Bearer {key}"
    response = await app.http.post(f"{V1}/{route}", content=raw, headers=sent)
    payload = response.json()
    assert set(payload) == {"code", "msg", "trace_id", "data"}, (route, payload)
    assert payload["trace_id"] and payload["data"] is None, (route, payload)
    assert (response.status_code, payload["code"]) == (400, 40001), (route, raw[:120], payload)
    return dict(payload)


async def row_counts(stores: Stores) -> dict[str, int]:
    async with stores.metadata.engine.connect() as conn:
        return {
            table.name: int((await conn.execute(select(func.count()).select_from(table))).scalar_one())
            for table in TABLES
        }


def nested(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def bad_bodies() -> list[tuple[str, bytes]]:
    """Bodies that are not one JSON object within the depth limit, for any route."""
    deep = json.dumps({"user_id": USER, "query": "q", "scope": nested(MAX_DEPTH)}).encode()
    return [
        ("malformed", b'{"user_id": "u", "query":'),
        ("not utf-8", b'{"user_id": "\xff\xfe"}'),
        ("array", b"[]"),
        ("string", b'"hello"'),
        ("number", b"42"),
        ("null", b"null"),
        ("empty", b""),
        ("nan", b'{"user_id": "u", "query": "q", "min_relevance": NaN}'),
        ("too deep to parse", b"[" * 100_000 + b"]" * 100_000),
        ("objects too deep to parse", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
        ("parsed, then too deep", deep),
        ("huge integer literal", b'{"user_id": "u", "top_k": ' + b"9" * 5000 + b"}"),
    ]


async def test_a_body_that_is_not_a_json_object_is_40001_for_every_key(
    app: PrivacyApp, stores: Stores, caller: str
) -> None:
    before = await row_counts(stores)
    key = key_of(caller)
    # Every route, the admin-only ones too: the body is refused before any tenancy rule.
    for route in {**TENANT_ROUTES, **ADMIN_ROUTES}:
        for _name, raw in bad_bodies():
            await send(app, route, raw, key)
    # A JSON object sent as another content type is refused the same way by guard and route.
    for route, body in routes_of(caller).items():
        await send(app, route, json.dumps(body).encode(), key, **{"content-type": "text/plain"})
    assert await row_counts(stores) == before
    assert app.embedder.calls == 0


def spoiled(caller: str) -> list[tuple[str, dict[str, Any]]]:
    """Well-formed bodies with one value out of the stores' range."""
    routes = routes_of(caller)
    cases: list[tuple[str, dict[str, Any]]] = []

    def spoil(route: str, **fields: Any) -> None:
        if route in routes:
            cases.append((route, {**routes[route], **fields}))

    for when in [NAIVE, *OUT_OF_RANGE]:
        spoil("add_structured", expire_at=when)
        spoil("add_structured", valid_at=when)
        item = {**TENANT_ROUTES["batch_add_structured"]["items"][0], "expire_at": when}
        spoil("batch_add_structured", items=[item])
        spoil("add", messages=[{"role": "user", "content": "I like tea.", "timestamp": when}])
        spoil("recall", as_of=when)
        spoil("update", expire_at=when)
        spoil("change_log", since=when)
        spoil("change_log", until=when)
    for cursor in ["9" * 19, str(2**63), "9" * 20, "-1"]:
        spoil("change_log", cursor=cursor)
    for huge in [2**31, 2**63, 10**30, -(2**63) - 1]:
        spoil("recall", top_k=huge)
        spoil("recall", timeout_ms=huge)
        spoil("change_log", limit=huge)
        spoil("user/list", limit=huge)
        spoil("quarantine/list", limit=huge)
    for number in [1e309, -1e309]:
        spoil("recall", min_relevance=number)
    # Cursors of the listing routes are opaque, but a forged one names a datetime of its own.
    for when in [*OUT_OF_RANGE, NAIVE]:
        forged = base64.urlsafe_b64encode(json.dumps([when, MEMORY_ID]).encode()).decode()
        spoil("user/list", cursor=forged)
        spoil("quarantine/list", cursor=forged)
    for line in bad_import_lines():
        spoil("user/import", lines=[import_line(), line])
    return cases


def import_line(**fields: Any) -> str:
    """One valid export line (a memory of ``USER``), with ``fields`` changed."""
    at = "2026-01-01T12:00:00Z"
    line = {
        "format": 1,
        "memory_id": "ab" * 16,
        "user_id": USER,
        "app_id": "shop",
        "session_id": None,
        "level": "APP",
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": "Likes jasmine tea",
        "weight": 0.7,
        "weight_at": at,
        "status": "ACTIVE",
        "is_important": False,
        "recall_count": 3,
        "created_at": at,
        "updated_at": at,
        "last_recalled_at": None,
        "expire_at": None,
        "archived_at": None,
        "deleted_at": None,
        "source_session_id": None,
        "source_msg_id": None,
        "custom_tags": [],
        "entities": [],
        "embedding_model": "another-model",
        "valid_at": at,
        "invalid_at": None,
        "superseded_by": None,
        "confidence": 1.0,
        "source_type": "conversation",
        "vector": None,
        "changes": [
            {"op_type": "ADD", "op_source": "USER", "op_time": at, "reason": "add", "content_after": "x"}
        ],
    }
    line.update(fields)
    return json.dumps(line)


def bad_import_lines() -> list[str]:
    lines = [import_line(recall_count=n) for n in (2**31, 2**63, 10**30, -1)]
    for field in ("weight_at", "created_at", "updated_at", "valid_at", "expire_at", "last_recalled_at"):
        lines += [import_line(**{field: when}) for when in [NAIVE, *OUT_OF_RANGE]]
    change = {"op_type": "ADD", "op_source": "USER", "op_time": NAIVE, "reason": "add"}
    lines.append(import_line(changes=[change]))
    for field in ("weight", "confidence"):
        lines += [
            import_line(**{field: 2.0}),
            import_line(**{field: -0.5}),
            import_line()[:-1] + f', "{field}": NaN}}',
        ]
    lines.append(import_line()[:-1] + ', "entities": ' + "[" * 5000 + "]" * 5000 + "}")
    lines.append('{"profile": ' + "[" * 50_000 + "]" * 50_000 + "}")
    return lines


async def test_values_out_of_the_stores_range_are_40001(app: PrivacyApp, stores: Stores, caller: str) -> None:
    before = await row_counts(stores)
    key = key_of(caller)
    cases = spoiled(caller)
    assert len(cases) >= (50 if caller == "tenant" else 100)
    for route, body in cases:
        await send(app, route, json.dumps(body).encode(), key)
    assert await row_counts(stores) == before
    # The edges themselves are accepted: the largest cursor, the range's ends, a count of 2^31 - 1.
    last = {**TENANT_ROUTES["change_log"], "cursor": str(2**63 - 1), "since": "1000-01-01T00:00:00Z"}
    assert (await app.ok("change_log", last, key))["changes"] == []
    far = {**TENANT_ROUTES["add_structured"], "expire_at": "8999-12-31T23:59:59Z"}
    assert (await app.ok("add_structured", far, key))["memory_id"]
    assert (await row_counts(stores))["memories"] == before["memories"] + 1  # the counts see writes
    if caller != "tenant":
        line = import_line(recall_count=2**31 - 1, memory_id="cd" * 16)
        assert (await app.ok("user/import", {"user_id": USER, "lines": [line]}, key))["added"] == 1
