"""Embeddings from any OpenAI-compatible ``POST {base_url}/embeddings`` server (vLLM, TEI, hosted).

Texts go in batches of ``batch_size``; a transient failure (timeout, connection error, HTTP 429 or
5xx) is retried with backoff, ``attempts`` in all, and then raised as ``EmbedderUnavailableError`` for
the whole call (falling back one by one would only multiply the wait on a server that is down). A
batch the server answers wrongly (malformed JSON, too few rows, another dimension, non-finite
values, a 4xx) is tried again one text at a time, and only the texts that still fail are reported
(``EmbeddingError``, W9). Neither texts nor answers are logged.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from engram.models.rules.retry import retry
from engram.storage.embedding_base import EmbedderUnavailableError, EmbeddingError, normalised


class _TransientError(Exception):
    """A failure that may pass: retried, then reported as EmbedderUnavailableError."""


class _BadAnswerError(Exception):
    """The server answered, but not with one finite vector per text of the expected dimension."""


class EmbedderDimensionError(RuntimeError):
    """The server's vectors are not of the configured dimension: refused at start."""


def request_body(model: str, texts: Sequence[str]) -> dict[str, Any]:
    """The embeddings request for these texts (float vectors, the server's own dimension)."""
    return {"model": model, "input": list(texts), "encoding_format": "float"}


def answer_rows(data: Any, count: int) -> list[list[float]]:
    """The vectors of an embeddings answer in input order; ``_BadAnswerError`` when it is not one per text."""
    try:
        items = sorted(data["data"], key=lambda item: int(item["index"]))
        rows = [item["embedding"] for item in items]
    except (KeyError, TypeError, ValueError):
        raise _BadAnswerError("answer has no data[].index / data[].embedding") from None
    if len(rows) != count or [int(item["index"]) for item in items] != list(range(count)):
        raise _BadAnswerError(f"answer holds {len(rows)} vectors for {count} texts")
    if not all(isinstance(row, list) and row for row in rows):
        raise _BadAnswerError("an embedding is not a list of numbers")
    return rows


class OpenAIEmbedder:
    """An ``Embedder`` backed by an OpenAI-compatible embeddings server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        dim: int = 0,
        batch_size: int = 64,
        timeout_s: float = 10.0,
        attempts: int = 3,
        first_delay_s: float = 0.2,
    ) -> None:
        """``dim`` 0: learnt from the server's first answer (``warm_up`` asks at start)."""
        if batch_size < 1 or attempts < 1:
            raise ValueError("batch_size and attempts must be at least 1")
        self.model_name = model
        self.dim = dim
        self._configured_dim = dim
        self._url = base_url.rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._batch_size = batch_size
        self._timeout = httpx.Timeout(timeout_s)
        self._attempts = attempts
        self._first_delay_s = first_delay_s
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def warm_up(self) -> None:
        """Ask the server for one vector now (blocking): it answers, and its dimension is the one
        configured; ``EmbedderDimensionError`` or ``EmbedderUnavailableError`` otherwise."""
        try:
            with httpx.Client(timeout=self._timeout, headers=self._headers) as client:
                response = client.post(self._url, json=request_body(self.model_name, ["dimension probe"]))
        except httpx.HTTPError as exc:
            raise EmbedderUnavailableError(
                f"embeddings server at {self._url}: {type(exc).__name__}"
            ) from None
        if response.status_code != 200:
            raise EmbedderUnavailableError(
                f"embeddings server at {self._url} answered HTTP {response.status_code}"
            )
        try:
            (row,) = answer_rows(response.json(), 1)
        except (_BadAnswerError, ValueError) as exc:
            raise EmbedderUnavailableError(f"embeddings server at {self._url}: {exc}") from None
        self._learn_dim(len(row))

    def _learn_dim(self, found: int) -> None:
        if self._configured_dim and found != self._configured_dim:
            raise EmbedderDimensionError(
                f"embedding model {self.model_name!r} answers {found}-d vectors, embedder.dim is "
                f"{self._configured_dim}: fix embedder.dim (and the collection it writes to)"
            )
        self.dim = found

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), dim), L2-normalised; see the module for failures."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.dim == 0:
            await asyncio.to_thread(self.warm_up)  # learns the dimension, or says why not
        batches = [list(texts[i : i + self._batch_size]) for i in range(0, len(texts), self._batch_size)]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        failed: list[int] = []
        start = 0
        for batch in batches:
            vectors = await self._try_batch(batch)
            if vectors is not None and vectors.shape[0] == len(batch):
                out[start : start + len(batch)] = vectors
            else:
                for offset, text in enumerate(batch):
                    single = await self._try_batch([text])
                    if single is None:
                        failed.append(start + offset)
                    else:
                        out[start + offset] = single[0]
            start += len(batch)
        if failed:
            raise EmbeddingError(failed, out)
        return out

    async def _try_batch(self, texts: list[str]) -> np.ndarray | None:
        """The batch's vectors, None when the server answered it wrongly; raises when it is down."""
        try:
            rows = await retry(
                lambda: self._post(texts),
                retry_on=(_TransientError,),
                attempts=self._attempts,
                first_delay_s=self._first_delay_s,
            )
        except _TransientError as exc:
            raise EmbedderUnavailableError(f"embeddings server at {self._url}: {exc}") from None
        except _BadAnswerError:
            return None
        if any(len(row) != self.dim for row in rows):
            return None
        try:
            return normalised(rows, len(texts), self.dim)
        except (ValueError, TypeError):
            return None

    async def _post(self, texts: list[str]) -> list[list[float]]:
        try:
            response = await self._http().post(self._url, json=request_body(self.model_name, texts))
        except httpx.HTTPError as exc:  # timeouts, refused and reset connections
            raise _TransientError(type(exc).__name__) from None
        if response.status_code == 429 or response.status_code >= 500:
            raise _TransientError(f"HTTP {response.status_code}")
        if response.status_code != 200:
            raise _BadAnswerError(f"HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise _BadAnswerError("answer is not JSON") from None
        rows = answer_rows(data, len(texts))
        if not all(isinstance(x, int | float) and math.isfinite(x) for row in rows for x in row):
            raise _BadAnswerError("an embedding holds a value that is not a finite number")
        return rows

    def _http(self) -> httpx.AsyncClient:
        # An AsyncClient belongs to the event loop it was first used on (one per replica or shard).
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(timeout=self._timeout, headers=self._headers)
            self._client_loop = loop
        return self._client

    async def close(self) -> None:
        """Close the HTTP connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
