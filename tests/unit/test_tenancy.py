"""Who reaches a task, a memory and a session's memories (SPEC P9): the pure rules of ``tenancy``."""

from __future__ import annotations

from typing import Any

import pytest

from engram.models.api import BatchDeleteRequest, DeleteResult, SessionCloseRequest
from engram.models.errors import EngramError, ErrorCode
from engram.models.rules.task_reach import REACH_ADMIN, REACH_APP, REACH_GLOBAL, TaskOwner, task_reach
from engram.serve.auth import OPEN, Principal, authorize
from engram.serve.tenancy import Reach, hidden_memories, task_in_reach, within_reach

pytestmark = pytest.mark.unit

SHOP = Principal("shop", frozenset({"shop"}), global_scope=True, admin=False)
SHOP_CLOSED = Principal("shop-closed", frozenset({"shop"}), global_scope=False, admin=False)
ALICE_AGENT = Principal("alice", frozenset({"*"}), global_scope=True, admin=False, user_id="alice")
ALICE_CONSOLE = Principal("console", frozenset(), global_scope=False, admin=True, user_id="alice")
M1, M2, M3 = "1" * 32, "2" * 32, "3" * 32


@pytest.mark.parametrize(
    ("kind", "payload", "expected"),
    [
        ("add", {"app_id": "shop"}, ("shop", REACH_APP)),
        ("add", {"app_id": "shop", "level": "SESSION"}, ("shop", REACH_APP)),
        ("add", {"app_id": "shop", "level": "GLOBAL"}, ("shop", REACH_GLOBAL)),
        ("add", {}, ("", REACH_GLOBAL)),
        ("add_structured", {"app_id": None}, ("", REACH_GLOBAL)),
        ("batch_add_structured", {"app_id": "shop", "items": [{"level": "APP"}]}, ("shop", REACH_APP)),
        ("batch_add_structured", {"app_id": "shop", "items": [{"level": "GLOBAL"}]}, ("shop", REACH_GLOBAL)),
        ("export", {"user_id": "u"}, ("", REACH_ADMIN)),
        ("add", None, ("", REACH_ADMIN)),  # a payload that cannot be read any more
    ],
)
def test_a_tasks_reach_follows_what_it_was_asked_to_write(
    kind: str, payload: dict[str, Any] | None, expected: tuple[str, str]
) -> None:
    assert task_reach(kind, payload) == expected


def test_who_reaches_a_task() -> None:
    shop_task = TaskOwner("bob", "add", "shop", REACH_APP)
    global_task = TaskOwner("bob", "add", "", REACH_GLOBAL)
    export = TaskOwner("alice", "export", "", REACH_ADMIN)
    assert task_in_reach(SHOP, shop_task) and task_in_reach(SHOP_CLOSED, shop_task)
    assert task_in_reach(SHOP, global_task) and not task_in_reach(SHOP_CLOSED, global_task)
    assert not task_in_reach(Principal("c", frozenset({"clinic"}), True, False), shop_task)
    assert not task_in_reach(ALICE_AGENT, shop_task) and not task_in_reach(ALICE_CONSOLE, shop_task)
    assert not task_in_reach(ALICE_AGENT, export) and task_in_reach(ALICE_CONSOLE, export)
    assert task_in_reach(OPEN, export) and not task_in_reach(SHOP, export)


def test_an_out_of_reach_task_is_answered_as_an_unknown_one() -> None:
    owner = TaskOwner("bob", "add", "clinic", REACH_APP)
    with pytest.raises(EngramError) as refused:
        authorize(SHOP, "task", {"task_id": M1}, {}, owner)
    assert (refused.value.code, refused.value.message) == (ErrorCode.NOT_FOUND, "no such task")
    authorize(SHOP, "task", {"task_id": M1}, {}, None)  # unknown: the route answers the same
    # A user-bound key may leave the user out (the task's own user is checked), not name another.
    with pytest.raises(EngramError, match="bound"):
        authorize(ALICE_AGENT, "task", {"task_id": M1, "user_id": "bob"}, {}, None)


def test_an_out_of_reach_memory_is_answered_as_an_unknown_one() -> None:
    apps = {M1: "clinic", M2: "shop", M3: ""}
    for route, message in [
        ("update", f"no active memory {M1}"),
        ("delete", f"no memory {M1} to delete"),
        ("history", f"no memory {M1}"),
        ("restore", f"no archived memory {M1}"),
    ]:
        with pytest.raises(EngramError) as refused:
            authorize(SHOP, route, {"user_id": "bob", "memory_id": M1}, apps)
        assert (refused.value.code, refused.value.message) == (ErrorCode.NOT_FOUND, message), route
    assert hidden_memories(SHOP_CLOSED, "batch_delete", [M1, M2, M3], apps) == {M1, M3}
    assert hidden_memories(SHOP, "batch_delete", [M1, M2, M3], apps) == {M1}
    assert hidden_memories(OPEN, "history", [M1], apps) == frozenset()


async def test_a_batch_delete_answers_hidden_ids_as_unknown_ones() -> None:
    sent: list[Any] = []

    async def call(request: BatchDeleteRequest) -> DeleteResult:
        sent.append(request)
        return DeleteResult(deleted=[M2], not_found=[])

    request = BatchDeleteRequest(user_id="bob", memory_ids=[M1, M2, M1, M3])
    result = await within_reach("batch_delete", request, Reach(SHOP, frozenset({M1, M3})), call)
    assert result == DeleteResult(deleted=[M2], not_found=[M1, M3])
    assert [r.memory_ids for r in sent] == [[M2]]
    nothing = await within_reach(
        "batch_delete", BatchDeleteRequest(user_id="b", memory_ids=[M1]), Reach(SHOP, frozenset({M1})), call
    )
    assert nothing == DeleteResult(deleted=[], not_found=[M1]) and len(sent) == 1


async def test_a_session_close_without_global_scope_leaves_app_less_memories() -> None:
    seen: list[SessionCloseRequest] = []

    async def call(request: SessionCloseRequest) -> None:
        seen.append(request)

    request = SessionCloseRequest(user_id="bob", app_id="shop", session_id="s1")
    await within_reach("session_close", request, Reach(SHOP_CLOSED), call)
    await within_reach("session_close", request, Reach(SHOP), call)
    assert [r.include_global for r in seen] == [False, True]
    with pytest.raises(EngramError) as refused:
        await within_reach("session_close", request, None, call)
    assert refused.value.code is ErrorCode.DEPENDENCY_UNAVAILABLE
