"""The lifecycle sweep as a Ray job (L2, DESIGN decision 10): users split into partitions, one Ray
task per partition, each task handing batches of its users to the shard actors that own them.

Mutations run on each user's mailbox inside the owning shard (never beside it), so the job cannot
race the app's writes; with the embedded milvus-lite the shard is also the only process that may
open the vector file. A task reports progress after every batch (log line) and returns its counts;
the driver reports each partition as it finishes. Rerunning an interrupted job is safe: every step
is conditioned on the state it was decided from (``lifecycle.sweeps``).

The shards are the app's (``serve``, a layer above): the caller passes ``prepare``, which makes
sure they run. Entry points, all in ``serve``: ``python -m engram.serve.sweep_job [--dry-run]`` (``ray job
submit``, the RayCronJob in ``cluster/``), ``engram sweep``, and the in-app scheduler.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import ray

from engram.lifecycle.plan import SweepCounts
from engram.models.domain import utcnow
from engram.models.settings import Settings
from engram.storage.database import create_engine
from engram.storage.sweep_queries import user_ids_page

log = logging.getLogger(__name__)

_USER_PAGE = 10_000


def partition(user_ids: Sequence[str], parts: int) -> list[list[str]]:
    """Split users into ``parts`` stable partitions (a hash of the id, the same in every run)."""
    buckets: list[list[str]] = [[] for _ in range(parts)]
    for user_id in user_ids:
        digest = hashlib.blake2b(user_id.encode(), digest_size=8, person=b"engram-sweep").digest()
        buckets[int.from_bytes(digest, "big") % parts].append(user_id)
    return buckets


def batches(user_ids: Sequence[str], size: int) -> list[list[str]]:
    """Consecutive batches of at most ``size`` users."""
    return [list(user_ids[i : i + size]) for i in range(0, len(user_ids), size)]


async def list_users(settings: Settings) -> list[str]:
    """Every user holding memories, in id order (read in pages; no content is read)."""
    storage = settings.storage
    engine = create_engine(storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms)
    users: list[str] = []
    try:
        while True:
            async with engine.connect() as conn:
                page = await user_ids_page(conn, after=users[-1] if users else None, limit=_USER_PAGE)
            users.extend(page)
            if len(page) < _USER_PAGE:
                return users
    finally:
        await engine.dispose()


@dataclass
class PartitionReport:
    """What one Ray task did: its partition, users, batches, counts and time."""

    partition: int
    users: int
    batches: int
    seconds: float
    counts: dict[str, int]
    failures: list[str] = field(default_factory=list)


@dataclass
class JobReport:
    """The whole run: per-partition reports and the totals."""

    now: datetime
    dry_run: bool
    partitions: list[PartitionReport]
    totals: dict[str, int]
    seconds: float

    def to_json(self) -> str:
        """The report as one JSON document (counts only, never content)."""
        return json.dumps(
            {
                "now": self.now.isoformat(),
                "dry_run": self.dry_run,
                "seconds": round(self.seconds, 3),
                "totals": self.totals,
                "partitions": [p.__dict__ for p in self.partitions],
            }
        )


def sweep_partition_body(
    index: int,
    user_ids: Sequence[str],
    now: datetime,
    dry_run: bool,
    settings: Settings,
    call: Callable[[int, list[str]], SweepCounts],
) -> PartitionReport:
    """One task's work: its users grouped by owning shard, in batches; ``call(shard, batch)`` sweeps."""
    # The shards live in ``serve``; the job drives them, so it names them the way the app does.
    from engram.models.rules.sharding import shard_of

    started = time.perf_counter()
    total = SweepCounts()
    by_shard: dict[int, list[str]] = {}
    for user_id in user_ids:
        by_shard.setdefault(shard_of(user_id, settings.serve.shard_count), []).append(user_id)
    done = sent = 0
    for shard, owned in sorted(by_shard.items()):
        for batch in batches(owned, settings.lifecycle.users_per_batch):
            total.add(call(shard, batch))
            done += len(batch)
            sent += 1
            log.info(
                "sweep partition %d: %d/%d users%s %s",
                index,
                done,
                len(user_ids),
                " (dry run)" if dry_run else "",
                total.as_dict(),
            )
    return PartitionReport(
        partition=index,
        users=len(user_ids),
        batches=sent,
        seconds=time.perf_counter() - started,
        counts=total.as_dict(),
        failures=total.failures[:20],
    )


@ray.remote(num_cpus=0.1, max_retries=3)
def sweep_partition(
    index: int, user_ids: list[str], now: datetime, dry_run: bool, settings: Settings
) -> PartitionReport:
    """The Ray task of one partition (retried by Ray if its worker dies: the sweep is idempotent)."""
    from engram.models.rules.sharding import shard_name

    logging.basicConfig(level=logging.INFO)
    handles: dict[int, Any] = {}

    def call(shard: int, batch: list[str]) -> SweepCounts:
        if shard not in handles:
            handles[shard] = ray.get_actor(shard_name(settings.serve.app_name, shard), namespace="serve")
        counts: SweepCounts = ray.get(handles[shard].sweep_users.remote(batch, now, dry_run))
        return counts

    return sweep_partition_body(index, user_ids, now, dry_run, settings, call)


def run_job(
    settings: Settings,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    users: Sequence[str] | None = None,
    on_partition: Callable[[PartitionReport], None] | None = None,
    prepare: Callable[[Settings], object] | None = None,
) -> JobReport:
    """Sweep every user (or only ``users``) once as of ``now`` (default: the current time).

    Ray must be initialised and the app's shard actors reachable by name; ``prepare(settings)``
    runs first (``serve.sweep_job.ensure_shards`` starts them when the app is not running).
    """
    started = time.perf_counter()
    now = now or utcnow()
    if prepare is not None:
        prepare(settings)
    users = list(users) if users is not None else asyncio.run(list_users(settings))
    parts = partition(users, settings.lifecycle.job_partitions)
    pending = [
        sweep_partition.remote(i, part, now, dry_run, settings) for i, part in enumerate(parts) if part
    ]
    reports: list[PartitionReport] = []
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        report: PartitionReport = ray.get(ready[0])
        reports.append(report)
        if on_partition is not None:
            on_partition(report)
    totals = SweepCounts()
    for report in reports:
        for name, value in report.counts.items():
            setattr(totals, name, getattr(totals, name) + value)
    reports.sort(key=lambda r: r.partition)
    return JobReport(now, dry_run, reports, totals.as_dict(), time.perf_counter() - started)
