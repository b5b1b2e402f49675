"""A deterministic OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 for embedder tests.

Each word of a text is hashed into one of ``dim`` buckets, so the same text always gets the same
vector and texts sharing words are close; ``fault(texts)`` may script a reply (a status, a delay, a
broken body) for a request instead. Built on the chat test server: real HTTP/1.1 with keep-alive.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import numpy as np

from tests.support.chat_server import ChatServer, Reply, chat_server


def hashed_vector(text: str, dim: int) -> list[float]:
    """The server's vector of ``text`` (not normalised; the embedder normalises)."""
    vector = np.full(dim, 0.01)
    for word in text.lower().split():
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % dim] += 1.0
    return [float(x) for x in vector]


def answer_body(texts: list[str], dim: int) -> dict[str, Any]:
    """An embeddings answer, its items shuffled: clients must order them by ``index``."""
    items = [
        {"object": "embedding", "index": i, "embedding": hashed_vector(t, dim)} for i, t in enumerate(texts)
    ]
    random.Random(len(texts)).shuffle(items)
    return {
        "object": "list",
        "data": items,
        "model": "hash",
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }


@asynccontextmanager
async def embedding_server(
    dim: int = 32, fault: Callable[[list[str]], Reply | None] | None = None, delay_s: float = 0.0
) -> AsyncIterator[ChatServer]:
    """Serve hashed embeddings of ``dim`` dimensions; ``server.bodies`` records every request."""

    def answer(body: dict[str, Any]) -> Reply:
        texts = list(body["input"])
        scripted = fault(texts) if fault is not None else None
        return scripted or Reply(raw=answer_body(texts, dim), delay_s=delay_s)

    async with chat_server(answer) as server:
        yield server
