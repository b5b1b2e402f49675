"""The shard's write path alone, in one process (no Serve, no HTTP):

    python -m engram.loadtest.bench_write_path [--writes 600] [--callers 16] [--users 50] [--batch 0]

Single async ``add_structured`` accepts from ``--callers`` coroutines (acks/s, ack p50/p99), then
every task to DONE (DONE/s); with ``--batch N``, ``add_structured_batch`` of N items instead
(memories/s). What the shard could do if it had a core to itself; compare with bench_writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from engram.models.api import AddStructuredRequest
from engram.models.settings import Settings
from engram.serve.memory_core import build_core
from engram.storage.stores import open_stores


def _request(n: int, users: int) -> AddStructuredRequest:
    return AddStructuredRequest(
        user_id=f"u{n % users}",
        ownership="USER",
        mem_type="SEMANTIC",
        content=f"Note {n}: locker {n * 7919 % 1_000_000:06d} is on floor {n % 9}.",
    )


async def bench(writes: int, callers: int, users: int, batch: int) -> dict[str, Any]:
    """Run the benchmark on fresh stores in a temporary directory."""
    data_dir = tempfile.mkdtemp(prefix="engram-bench-")
    settings = Settings(storage={"data_dir": data_dir})
    stores = await open_stores(settings)
    core = build_core(settings, stores)
    service, write_path = core.service, core.write_path
    try:
        await write_path.accept_structured(_request(-1, users))  # weights loaded, tables warm
        await write_path.drain()
        if batch:
            started = time.perf_counter()
            for b in range(max(1, writes // batch)):
                await service.add_structured_batch([_request(b * batch + i, 1) for i in range(batch)])
            seconds = time.perf_counter() - started
            return {"batch": batch, "memories_per_s": round(max(1, writes // batch) * batch / seconds, 1)}
        pending = iter(range(writes))
        latencies: list[float] = []

        async def caller() -> None:
            for n in pending:
                sent = time.perf_counter()
                await write_path.accept_structured(_request(n, users))
                latencies.append(time.perf_counter() - sent)

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        acked = time.perf_counter() - started
        await write_path.drain()
        done = time.perf_counter() - started
        latencies.sort()
        return {
            "acks_per_s": round(writes / acked, 1),
            "ack_p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
            "ack_p99_ms": round(1000 * latencies[int(0.99 * len(latencies))], 1),
            "done_per_s": round(writes / done, 1),
        }
    finally:
        await write_path.close()
        await service.drain()
        await stores.close()
        shutil.rmtree(data_dir, ignore_errors=True)  # each run left its stores in /tmp


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures as one JSON line."""
    parser = argparse.ArgumentParser(
        prog="engram.loadtest.bench_write_path", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--writes", type=int, default=600)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--batch", type=int, default=0, help="items per batch (0: single async writes)")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(bench(args.writes, args.callers, args.users, args.batch))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
