"""One declaration per operation: the routes, rules, handle methods and client methods all come
from ``serve.operations`` (#17)."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest

from engram.models.api import AddRequest, TaskAccepted
from engram.serve.auth import Principal, authorize, memory_ids_of
from engram.serve.client import AsyncEngramClient, EngramClient
from engram.serve.client_calls import Call
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.operations import (
    ACCESS_BY_PATH,
    BY_NAME,
    OPERATIONS,
    PREFIX,
    Access,
    Operation,
    Operations,
)
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.unit

CONTRACT = {
    "add",
    "task",
    "add_structured",
    "batch_add_structured",
    "recall",
    "update",
    "delete",
    "batch_delete",
    "history",
    "change_log",
    "profile",
    "session/close",
    "restore",
    "user/list",
    "user/purge",
    "user/switch",
    "user/export",
    "user/import",
    "quarantine/list",
    "quarantine/release",
    "quarantine/delete",
}


def test_the_table_holds_the_contract_once() -> None:
    assert {op.path for op in OPERATIONS} == CONTRACT
    assert len({op.name for op in OPERATIONS}) == len(OPERATIONS)
    assert all(BY_NAME[op.name] is op for op in OPERATIONS)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_the_service_has_a_method_for_every_operation(op: Operation[Any, Any]) -> None:
    method = getattr(LocalBackend, op.name)
    assert inspect.iscoroutinefunction(method)
    hints = typing.get_type_hints(method)
    assert hints["request"] is op.request
    assert hints["return"] == op.response


def test_every_route_comes_from_the_table() -> None:
    document = build_http_app(lambda: None, auth=lambda: AUTH_OFF).openapi()  # type: ignore[arg-type,return-value]
    for op in OPERATIONS:
        post = document["paths"][op.url_path]["post"]
        assert post["operationId"] == op.name
        body_ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert body_ref.endswith(f"/{op.request.__name__}")
    routes = {path.removeprefix(f"{PREFIX}/") for path in document["paths"] if path.startswith(PREFIX)}
    assert routes == CONTRACT | {"user/export/download"}


def test_links_name_operations_that_exist() -> None:
    document = build_http_app(lambda: None, auth=lambda: AUTH_OFF).openapi()  # type: ignore[arg-type,return-value]
    ids = {post["operationId"] for path in document["paths"].values() for post in path.values()}
    links = document["paths"][Operations.add.url_path]["post"]["responses"]["200"]["links"]
    assert links == {
        "add_to_task": {"operationId": "task", "requestBody": {"task_id": "$response.body#/data/task_id"}}
    }
    targets = {
        link["operationId"]
        for path in document["paths"].values()
        for post in path.values()
        for link in post["responses"].get("200", {}).get("links", {}).values()
    }
    assert targets <= ids
    assert {"task", "update", "history", "delete"} <= targets


def test_a_client_method_is_its_operation_sent() -> None:
    sent: list[Call[Any]] = []

    class Recording(EngramClient):
        def send(self, call: Call[Any]) -> Any:
            sent.append(call)
            return "answer"

    client = Recording("http://unused")
    request = AddRequest(user_id="u1", messages=[{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    assert client.add(request) == "answer"
    assert sent[0].path == f"{PREFIX}/add" and sent[0].request is request
    assert sent[0].result.validate_python({"task_id": "t1", "accepted": True}) == TaskAccepted(
        task_id="t1", accepted=True
    )
    client.close()
    for op in OPERATIONS:
        assert getattr(EngramClient, op.name) is op
        assert getattr(AsyncEngramClient, op.name) is op
        assert getattr(client, op.name).__doc__ == op.doc


def test_authorization_follows_each_operations_access() -> None:
    app_key = Principal(name="k", app_ids=frozenset({"a1"}), global_scope=False, admin=False)
    for op in OPERATIONS:
        assert ACCESS_BY_PATH[op.path] is op.access
        if op.access is Access.ADMIN:
            with pytest.raises(Exception, match="admin"):
                authorize(app_key, op.path, {"user_id": "u1"}, {})
    authorize(app_key, "task", {"task_id": "t1"}, {})  # an unknown task: the route answers 40401
    with pytest.raises(Exception, match="admin"):
        authorize(app_key, "user/export/download", {"user_id": "u1"}, {})
    with pytest.raises(Exception, match="admin"):
        authorize(app_key, "no/such/route", {}, {})
    assert memory_ids_of("batch_delete", {"memory_ids": ["m1", "m2"]}) == ["m1", "m2"]
    assert memory_ids_of("restore", {"memory_id": "m1"}) == ["m1"]
    assert memory_ids_of("add", {"memory_id": "m1"}) == []


def test_a_batch_item_for_the_global_memories_needs_global_scope() -> None:
    app_key = Principal(name="k", app_ids=frozenset({"a1"}), global_scope=False, admin=False)
    batch = {"user_id": "u1", "app_id": "a1", "items": [{"level": "APP"}, {"level": "APP"}]}
    authorize(app_key, "batch_add_structured", batch, {})
    batch["items"].append({"level": "GLOBAL"})  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="global"):
        authorize(app_key, "batch_add_structured", batch, {})
