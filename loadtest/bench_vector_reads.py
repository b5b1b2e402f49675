"""Where a cold snapshot load reads its vectors from, on the server profile: the sealed SQL copies,
or the Milvus server (by ids, by the user's partition key, at Strong or Session consistency).

``python -m engram.loadtest.bench_vector_reads --milvus-uri http://127.0.0.1:19530 --database-url
postgresql+asyncpg://postgres@127.0.0.1:5432/engram_bench --memories 100``: seeds one user's
memories through the real stores, then times each way of reading all of that user's vectors and
prints one JSON line of medians and p95s (milliseconds). Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

from engram.models.enums import Level, MemType, Ownership
from engram.models.ids import new_id
from engram.models.settings import Settings
from engram.storage import vector_copies
from engram.storage.stores import open_stores
from engram.storage.vector_filters import scope_key
from engram.storage.vectors import VectorRecord


async def _timed(fn: Callable[[], Awaitable[Any]], rounds: int) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
    }


async def run(settings: Settings, memories: int, rounds: int) -> dict[str, Any]:
    """Seed one user's vectors, then time every way of reading them back."""
    from pymilvus import MilvusClient

    stores = await open_stores(settings)
    user = f"bench-{new_id()[:8]}"
    rng = np.random.default_rng(3)
    records = [
        VectorRecord(new_id(), user, "", None, Level.GLOBAL, Ownership.USER, MemType.SEMANTIC, v)
        for v in rng.standard_normal((memories, stores.embedder.dim)).astype(np.float32)
    ]
    ids = [r.memory_id for r in records]
    try:
        await stores.vectors.upsert(records)  # the index, then the sealed copies

        async def copies() -> None:
            async with stores.metadata.transaction(readonly=True) as tx:
                assert len(await vector_copies.for_user(tx, user)) == memories

        client = MilvusClient(uri=settings.storage.milvus_uri)
        expr = f'user_key == "{scope_key(user)}"'

        def milvus_query(level: str) -> Callable[[], Awaitable[None]]:
            async def read() -> None:
                rows = await asyncio.to_thread(
                    client.query,
                    settings.storage.collection,
                    filter=expr,
                    output_fields=["vector"],
                    limit=memories,
                    consistency_level=level,
                )
                assert len(rows) == memories

            return read

        def milvus_get(level: str) -> Callable[[], Awaitable[None]]:
            async def read() -> None:
                rows = await asyncio.to_thread(
                    client.get,
                    settings.storage.collection,
                    ids=ids,
                    output_fields=["vector"],
                    consistency_level=level,
                )
                assert len(rows) == memories

            return read

        figures = {
            "sql_copies_for_user": await _timed(copies, rounds),
            "milvus_query_user_strong": await _timed(milvus_query("Strong"), rounds),
            "milvus_query_user_session": await _timed(milvus_query("Session"), rounds),
            "milvus_get_ids_strong": await _timed(milvus_get("Strong"), rounds),
            "milvus_get_ids_session": await _timed(milvus_get("Session"), rounds),
        }
        client.close()
        await stores.vectors.delete_user(user)
    finally:
        await stores.close()
    return {"memories": memories, "rounds": rounds, **figures}


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run, print one JSON line."""
    parser = argparse.ArgumentParser(prog="engram.loadtest.bench_vector_reads")
    parser.add_argument("--milvus-uri", required=True, help="a Milvus server")
    parser.add_argument("--database-url", required=True, help="PostgreSQL (or SQLite) metadata")
    parser.add_argument("--memories", type=int, default=100, help="one user's memories")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    settings = Settings(
        storage={
            "data_dir": Path(tempfile.mkdtemp(prefix="engram-vector-reads-")),
            "database_url": args.database_url,
            "milvus_uri": args.milvus_uri,
            "collection": "engram_vector_reads",
        }
    )
    print(json.dumps(asyncio.run(run(settings, args.memories, args.rounds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
