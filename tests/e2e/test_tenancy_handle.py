"""Tenancy through a Ray handle (SPEC P9, #27; docs/agents.md): a handle carries no key, as a
trusted in-cluster caller, but cannot get past the scope its request names."""

from __future__ import annotations

import time
from typing import Any

import pytest
from ray import serve
from ray.exceptions import RayTaskError

from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    HistoryRequest,
    RecallRequest,
    RecallScope,
    SessionCloseRequest,
    TaskRequest,
)
from engram.models.errors import EngramError
from engram.serve.remote_errors import engram_cause
from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e


def refused(call: Any) -> EngramError:
    """The EngramError a handle call ended with (fails the test if it succeeded)."""
    with pytest.raises(RayTaskError) as raised:  # Ray wraps the service's EngramError
        call.result()
    cause = engram_cause(raised.value)
    assert cause is not None, raised.value
    return cause


def test_a_handle_gets_only_the_scope_its_request_names(engram_app: RunningApp) -> None:
    handle = serve.get_app_handle(engram_app.settings.serve.app_name)

    def remember(user: str, content: str, **fields: Any) -> str:
        request = AddStructuredRequest(
            user_id=user, ownership="USER", mem_type="SEMANTIC", content=content, sync=True, **fields
        )
        return str(handle.add_structured.remote(request).result().memory_id)

    app_less = remember("h-bob", "Bob mentioned HBOBGLOBAL plans.", level="SESSION", session_id="s1")
    shop = remember("h-bob", "Bob browsed HBOBSHOP tents.", level="SESSION", session_id="s1", app_id="shop")
    accepted = handle.add.remote(
        AddRequest(
            user_id="h-bob", app_id="clinic", messages=[{"role": "user", "content": "I take HBOBPILL pills."}]
        )
    ).result()
    deadline = time.monotonic() + 120
    while handle.task.remote(TaskRequest(task_id=accepted.task_id)).result().status not in ("DONE", "FAILED"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # A task named under another user is unknown, exactly as an unknown id.
    other = refused(handle.task.remote(TaskRequest(task_id=accepted.task_id, user_id="h-alice")))
    unknown = refused(handle.task.remote(TaskRequest(task_id="0" * 32, user_id="h-alice")))
    assert (other.code, other.message) == (unknown.code, unknown.message) == (unknown.code, "no such task")
    assert int(other.code) == 40401
    own = handle.task.remote(TaskRequest(task_id=accepted.task_id, user_id="h-bob")).result()
    assert own.status == "DONE"
    # A memory id under another user is unknown.
    missing = refused(handle.history.remote(HistoryRequest(user_id="h-alice", memory_id=app_less)))
    assert int(missing.code) == 40401 and "HBOB" not in missing.message
    # include_global false keeps the user's app-less session memory out of recall and of a close.
    narrow = RecallScope(app_id="shop", session_id="s1", include_global=False)
    hits = handle.recall.remote(
        RecallRequest(user_id="h-bob", query="Bob plans tents", scope=narrow, min_relevance=0, top_k=50)
    ).result()
    assert {m.memory_id for m in hits.memories} == {shop}
    closed = handle.session_close.remote(
        SessionCloseRequest(
            user_id="h-bob",
            app_id="shop",
            session_id="s1",
            include_global=False,
            must_promote=[app_less, shop],
        )
    ).result()
    assert set(closed.promoted) | set(closed.dropped) == {shop}
    kept = handle.history.remote(HistoryRequest(user_id="h-bob", memory_id=app_less)).result().memory
    assert (kept.status, kept.level, kept.app_id) == ("ACTIVE", "SESSION", "")
