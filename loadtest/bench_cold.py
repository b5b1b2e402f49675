"""``engram bench cold``: a user's first recall (answered cold, from its nearest memories, or by
loading the snapshot of a user with few: ``recall.cold_min_memories``) beside
its next (its snapshot held) and beside a recall that loads the whole snapshot first (the path
before #30), by how many memories the user has. One process over the embedded default's stores, no
HTTP: the pipeline's own cost. The recaller holds one snapshot here, so every first recall of a user
is cold; each user is recalled cold, warm and loading, ``--rounds`` times.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.models.api import RecallRequest
from engram.models.settings import Settings
from engram.serve.heap import freeze_long_lived
from engram.serve.memory_core import build_recaller
from engram.storage.stores import open_stores

QUERIES = ("what food do I like", "where did I travel", "which sports do I play", "what am I learning")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def measure(
    data_dir: Path, users: int, rounds: int, cold_min_memories: int | None = None
) -> dict[str, float]:
    """Cold, warm and loading recall times (ms) of ``users`` seeded users, ``rounds`` times each;
    ``cold_min_memories`` None keeps the default (a user that small is loaded, not answered cold)."""
    recall: dict[str, Any] = {"snapshot_cache_users": 1, "snapshot_admit_after": 1, "timeout_ms": 600_000}
    if cold_min_memories is not None:
        recall["cold_min_memories"] = cold_min_memories
    settings = Settings(storage={"data_dir": data_dir}, recall=recall)
    stores = await open_stores(settings)
    recaller = build_recaller(settings, stores.vectors, stores.embedder)
    # The path before #30, beside it: a recall that loads the user's whole snapshot first.
    loading = settings.model_copy(deep=True)
    loading.recall.cold_candidates = 0
    loader = build_recaller(loading, stores.vectors, stores.embedder)
    rng = random.Random(11)
    times: dict[str, list[float]] = {"cold": [], "warm": [], "load": []}
    try:
        await stores.embedder.embed(["warm the embedder up"])
        # As a Recall replica does once started (serve/app.py): a full collection walking the
        # start-up heap took 85-110 ms here, twelve times in 900 recalls, and was the cold p99.
        freeze_long_lived()
        full_collections = gc.get_stats()[2]["collections"]
        for _ in range(rounds):
            for user in range(users):
                request = RecallRequest(user_id=f"lt-{user}", query=rng.choice(QUERIES), min_relevance=0)
                for kind, where in (("cold", recaller), ("warm", recaller), ("load", loader)):
                    started = time.perf_counter()
                    await where.recall(request, hits=lambda *_: None)
                    times[kind].append((time.perf_counter() - started) * 1000)
                    # The cold recall started the user's snapshot loading: the next one finds it.
                    await where.snapshots.settled()
        full_collections = gc.get_stats()[2]["collections"] - full_collections
    finally:
        gc.unfreeze()  # a caller's heap (a test session) is collected as before
        await recaller.close()
        await loader.close()
        await stores.close()
    figures: dict[str, float] = {}
    for kind, values in times.items():
        figures[f"{kind}_p50_ms"] = round(percentile(values, 0.5), 1)
        figures[f"{kind}_p99_ms"] = round(percentile(values, 0.99), 1)
    figures["p99_ratio"] = round(percentile(times["cold"], 0.99) / percentile(times["warm"], 0.99), 2)
    figures["recalls_each"] = len(times["cold"])
    # How each was answered: cold (no snapshot), from a held snapshot, or by loading one.
    figures["answered_cold"] = recaller.snapshots.colds
    figures["answered_warm"] = recaller.snapshots.hits
    figures["first_loaded"] = recaller.snapshots.loads - recaller.snapshots.background_loads
    figures["loaded_first"] = loader.snapshots.loads
    # Cold recalls whose candidates the vector index gave (a Milvus server: actors.cold_index).
    figures["index_searches"] = getattr(recaller.index, "searches", 0)
    figures["full_collections"] = full_collections  # of the garbage collector, while measuring
    return figures


def seeded(cache: Path, users: int, memories: int) -> Path:
    """A data directory of ``users`` x ``memories`` (seeded once, in a child process: milvus-lite
    keeps its lock for the life of the process that opened the file)."""
    data_dir = cache / f"cold-{users}x{memories}"
    marker = data_dir / "seeded"
    if not marker.exists():
        print(f"seeding {users} users x {memories} memories ...", file=sys.stderr, flush=True)
        subprocess.run(  # noqa: S603 - our own module, fixed arguments
            [sys.executable, "-m", "engram.loadtest.seed", str(data_dir), str(users), str(memories)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        marker.write_text("ok")
    return data_dir


def main(argv: Sequence[str] | None = None) -> int:
    """``engram bench cold``: one JSON line of figures per size."""
    parser = argparse.ArgumentParser(prog="engram bench cold", description=__doc__)
    parser.add_argument("--sizes", default="100,500,2000", help="memories per user, comma-separated")
    parser.add_argument("--users", type=int, default=40, help="users seeded per size")
    parser.add_argument(
        "--measure-users",
        type=int,
        help="recall only the first N of the seeded users (default: all; a large store, a sample of it)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="cold + warm recalls of each user")
    parser.add_argument(
        "--seed-cache", type=Path, required=True, help="seeded data directories, kept and reused"
    )
    parser.add_argument(
        "--cold-min-memories",
        type=int,
        default=None,
        help="recall.cold_min_memories (default: the setting's default; 0 answers every first recall cold)",
    )
    args = parser.parse_args(argv)
    measured = min(args.users, args.measure_users or args.users)
    for size in (int(s) for s in args.sizes.split(",")):
        data_dir = seeded(args.seed_cache, args.users, size)
        figures: dict[str, Any] = {
            "memories": size,
            **asyncio.run(measure(data_dir, measured, args.rounds, args.cold_min_memories)),
        }
        print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
