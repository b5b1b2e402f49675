"""Engram's memory tools for agents over the Model Context Protocol (#14).

One ``MCPServer`` whose tools are Engram's operations, run through a typed client: on the Serve
app (``serve.mcp_routes``: streamable HTTP at ``/mcp``) the client calls the same app's HTTP routes
in process with the caller's API key, so identity, tenancy, switches, limits and validation are
exactly the HTTP contract's; ``engram mcp`` (stdio, for desktop agents) calls a running Engram over
HTTP. Every refusal is a tool error that starts with Engram's code (``40301 memory is switched
off ...``), so an agent can tell a switched-off user from a bad argument.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError

from engram.models.api import (
    AddRequest,
    DeleteRequest,
    DeleteResult,
    HistoryRequest,
    HistoryResponse,
    MemoryView,
    RecallFilter,
    RecallRequest,
    RecallResponse,
    RecallScope,
    SessionCloseRequest,
    SessionCloseResult,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
    UserListRequest,
)
from engram.models.enums import MemType
from engram.models.privacy import UserListPage
from engram.serve.client import AsyncEngramClient
from engram.serve.client_calls import EngramApiError

INSTRUCTIONS = (
    "Long-term memory for one user across conversations. Store what the user tells you that will "
    "matter later with add_memory (facts are extracted and merged with what is known, in the "
    "background); before answering, look things up with search_memories. Memories are private "
    "to their user: always pass the same user_id for the same person."
)

# The caller's credentials: the Authorization or X-API-Key header of an HTTP request, with its
# X-Forwarded-For and its connection's peer address under CLIENT (empty on stdio).
Credentials = dict[str, str]
CLIENT = ":client"
"""Where ``Credentials`` keep the peer address (not a header name: no request can send it)."""
# Opens a client that acts with the given credentials.
ClientFactory = Callable[[Credentials], AbstractAsyncContextManager[AsyncEngramClient]]
# The user a key is bound to, if any (lets a personal agent's key omit user_id).
BoundUser = Callable[[Credentials], str | None]

UserId = Annotated[
    str | None,
    Field(description="Whose memory: a stable id of the person (omit only with a key bound to one user)."),
]
AppId = Annotated[str | None, Field(description="The app or agent the memory belongs to (omit for global).")]
MemoryIdArg = Annotated[
    str, Field(description="A memory id as returned by search_memories or list_memories.")
]


class ChatTurn(BaseModel):
    """One message of a conversation handed to add_memory (a tool's output: role "tool", kept
    apart from the user's own words and quarantined when it tries to instruct the agent)."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str


class TaskState(BaseModel):
    """An accepted write: poll get_task with its id until status is DONE."""

    task_id: str


def credentials_of(ctx: Context | None) -> Credentials:
    """The caller's API key headers and address, as received over HTTP (nothing on stdio)."""
    headers = getattr(ctx, "headers", None) if ctx is not None else None
    if headers is None:
        return {}
    names = ("authorization", "x-api-key", "x-forwarded-for")
    credentials = {name: headers[name] for name in names if headers.get(name)}
    # Failed keys are throttled per client address: the in-process calls act from the caller's.
    peer = getattr(getattr(getattr(ctx, "request_context", None), "request", None), "client", None)
    if peer is not None and getattr(peer, "host", None):
        credentials[CLIENT] = str(peer.host)
    return credentials


def build_mcp_server(clients: ClientFactory, bound_user: BoundUser | None = None) -> MCPServer:
    """The MCP server whose tools act through clients opened by ``clients``."""
    server = MCPServer("engram", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")

    @asynccontextmanager
    async def engram(ctx: Context | None) -> AsyncIterator[AsyncEngramClient]:
        async with clients(credentials_of(ctx)) as client:
            try:
                yield client
            except EngramApiError as exc:
                raise ToolError(f"{exc.code} {exc.msg}") from None
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ToolError(f"40001 bad parameter: {problems}") from None

    def who(ctx: Context | None, user_id: str | None) -> str:
        if user_id:
            return user_id
        bound = bound_user(credentials_of(ctx)) if bound_user is not None else None
        if bound is None:
            raise ToolError("40001 bad parameter: user_id is required (this key is not bound to a user)")
        return bound

    @server.tool(
        description=(
            "Remember something about the user. Give either `text` (what the user said) or `messages` "
            "(a conversation). Facts are extracted and reconciled with existing memories in the "
            "background; returns a task_id to check with get_task."
        )
    )
    async def add_memory(
        ctx: Context,
        user_id: UserId = None,
        text: Annotated[str | None, Field(description="What the user said, as one user message.")] = None,
        messages: Annotated[list[ChatTurn] | None, Field(description="A conversation, oldest first.")] = None,
        app_id: AppId = None,
        session_id: Annotated[str | None, Field(description="The conversation's session id.")] = None,
    ) -> TaskState:
        turns = [t.model_dump() for t in messages or []]
        if text:
            turns.append({"role": "user", "content": text})
        if not turns:
            raise ToolError("40001 bad parameter: give text or messages")
        async with engram(ctx) as client:
            request = AddRequest.model_validate(
                {"user_id": who(ctx, user_id), "app_id": app_id, "session_id": session_id, "messages": turns}
            )
            accepted: TaskAccepted = await client.add(request)
        return TaskState(task_id=accepted.task_id)

    @server.tool(description="The state of a write started by add_memory: PENDING, RUNNING, DONE or FAILED.")
    async def get_task(
        ctx: Context, task_id: Annotated[str, Field(description="From add_memory.")]
    ) -> TaskView:
        async with engram(ctx) as client:
            return await client.task(TaskRequest(task_id=task_id))

    @server.tool(
        description=(
            "Find the user's memories most relevant to a question, best first, with their relevance "
            "and score, the memory ids and when each fact became true (valid_at). `hit` is false "
            "when nothing relevant is known."
        )
    )
    async def search_memories(
        ctx: Context,
        query: Annotated[str, Field(description="The question or topic, in any language.")],
        user_id: UserId = None,
        top_k: Annotated[int, Field(description="How many memories at most.", ge=1, le=100)] = 10,
        app_id: AppId = None,
        mem_types: Annotated[
            list[MemType] | None, Field(description="Only these kinds of memory (empty: all).")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Only memories with any of these tags.")] = None,
    ) -> RecallResponse:
        async with engram(ctx) as client:
            request = RecallRequest(
                user_id=who(ctx, user_id),
                query=query,
                top_k=top_k,
                scope=RecallScope(app_id=app_id),
                filter=RecallFilter(mem_type=mem_types or [], custom_tags=tags or []),
            )
            return await client.recall(request)

    @server.tool(
        description="The user's memories, a page at a time (needs an admin key or one bound to the user)."
    )
    async def list_memories(
        ctx: Context,
        user_id: UserId = None,
        app_id: AppId = None,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> UserListPage:
        async with engram(ctx) as client:
            request = UserListRequest(user_id=who(ctx, user_id), app_id=app_id, cursor=cursor, limit=limit)
            return await client.user_list(request)

    @server.tool(description="One memory with all its metadata.")
    async def get_memory(ctx: Context, memory_id: MemoryIdArg, user_id: UserId = None) -> MemoryView:
        async with engram(ctx) as client:
            history = await client.history(HistoryRequest(user_id=who(ctx, user_id), memory_id=memory_id))
        return history.memory

    @server.tool(description="Correct a memory's text, or mark it important, or replace its tags.")
    async def update_memory(
        ctx: Context,
        memory_id: MemoryIdArg,
        user_id: UserId = None,
        content: Annotated[str | None, Field(description="The corrected text.")] = None,
        is_important: Annotated[bool | None, Field(description="Important memories never fade.")] = None,
        tags: Annotated[list[str] | None, Field(description="The memory's new tags.")] = None,
    ) -> MemoryView:
        changes: dict[str, Any] = {"content": content, "is_important": is_important, "custom_tags": tags}
        async with engram(ctx) as client:
            request = UpdateRequest.model_validate(
                {
                    "user_id": who(ctx, user_id),
                    "memory_id": memory_id,
                    **{k: v for k, v in changes.items() if v is not None},
                }
            )
            return await client.update(request)

    @server.tool(description="Forget one memory (it leaves recall at once).")
    async def delete_memory(ctx: Context, memory_id: MemoryIdArg, user_id: UserId = None) -> DeleteResult:
        async with engram(ctx) as client:
            return await client.delete(DeleteRequest(user_id=who(ctx, user_id), memory_id=memory_id))

    @server.tool(description="How a memory came to be: every change, oldest first, and what replaced it.")
    async def memory_history(ctx: Context, memory_id: MemoryIdArg, user_id: UserId = None) -> HistoryResponse:
        async with engram(ctx) as client:
            return await client.history(HistoryRequest(user_id=who(ctx, user_id), memory_id=memory_id))

    @server.tool(
        description=(
            "Close a conversation session: its valuable memories are kept for good, the rest "
            "dropped, and a short continuity memory is kept when to_be_continued."
        )
    )
    async def close_session(
        ctx: Context,
        session_id: Annotated[str, Field(description="The session to close.")],
        user_id: UserId = None,
        app_id: AppId = None,
        to_be_continued: bool = False,
    ) -> SessionCloseResult:
        async with engram(ctx) as client:
            request = SessionCloseRequest(
                user_id=who(ctx, user_id),
                app_id=app_id,
                session_id=session_id,
                to_be_continued=to_be_continued,
            )
            return await client.session_close(request)

    return server


TOOL_NAMES = (
    "add_memory",
    "get_task",
    "search_memories",
    "list_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "memory_history",
    "close_session",
)
