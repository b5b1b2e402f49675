"""Durable vector index behind a small interface (DESIGN decision 4), Milvus / milvus-lite by default.

Scope ids are stored and matched as hashes; the filter expressions are built in
``storage/vector_filters.py`` (SPEC P4).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlparse

import numpy as np
from pymilvus import DataType, MilvusClient

from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership
from engram.storage import lite_server
from engram.storage.lite_compaction import compact_lite
from engram.storage.vector_filters import (
    KEY_LEN,
    VectorScope,
    checked_ids,
    eq,
    optional_key,
    scope_filter,
    user_key,
)

_T = TypeVar("_T")

_SERVER_SCHEMES = frozenset({"http", "https", "tcp", "grpc", "unix"})
# Milvus refuses a larger topk on a server; milvus-lite accepts it but a user never has that many rows.
_MAX_TOPK = 16384
# milvus-lite scans unflushed rows one by one (~45 us per row per search, measured) but sealed ones
# in bulk, so writes are flushed once this many rows are pending; a flush of ~100 rows takes ~20 ms.
DEFAULT_LITE_FLUSH_ROWS = 256
# Bounds each get/delete request well below Milvus's per-query result and message limits.
_ID_CHUNK = 1000

_ENUM_LEN = 16


def is_server_uri(uri: str) -> bool:
    """Whether ``uri`` names a Milvus server (any process may search it) rather than a milvus-lite file."""
    return urlparse(uri).scheme.lower() in _SERVER_SCHEMES


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """One memory's vector and the scope fields a search filters on; ``app_id`` "" means global."""

    memory_id: str
    user_id: str
    app_id: str
    session_id: str | None
    level: Level
    ownership: Ownership
    mem_type: MemType
    vector: np.ndarray


def vector_record(memory: Memory, vector: np.ndarray) -> VectorRecord:
    """The vector-store record of a memory."""
    return VectorRecord(
        memory_id=memory.memory_id,
        user_id=memory.user_id,
        app_id=memory.app_id,
        level=memory.level,
        session_id=memory.session_id,
        ownership=memory.ownership,
        mem_type=memory.mem_type,
        vector=vector,
    )


