"""The job's split into partitions and batches, and one partition's work (no Ray here)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.lifecycle.job import batches, partition, sweep_partition_body
from engram.lifecycle.plan import SweepCounts
from engram.lifecycle.sweeps import run_inline, sweep_users
from engram.models.rules.sharding import shard_of
from engram.models.settings import Settings

pytestmark = pytest.mark.unit


def test_partitions_are_stable_disjoint_and_complete() -> None:
    users = [f"user-{i}" for i in range(1000)]
    parts = partition(users, 4)
    assert sorted(u for p in parts for u in p) == sorted(users)
    assert all(150 < len(p) < 350 for p in parts)
    assert partition(list(reversed(users)), 4) == [list(reversed(p)) for p in parts]
    assert partition([], 3) == [[], [], []]


def test_batches() -> None:
    assert batches(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert batches([], 2) == []


def test_a_partition_sends_each_batch_to_the_shard_that_owns_its_users() -> None:
    settings = Settings(serve={"shard_count": 3}, lifecycle={"users_per_batch": 4})
    users = [f"u{i}" for i in range(20)]
    calls: list[tuple[int, list[str]]] = []

    def call(shard: int, batch: list[str]) -> SweepCounts:
        calls.append((shard, batch))
        return SweepCounts(users=len(batch), decayed=1)

    report = sweep_partition_body(2, users, datetime(2026, 1, 1, tzinfo=UTC), False, settings, call)
    assert all(shard_of(u, 3) == shard for shard, batch in calls for u in batch)
    assert all(len(batch) <= 4 for _, batch in calls)
    assert sorted(u for _, batch in calls for u in batch) == sorted(users)
    assert (report.partition, report.users, report.batches) == (2, 20, len(calls))
    assert report.counts["users"] == 20 and report.counts["decayed"] == len(calls)


def test_the_cli_offers_sweep_with_dry_run() -> None:
    from engram.serve.cli import build_parser
    from engram.serve.cli.maintenance import sweep

    args = build_parser().parse_args(["sweep", "--dry-run"])
    assert (args.func, args.dry_run, args.address) == (sweep, True, None)
    assert build_parser().parse_args(["sweep", "--address", "auto"]).dry_run is False


class _FlakySweeper:
    """Fails each user's first sweep, as SQLite does for a writer past its busy timeout."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def sweep_user(self, user_id: str, now: datetime, *, dry_run: bool = False) -> SweepCounts:
        self.calls[user_id] = self.calls.get(user_id, 0) + 1
        if self.calls[user_id] == 1 or user_id == "always-fails":
            raise OSError("database is locked")
        return SweepCounts(users=1, decayed=2)


async def test_a_failed_user_is_retried_and_a_hopeless_one_reported() -> None:
    sweeper = _FlakySweeper()
    counts = await sweep_users(
        sweeper,  # type: ignore[arg-type]
        ["a", "b", "always-fails"],
        datetime(2026, 1, 1, tzinfo=UTC),
        run_inline,
        retry_delay_s=0,
    )
    assert (counts.users, counts.decayed, counts.failed_users) == (2, 4, 1)
    assert counts.failures == ["always-fails: OSError"]
    assert sweeper.calls == {"a": 2, "b": 2, "always-fails": 3}
