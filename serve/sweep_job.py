"""The lifecycle job's entry in the serving layer: the shard actors it sweeps through, started when
the app is not running, and ``python -m engram.serve.sweep_job [--dry-run]`` for ``ray job submit`` and the
RayCronJob in ``cluster/`` (the job itself is ``lifecycle.job``)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import ray

from engram.lifecycle.job import JobReport, run_job
from engram.models.settings import Settings, load_settings
from engram.serve.shard import ShardActor, shard_options


def ensure_shards(settings: Settings) -> list[Any]:
    """The app's shard actors, started (detached, as the app would) when the app is not running."""
    # Shards started here (no app running) have no extraction deployment to call; sweeps never
    # extract, and a running app's shards are found by name and keep their own settings.
    own = settings.model_copy(deep=True)
    own.serve.extraction_replicas = 0
    shards = [
        ShardActor.options(**shard_options(settings, i)).remote(own, i)  # type: ignore[attr-defined]
        for i in range(settings.serve.shard_count)
    ]
    ray.get([s.ready.remote() for s in shards])
    return shards


def run_reporting(settings: Settings, *, dry_run: bool) -> JobReport:
    """Run the job over the app's shards (started when absent), one JSON line per partition."""
    return run_job(
        settings,
        prepare=ensure_shards,
        dry_run=dry_run,
        on_partition=lambda p: print(json.dumps({"partition": p.partition, **p.counts}), flush=True),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.serve.sweep_job``: the sweep job on the current Ray cluster, and its report."""
    parser = argparse.ArgumentParser(
        prog="engram.serve.sweep_job", description="Run Engram's lifecycle sweeps once."
    )
    parser.add_argument("--config", help="YAML settings file (default: $ENGRAM_CONFIG)")
    parser.add_argument("--dry-run", action="store_true", help="count what would change, change nothing")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    settings = load_settings(args.config)
    ray.init(address=os.environ.get("RAY_ADDRESS"), namespace="serve", log_to_driver=False)
    try:
        report = run_reporting(settings, dry_run=args.dry_run)
    finally:
        ray.shutdown()
    print(report.to_json())
    return 1 if report.totals.get("failed_users") else 0


if __name__ == "__main__":
    sys.exit(main())
