"""The in-process write-path benchmark runs and reports what it measured (docs/benchmarks.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from engram.loadtest.bench_write_path import bench

pytestmark = pytest.mark.integration


def _bench_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("engram-bench-*"))


async def test_single_writes_and_batches_report_their_rates() -> None:
    before = _bench_dirs()
    single = await bench(writes=24, callers=4, users=5, batch=0)
    assert single["acks_per_s"] > 0 and single["done_per_s"] > 0
    assert single["ack_p50_ms"] <= single["ack_p99_ms"]
    batched = await bench(writes=20, callers=1, users=1, batch=10)
    assert batched["memories_per_s"] > 0
    # Each run's stores go with it (every CI run left two directories in /tmp).
    assert _bench_dirs() == before
