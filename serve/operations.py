"""Every operation of the HTTP contract, declared once (SPEC C2-C7).

An ``Operation`` names its route, request and response models, who may call it (``Access``), the
switch check that guards it (``Gate``) and where the Ray backend sends it (``Dispatch``). Everything
else is derived from the table ``Operations``: the FastAPI routes (``http_app``), each route's
authorization rule (``auth``), the switch gate (``gate``), the Ray dispatch (``ray_backend``), the
shard actor's and the Ingress's handle methods (generated into ``operation_methods``) and the
typed clients' methods (an ``Operation`` is a descriptor: on a client it is a method that sends
itself). Adding an operation is one entry here, one method on the service (``LocalBackend``) and
a run of ``python tools/operation_methods.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any, Generic, Protocol, TypeVar, cast, overload

from pydantic import BaseModel, TypeAdapter

from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchAddResult,
    BatchAddStructuredRequest,
    BatchDeleteRequest,
    ChangeLogPage,
    ChangeLogRequest,
    DeleteRequest,
    DeleteResult,
    HistoryRequest,
    HistoryResponse,
    MemoryCreated,
    MemoryView,
    ProfileRequest,
    RecallRequest,
    RecallResponse,
    RestoreRequest,
    SessionCloseRequest,
    SessionCloseResult,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
    UserExportRequest,
    UserImportRequest,
    UserListRequest,
    UserPurgeRequest,
    UserSwitchRequest,
)
from engram.models.privacy import ImportResult, PurgeResult, SwitchState, UserListPage
from engram.models.profile import UserProfile
from engram.models.quarantine import (
    QuarantineDecisionRequest,
    QuarantineListRequest,
    QuarantinePage,
    QuarantineResult,
)
from engram.serve.client_calls import AsyncSender, Call, SyncSender

PREFIX = "/memory/v1"

Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")


class Access(Enum):
    """Who may call an operation once authenticated (SPEC P4; the rules are in ``auth.authorize``)."""

    TASK = "task"  # the named task's user, app and level decide (``tenancy``)
    APP = "app"  # the request's app_id and level decide
    RECALL = "recall"  # the recall scope decides
    CHANGE_LOG = "change_log"  # a key reads the log of its own apps
    MEMORY = "memory"  # the apps of the memories named by id decide
    ADMIN = "admin"  # privacy operations: an admin key


class Gate(Enum):
    """The switch check before an operation's work is sent on (SPEC P1, ``gate``)."""

    NONE = "none"  # lists, deletes, purges, exports keep working while memory is off
    STORE = "store"  # stores memories: the user's and the app's switch must be on
    RECALL = "recall"  # recall is narrowed to the apps switched on, or refused
    ON = "on"  # the user's global switch must be on


class Dispatch(Enum):
    """Where the Ray backend sends an operation."""

    USER_SHARD = "user_shard"  # the shard that owns request.user_id
    ANY_SHARD = "any_shard"  # the request names no user (a task id): each shard in turn
    RECALL = "recall"  # the recall deployment


@dataclass(frozen=True)
class Link:
    """An OpenAPI link: the follow-up operation and the body fields taken from this exchange."""

    target: str
    body: Mapping[str, str]


class Backend(Protocol):
    """Anything that serves the table's operations (the service, the Ray backend, their wrappers)."""

    async def call(self, op: Operation[Req, Res], request: Req) -> Res:
        """Run ``op`` on ``request``; errors are ``EngramError`` with a C9 code."""
        ...