class VectorStore(Protocol):
    """Async interface of the durable vector index."""

    async def start(self) -> None:
        """Open the store, creating and loading the collection as needed."""

    async def close(self) -> None:
        """Release the store; safe to call twice."""

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace the vectors of these memories in one batch."""

    async def delete(self, memory_ids: Sequence[str]) -> None:
        """Remove these memories' vectors; unknown ids are ignored."""

    async def search(self, vector: np.ndarray, scope: VectorScope, limit: int) -> list[tuple[str, float]]:
        """Nearest memories visible in ``scope`` as (memory_id, cosine similarity), best first."""

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of those ids that exist."""

    async def count(self, user_id: str | None = None) -> int:
        """Number of stored vectors, of one user or of everyone."""

    async def delete_user(self, user_id: str) -> None:
        """Remove every vector of one user."""

    async def memory_ids(self, user_id: str) -> list[str]:
        """Ids of every stored vector of one user (reconcile compares them with the metadata)."""


def _chunks(items: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    return (items[i : i + size] for i in range(0, len(items), size))


# --- Milvus implementation ---------------------------------------------------------------------------


class MilvusVectorStore:
    """VectorStore on a Milvus server (http(s) URI) or a milvus-lite file (a path ending in ``.db``)."""

    def __init__(
        self,
        uri: str,
        collection: str,
        dim: int,
        token: str = "",
        lite_flush_rows: int = DEFAULT_LITE_FLUSH_ROWS,
    ) -> None:
        if dim <= 0 or lite_flush_rows <= 0:
            raise ValueError("dim and lite_flush_rows must be positive")
        self._is_server = is_server_uri(uri)
        if not self._is_server and not uri.endswith(".db"):
            raise ValueError(f"milvus-lite path must end with .db: {uri}")
        self._uri = uri
        self._collection = collection
        self._dim = dim
        self._token = token
        self._lite_flush_rows = lite_flush_rows
        self._pending_rows = 0
        self._executor: ThreadPoolExecutor | None = None
        self._client: Any = None

    async def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        # One worker thread: milvus-lite wants one owner and serialized calls, and the loop never blocks.
        if self._executor is None:
            raise RuntimeError("vector store is not started")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def start(self) -> None:
        """Open the client, create the collection if missing, check its dim and load it."""
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-milvus")
        try:
            await self._call(self._open)
        except BaseException:
            await self.close()
            raise

    def _open(self) -> None:
        if not self._is_server:
            Path(self._uri).parent.mkdir(parents=True, exist_ok=True)
        self._client = MilvusClient(uri=self._uri, token=self._token)
        if not self._is_server:
            lite_server.opened(self._uri)
        if self._client.has_collection(self._collection):
            self._check_dim()
        else:
            self._create_collection()
        # Collections come back released after a restart.
        self._client.load_collection(self._collection)
        # Rows written but never flushed come back as a slow growing segment.
        self._flush_lite()

    def _flush_lite(self) -> None:
        # A Milvus server seals segments itself and rate-limits explicit flushes.
        if not self._is_server:
            self._client.flush(self._collection)
        self._pending_rows = 0

    def _create_collection(self) -> None:
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("memory_id", DataType.VARCHAR, max_length=64, is_primary=True)
        # No partition key on the user: the Milvus 2.3 server of the `distributed` extra routes an
        # upsert's rows to the wrong partitions, and a search filtered on the key then finds a few
        # of a user's 1,000 rows (measured: 16; inserts land right). docs/architecture.md.
        for field in ("user_key", "app_key", "session_key"):
            schema.add_field(field, DataType.VARCHAR, max_length=KEY_LEN)
        for field in ("level", "ownership", "mem_type"):
            schema.add_field(field, DataType.VARCHAR, max_length=_ENUM_LEN)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self._dim)
        index = self._client.prepare_index_params()
        # FLAT is exact under any filter; with COSINE the search distance is the cosine similarity.
        index.add_index(field_name="vector", index_type="FLAT", metric_type="COSINE")
        if self._is_server:
            self._client.create_collection(
                self._collection, schema=schema, index_params=index, consistency_level="Strong"
            )
            return
        # pymilvus waits for a new index by sleeping 0.5 s before its first look; a FLAT index on
        # an empty milvus-lite collection is ready at once (a fresh data directory, each test's
        # stores). The load that follows (``_open``) is what readers wait for.
        self._client.create_collection(self._collection, schema=schema, consistency_level="Strong")
        self._client.create_index(self._collection, index, sync=False)

    def _check_dim(self) -> None:
        described = self._client.describe_collection(self._collection)
        dims = [int(f["params"]["dim"]) for f in described["fields"] if f["name"] == "vector"]
        if dims != [self._dim]:
            found = dims[0] if dims else "none"
            raise RuntimeError(
                f"collection {self._collection!r} holds vectors of dim {found}, the embedder gives "
                f"{self._dim}: vectors of different embedding models must never be mixed; re-embed "
                "into a new collection"
            )

    async def close(self) -> None:
        """Close the client and stop the worker thread."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            if self._client is not None:
                await asyncio.get_running_loop().run_in_executor(executor, self._close_client)
        finally:
            executor.shutdown(wait=True)

    def _close_client(self) -> None:
        client = self._client
        try:
            if self._pending_rows:
                self._flush_lite()
        finally:
            self._client = None
            client.close()
            if not self._is_server:
                lite_server.closed(self._uri)

    def _row(self, record: VectorRecord) -> dict[str, Any]:
        vector = np.asarray(record.vector, dtype=np.float32)
        if vector.shape != (self._dim,) or not np.all(np.isfinite(vector)):
            raise ValueError(f"vector of memory {record.memory_id} must be {self._dim} finite floats")
        return {
            "memory_id": record.memory_id,
            "user_key": user_key(record.user_id),
            "app_key": optional_key(record.app_id),
            "session_key": optional_key(record.session_id),
            "level": Level(record.level).value,
            "ownership": Ownership(record.ownership).value,
            "mem_type": MemType(record.mem_type).value,
            "vector": vector.tolist(),
        }

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace the vectors of these memories in one batch."""
        checked_ids(r.memory_id for r in records)
        # The last record of a repeated id wins, as it would in sequential upserts.
        rows = list({r.memory_id: self._row(r) for r in records}.values())
        if rows:
            await self._call(self._write, "upsert", len(rows), data=rows)

    def _client_call(self, method: str, **kwargs: Any) -> Any:
        return getattr(self._client, method)(collection_name=self._collection, **kwargs)

    def _write(self, method: str, rows: int, **kwargs: Any) -> None:
        self._client_call(method, **kwargs)
        self._pending_rows += rows
        if self._pending_rows >= self._lite_flush_rows:
            self._flush_lite()

    async def delete(self, memory_ids: Sequence[str]) -> None:
        """Remove these memories' vectors; unknown ids are ignored."""
        for chunk in _chunks(checked_ids(memory_ids), _ID_CHUNK):
            await self._call(self._write, "delete", len(chunk), ids=list(chunk))

    async def search(
        self, vector: np.ndarray, scope: VectorScope, limit: int, consistency: str | None = None
    ) -> list[tuple[str, float]]:
        """Nearest memories visible in ``scope`` as (memory_id, cosine similarity), best first;
        ``consistency``: a Milvus consistency level for this search (default: the collection's)."""
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (self._dim,):
            raise ValueError(f"query vector must have shape ({self._dim},)")
        expr = scope_filter(scope)
        if limit <= 0 or expr is None:
            return []
        result = await self._call(
            self._client_call,
            "search",
            data=[query.tolist()],
            filter=expr,
            limit=min(limit, _MAX_TOPK),
            output_fields=["memory_id"],
            **({"consistency_level": consistency} if consistency else {}),
        )
        return [(str(hit.id), float(hit.distance)) for hit in result[0]]

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors (float32) of those ids that exist."""
        found: dict[str, np.ndarray] = {}
        for chunk in _chunks(checked_ids(memory_ids), _ID_CHUNK):
            rows = await self._call(
                self._client_call, "get", ids=list(chunk), output_fields=["memory_id", "vector"]
            )
            for row in rows:
                found[str(row["memory_id"])] = np.asarray(row["vector"], dtype=np.float32)
        return found

    async def count(self, user_id: str | None = None) -> int:
        """Number of stored vectors, of one user or of everyone."""
        expr = "" if user_id is None else eq("user_key", user_key(user_id))
        rows = await self._call(self._client_call, "query", filter=expr, output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    async def delete_user(self, user_id: str) -> None:
        """Remove every vector of one user."""
        expr = eq("user_key", user_key(user_id))
        await self._call(self._write, "delete", self._lite_flush_rows, filter=expr)

    async def compact(self) -> int | None:
        """Make deleted vectors leave the store's files (P8); segment files rewritten, None: unknown.

        milvus-lite: its segments holding deleted rows are rewritten here, in the owning process
        (``storage.lite_compaction``). A Milvus server is asked to compact; it drops deleted rows
        from sealed segments in the background and its own GC removes the old files later.
        """
        if self._is_server:
            await self._call(self._client_call, "compact")
            return None
        return await self._call(compact_lite, self._uri, self._collection)

    async def memory_ids(self, user_id: str) -> list[str]:
        """Ids of every stored vector of one user (reconcile compares them with the metadata)."""
        rows = await self._call(
            self._client_call,
            "query",
            filter=eq("user_key", user_key(user_id)),
            output_fields=["memory_id"],
            limit=_MAX_TOPK,
        )
        return [str(row["memory_id"]) for row in rows]
