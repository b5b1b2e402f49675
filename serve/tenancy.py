"""Tenancy of the objects a key names by id (SPEC P4, P9): memories, tasks, a session's memories.

``auth.authorize`` decides what a key may ask for (routes, apps, users); this module decides
whether the objects a request names are within the key's reach once they are looked up, and
answers an object out of reach exactly as the route answers an unknown one (40401, same message):
no answer tells "exists elsewhere" from "does not exist". What the guard decided travels to the
route in the ASGI scope (``REACH_KEY``), where ``within_reach`` narrows what the route acts on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engram.models.absent import (
    NO_ACTIVE_MEMORY,
    NO_ARCHIVED_MEMORY,
    NO_MEMORY,
    NO_MEMORY_TO_DELETE,
    NO_TASK,
    not_found,
)
from engram.models.api import BatchDeleteRequest, DeleteResult
from engram.models.errors import EngramError, ErrorCode
from engram.models.rules.task_reach import REACH_ADMIN, REACH_GLOBAL, TaskOwner

REACH_KEY = "engram.reach"
"""The ASGI scope key under which the guard leaves the request's ``Reach`` for the route."""

# What each single-memory route answers for an id it does not know: the same for one out of reach.
MISSING_MEMORY = {
    "update": NO_ACTIVE_MEMORY,
    "delete": NO_MEMORY_TO_DELETE,
    "history": NO_MEMORY,
    "restore": NO_ARCHIVED_MEMORY,
}


class Principal(Protocol):
    """What tenancy needs of a caller (``auth.Principal``)."""

    @property
    def admin(self) -> bool: ...

    @property
    def user_id(self) -> str | None: ...

    def may_use_app(self, app_id: str) -> bool:
        """True when the caller reaches ``app_id`` ("" = the user's global memories)."""
        ...


@dataclass(frozen=True, slots=True)
class Reach:
    """What the guard decided for one request: who calls, and the named memories it may not touch."""

    principal: Principal
    hidden: frozenset[str] = frozenset()


def task_in_reach(principal: Principal, owner: TaskOwner) -> bool:
    """True when ``principal`` may read the task: its user, its app and, if it has one, global scope."""
    if principal.user_id is not None and owner.user_id != principal.user_id:
        return False
    if principal.admin:
        return True
    if owner.reach == REACH_ADMIN or not principal.may_use_app(owner.app_id):
        return False
    return owner.reach != REACH_GLOBAL or principal.may_use_app("")


def check_task(principal: Principal, task_id: str, owner: TaskOwner | None) -> None:
    """40401 "no task", as for an unknown id, when the task is out of ``principal``'s reach."""
    if owner is not None and not task_in_reach(principal, owner):
        raise not_found(NO_TASK, task_id)


def hidden_memories(
    principal: Principal, route: str, memory_ids: Sequence[str], apps: Mapping[str, str]
) -> frozenset[str]:
    """The named memories out of reach (their app is not the key's; "" needs global scope).

    A single-memory route answers 40401 with its own "unknown" message; a batch treats each such id
    as unknown (``within_reach``). Unknown ids are not in ``apps``: the route answers for them.
    """
    hidden = [i for i in memory_ids if i in apps and not principal.may_use_app(apps[i])]
    if hidden and route in MISSING_MEMORY:
        raise not_found(MISSING_MEMORY[route], hidden[0])
    return frozenset(hidden)


Call = Callable[[Any], Awaitable[Any]]


async def within_reach(name: str, request: Any, reach: Reach | None, call: Call) -> Any:
    """Run ``call`` on ``request`` narrowed to ``reach`` (the operation ``name``'s route)."""
    if reach is None:
        # Every route sits behind the guard, which always leaves a Reach: never act without one.
        raise EngramError(ErrorCode.DEPENDENCY_UNAVAILABLE, "the request was not authorized")
    if name == "batch_delete" and reach.hidden:
        return await _batch_delete(request, reach.hidden, call)
    if name == "session_close" and not reach.principal.may_use_app(""):
        # A key without global scope acts on the session's memories of its app only, never on
        # the user's app-less ones.
        request = request.model_copy(update={"include_global": False})
    return await call(request)


async def _batch_delete(request: BatchDeleteRequest, hidden: frozenset[str], call: Call) -> DeleteResult:
    asked = list(dict.fromkeys(request.memory_ids))
    reachable = [i for i in asked if i not in hidden]
    deleted: set[str] = set()
    if reachable:
        narrowed = BatchDeleteRequest(user_id=request.user_id, memory_ids=reachable)
        deleted = set((await call(narrowed)).deleted)
    # Exactly what the service answers when the hidden ids are unknown: they are "not found".
    return DeleteResult(
        deleted=[i for i in asked if i in deleted], not_found=[i for i in asked if i not in deleted]
    )