@dataclass(frozen=True, eq=False)
class Operation(Generic[Req, Res]):
    """One operation of the contract; on a client instance, the method that sends it."""

    name: str
    path: str
    request: type[Req]
    response: type[Res]  # a union of models is passed as ``cast(Any, A | B)``
    access: Access
    doc: str
    gate: Gate = Gate.NONE
    dispatch: Dispatch = Dispatch.USER_SHARD
    # An empty result is answered with 20001 (recall: nothing relevant) instead of 0.
    empty_is_miss: bool = False
    links: tuple[Link, ...] = field(default=())

    @property
    def url_path(self) -> str:
        """The route's path, prefix included."""
        return f"{PREFIX}/{self.path}"

    @cached_property
    def result(self) -> TypeAdapter[Res]:
        """Reads the response's data into the response model."""
        return TypeAdapter(self.response)

    def call(self, request: Req) -> Call[Res]:
        """The HTTP call that runs this operation on ``request``."""
        return Call(self.url_path, request, self.result)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Operation[Req, Res]: ...

    @overload
    def __get__(self, obj: AsyncSender, owner: type[Any]) -> Callable[[Req], Awaitable[Res]]: ...

    @overload
    def __get__(self, obj: SyncSender, owner: type[Any]) -> Callable[[Req], Res]: ...

    def __get__(self, obj: Any, owner: type[Any]) -> Any:
        if obj is None:
            return self

        def send(request: Req) -> Any:
            return obj.send(self.call(request))

        send.__name__ = self.name
        send.__doc__ = self.doc
        return send


# Follow-ups of a request that names a memory: the same user and memory.
_SAME_MEMORY = {"user_id": "$request.body#/user_id", "memory_id": "$request.body#/memory_id"}
# Follow-ups of an answer that created a memory: the new memory, of the user who wrote it.
_MEMORY_LINKS = tuple(
    Link(target, {"user_id": "$request.body#/user_id", "memory_id": "$response.body#/data/memory_id"})
    for target in ("update", "history", "delete")
)


