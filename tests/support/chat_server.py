"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for engine tests.

The test supplies ``answer(body) -> Reply``; the server speaks real HTTP/1.1 (keep-alive) so the
engine under test runs its real client code.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    """What the server sends back: a completion's content (or a raw body), a status, a delay."""

    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    raw: Any = None


def completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    """A chat.completion body whose one choice says ``content``."""
    return {
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
        ],
    }


@dataclass
class ChatServer:
    """Records request bodies; answers each with the scripted reply."""

    answer: Callable[[dict[str, Any]], Reply | Awaitable[Reply]]
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = {
                    k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = json.loads(await reader.readexactly(int(headers["content-length"])))
                self.bodies.append(body)
                self.headers.append(headers)
                answered = self.answer(body)
                reply = await answered if inspect.isawaitable(answered) else answered
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                payload = reply.raw if reply.raw is not None else completion(reply.content or "")
                data = json.dumps(payload).encode()
                writer.write(
                    f"HTTP/1.1 {reply.status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def chat_server(
    answer: Callable[[dict[str, Any]], Reply | Awaitable[Reply]],
) -> AsyncIterator[ChatServer]:
    """Serve ``answer`` on a free loopback port for the duration of the block."""
    server = ChatServer(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1"
    try:
        yield server
    finally:
        listener.close()
        await listener.wait_closed()


def is_extraction(body: dict[str, Any]) -> bool:
    """True for an extraction request (its schema asks for ``facts``)."""
    schema = body["response_format"]["json_schema"]["schema"]
    return "facts" in schema.get("properties", {})
