"""Benchmark of the sweep job: ``python -m engram.loadtest.bench_lifecycle --users 100 --memories 1000``.

Seeds N users x M memories straight into fresh stores (ages spread over 120 days, some expired,
some deleted 40 days ago), then runs the Ray job twice as of one moment and prints one JSON line:
seconds and memories/s of the first run (which decays, archives, expires and purges) and of the
second (which must change nothing). Figures go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from engram.lifecycle.job import run_job
from engram.models.domain import Memory, utcnow
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status
from engram.models.hashing import content_hash
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.records import new_memory
from engram.models.settings import Settings
from engram.serve.sweep_job import ensure_shards
from engram.storage.stores import open_stores
from engram.storage.vectors import vector_record

_VECTOR_BATCH = 1000


async def seed(
    settings: Settings, users: int, per_user: int, now: datetime, rng: random.Random
) -> Counter[str]:
    """Write the memories, their change-log entries, counters and vectors; returns kinds seeded."""
    stores = await open_stores(settings)
    kinds: Counter[str] = Counter()
    dim = stores.embedder.dim
    vectors = np.random.default_rng(7)
    pending = []
    try:
        for u in range(users):
            user_id = f"bench-user-{u:05d}"
            async with stores.metadata.transaction() as tx:
                cipher = await tx.keys.cipher(user_id)
                active: list[Memory] = []
                for i in range(per_user):
                    born = now - timedelta(days=rng.uniform(0, 120))
                    content = f"Benchmark fact {i} of {user_id}"
                    memory = new_memory(
                        settings.weights,
                        user_id=user_id,
                        app_id="",
                        level=Level.GLOBAL,
                        session_id=None,
                        ownership=Ownership.USER,
                        mem_type=MemType.SEMANTIC,
                        content=content,
                        content_hash=content_hash(content, cipher.hash_key),
                        embedding_model=stores.embedder.model_name,
                        now=born,
                    )
                    roll = rng.random()
                    if roll < 0.05:
                        memory.expire_at = born + timedelta(days=1)
                    elif roll < 0.10:
                        memory.status = Status.DELETED
                        memory.deleted_at = now - timedelta(days=40)
                    await tx.memories.insert(memory)
                    await tx.changes.add(
                        memory, OpType.ADD, OpSource.USER, "benchmark", born, content_after=content
                    )
                    if memory.status is Status.ACTIVE:
                        active.append(memory)
                        pending.append(vector_record(memory, vectors.standard_normal(dim).astype(np.float32)))
                    kinds[memory.status.value] += 1
                await tx.counters.add(user_id, counter_deltas(active, +1))
            while len(pending) >= _VECTOR_BATCH:
                await stores.vectors.upsert(pending[:_VECTOR_BATCH])
                pending = pending[_VECTOR_BATCH:]
        if pending:
            await stores.vectors.upsert(pending)
    finally:
        await stores.close()
    return kinds


def _seed_sync(settings: Settings, users: int, per_user: int, now: datetime) -> Counter[str]:
    return asyncio.run(seed(settings, users, per_user, now, random.Random(42)))


def main(argv: list[str] | None = None) -> int:
    """Seed, run the job twice, print the figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="engram.loadtest.bench_lifecycle")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--memories", type=int, default=1000, help="memories per user")
    parser.add_argument("--partitions", type=int, default=4, help="parallel Ray tasks")
    parser.add_argument(
        "--data-dir", help="where the stores go (default: a temporary directory); reused once seeded"
    )
    # The distributed profile (cluster/distributed.yaml): PostgreSQL, a Milvus server, N shards.
    parser.add_argument("--database-url", default="", help="metadata database (default: SQLite)")
    parser.add_argument("--milvus-uri", default="", help="a Milvus server (default: milvus-lite)")
    parser.add_argument("--shards", type=int, default=1, help="shard actors (above 1 needs --milvus-uri)")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="engram-sweep-bench-"))
    settings = Settings(
        storage={"data_dir": data_dir, "database_url": args.database_url, "milvus_uri": args.milvus_uri},
        serve={"app_name": "engram-sweep-bench", "shard_count": args.shards},
        lifecycle={"job_partitions": args.partitions, "scheduler_enabled": False},
    )
    marker = data_dir / "seeded.json"
    if marker.exists():  # a data dir seeded by an earlier run: only the job is measured again
        seeded = json.loads(marker.read_text())
        now, kinds, seeded_s = (
            datetime.fromisoformat(seeded["now"]),
            Counter(seeded["kinds"]),
            seeded["seed_s"],
        )
    else:
        now = utcnow()
        started = time.perf_counter()
        # Seeded in a child process: milvus-lite keeps its data dir locked until the opening process
        # exits (close() does not release it), and the job's shard actor must open it next.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            kinds = pool.submit(_seed_sync, settings, args.users, args.memories, now).result()
        seeded_s = time.perf_counter() - started
        marker.write_text(json.dumps({"now": now.isoformat(), "kinds": kinds, "seed_s": seeded_s}))
    total = args.users * args.memories
    # Its own Ray, never a cluster that happens to run here (whose apps it would disturb).
    ray.init(address="local", namespace="serve", include_dashboard=False, log_to_driver=False)
    try:
        ensure_shards(settings)  # stores opened before the clock starts: the job's own time is measured
        first = run_job(settings, now=now + timedelta(days=1), prepare=ensure_shards)
        second = run_job(settings, now=now + timedelta(days=1), prepare=ensure_shards)
        for shard in ensure_shards(settings):
            ray.get(shard.close.remote())
    finally:
        ray.shutdown()
    print(
        json.dumps(
            {
                "memories": total,
                "users": args.users,
                "shards": args.shards,
                "metadata": settings.storage.database_url.split(":", 1)[0] or "sqlite",
                "vectors": "milvus server" if args.milvus_uri else "milvus-lite",
                "partitions": len(first.partitions),
                "seeded": dict(kinds),
                "seed_s": round(seeded_s, 1),
                "first_run_s": round(first.seconds, 2),
                "first_run_memories_per_s": round(total / first.seconds),
                "first_run_memories_per_min": round(60 * total / first.seconds),
                "first_run": first.totals,
                "partition_s": [round(p.seconds, 2) for p in first.partitions],
                "second_run_s": round(second.seconds, 2),
                "second_run_memories_per_s": round(total / second.seconds),
                "second_run_changes": sum(
                    v for k, v in second.totals.items() if k not in ("users", "failed_users")
                ),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