class Operations:
    """The table. Mixed into the typed clients, where each entry is a method."""

    add = Operation(
        "add",
        "add",
        AddRequest,
        TaskAccepted,
        Access.APP,
        "Record a conversation durably and return its task; memories are extracted later (W1).",
        gate=Gate.STORE,
        links=(Link("task", {"task_id": "$response.body#/data/task_id"}),),
    )
    task = Operation(
        "task",
        "task",
        TaskRequest,
        TaskView,
        Access.TASK,
        "The state of an accepted write and its decisions (W2).",
        dispatch=Dispatch.ANY_SHARD,
    )
    add_structured: Operation[AddStructuredRequest, MemoryCreated | TaskAccepted] = Operation(
        "add_structured",
        "add_structured",
        AddStructuredRequest,
        cast(Any, MemoryCreated | TaskAccepted),
        Access.APP,
        "Store one ready memory, at once when sync (W6).",
        gate=Gate.STORE,
        links=(*_MEMORY_LINKS, Link("task", {"task_id": "$response.body#/data/task_id"})),
    )
    batch_add_structured: Operation[BatchAddStructuredRequest, BatchAddResult | TaskAccepted] = Operation(
        "batch_add_structured",
        "batch_add_structured",
        BatchAddStructuredRequest,
        cast(Any, BatchAddResult | TaskAccepted),
        Access.APP,
        "Store up to 1,000 ready memories of one user and app in order, as if one by one: one task "
        "whose decisions hold each item's memory id or error, or with sync every item's outcome (W6).",
        gate=Gate.STORE,
        links=(Link("task", {"task_id": "$response.body#/data/task_id"}),),
    )
    recall = Operation(
        "recall",
        "recall",
        RecallRequest,
        RecallResponse,
        Access.RECALL,
        "The memories most relevant to a query, ranked (R1-R6); 20001 when none is.",
        gate=Gate.RECALL,
        dispatch=Dispatch.RECALL,
        empty_is_miss=True,
    )
    update = Operation(
        "update",
        "update",
        UpdateRequest,
        MemoryView,
        Access.MEMORY,
        "Change one memory's content, tags, weight or importance (M1).",
        gate=Gate.ON,
        links=(
            Link("history", {"user_id": "$request.body#/user_id", "memory_id": "$request.body#/memory_id"}),
        ),
    )
    delete = Operation(
        "delete", "delete", DeleteRequest, DeleteResult, Access.MEMORY, "Soft-delete one memory (M2)."
    )
    batch_delete = Operation(
        "batch_delete",
        "batch_delete",
        BatchDeleteRequest,
        DeleteResult,
        Access.MEMORY,
        "Soft-delete many memories of one user (M2).",
    )
    history = Operation(
        "history",
        "history",
        HistoryRequest,
        HistoryResponse,
        Access.MEMORY,
        "One memory's change chain (M3).",
    )
    change_log = Operation(
        "change_log",
        "change_log",
        ChangeLogRequest,
        ChangeLogPage,
        Access.CHANGE_LOG,
        "A user's changes, newest first, a page at a time (M3).",
    )
    profile = Operation(
        "profile",
        "profile",
        ProfileRequest,
        UserProfile,
        Access.RECALL,
        "The user's derived profile: the strongest current facts by kind, global and one app's (L7).",
        gate=Gate.RECALL,
    )
    session_close = Operation(
        "session_close",
        "session/close",
        SessionCloseRequest,
        SessionCloseResult,
        Access.APP,
        "Close a session: promote its valuable memories, drop the rest, keep a continuity memory (L6).",
        gate=Gate.STORE,
    )
    restore = Operation(
        "restore",
        "restore",
        RestoreRequest,
        MemoryView,
        Access.MEMORY,
        "Bring an archived memory back to ACTIVE (L2).",
    )
    user_list = Operation(
        "user_list",
        "user/list",
        UserListRequest,
        UserListPage,
        Access.ADMIN,
        "A user's memories by dimension, a page at a time (C7).",
    )
    user_purge = Operation(
        "user_purge",
        "user/purge",
        UserPurgeRequest,
        PurgeResult,
        Access.ADMIN,
        "Forget all of a user, or one app, or one level, for good (C7, P2).",
    )
    user_switch = Operation(
        "user_switch",
        "user/switch",
        UserSwitchRequest,
        SwitchState,
        Access.ADMIN,
        "Turn a user's memory, or one app's, on or off; without enabled, read the switches (C7, P1).",
    )
    user_export = Operation(
        "user_export",
        "user/export",
        UserExportRequest,
        TaskAccepted,
        Access.ADMIN,
        "Start an export of a user's memories; download it when its task is DONE (C7).",
        links=(Link("task", {"task_id": "$response.body#/data/task_id"}),),
    )
    user_import = Operation(
        "user_import",
        "user/import",
        UserImportRequest,
        ImportResult,
        Access.ADMIN,
        "Store exported lines for a user (C7).",
    )
    quarantine_list = Operation(
        "quarantine_list",
        "quarantine/list",
        QuarantineListRequest,
        QuarantinePage,
        Access.ADMIN,
        "Memories held for review as possible poisoning, of one user or of all, oldest first (C12, P5).",
        # Without a user_id the list spans every user: any shard reads the shared metadata store.
        dispatch=Dispatch.ANY_SHARD,
    )
    quarantine_release = Operation(
        "quarantine_release",
        "quarantine/release",
        QuarantineDecisionRequest,
        QuarantineResult,
        Access.ADMIN,
        "Release held memories: they become ACTIVE through normal admission and recallable (C12).",
    )
    quarantine_delete = Operation(
        "quarantine_delete",
        "quarantine/delete",
        QuarantineDecisionRequest,
        QuarantineResult,
        Access.ADMIN,
        "Delete held memories (soft delete, as delete) (C12).",
    )


OPERATIONS: tuple[Operation[Any, Any], ...] = tuple(
    value for value in vars(Operations).values() if isinstance(value, Operation)
)
BY_NAME: Mapping[str, Operation[Any, Any]] = {op.name: op for op in OPERATIONS}
# Routes outside the table (a streamed answer, not an envelope) and who may call them.
UNTABLED_ACCESS: Mapping[str, Access] = {"user/export/download": Access.ADMIN}
ACCESS_BY_PATH: Mapping[str, Access] = {
    **{op.path: op.access for op in OPERATIONS},
    **UNTABLED_ACCESS,
}
