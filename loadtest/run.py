"""``engram loadtest``: seed, start the app when none answers, run locust headless, report figures.

Load generators run at nice 19 (Ray's processes run at nice 15, DESIGN's Ray facts). The last line
printed is one JSON object with the recall and /healthz percentiles read from locust's own stats.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from engram.loadtest.mix import DEFAULT_MIX, format_mix, parse_mix, total_rate
from engram.loadtest.otlp_sink import trace_receiver
from engram.loadtest.recall_replicas import recall_states, snapshot_figures, wait_for_warm_snapshots
from engram.loadtest.user_draw import parse_skew
from engram.models.settings import Settings
from engram.serve.http_front import LocalFront, free_port, prepare_local_front

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
SEED_MARKER = "engram-seed.json"
# Bumped whenever seeded data would differ (2: vector copies beside the metadata).
SEED_FORMAT = 2


def answers(url: str) -> bool:
    """True when an Engram app answers /healthz at ``url``."""
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def run(
    users: int,
    memories: int,
    recall_rps: float,
    duration_s: int,
    url: str | None,
    *,
    seed_cache: Path | None = None,
    mix: str = DEFAULT_MIX,
    http_front: str = "haproxy",
    niceness: int = 19,
    tracing: bool = False,
    skew: str = "uniform",
    snapshots: SnapshotBounds | None = None,
    recall_replicas: int = 1,
) -> dict[str, Any]:
    """Run one load test and return its figures (``recall_rps``: the offered recall rate, or the
    offered write rate of a mix without recall; ``niceness``: locust's, 19 so that it yields to
    the server it loads on the same machine; ``tracing``: the app it starts sends every span to
    an OTLP sink in this process, and ``spans`` counts them; ``skew``: whose memories each request
    is for, ``uniform`` or ``zipf:<s>``; ``snapshots``: the Recall replica's snapshot cache bounds
    in the app it starts, whose cold share, snapshot bytes and resident memory are reported;
    ``recall_replicas``: fixed Recall replicas of the app it starts)."""
    weights = parse_mix(mix)
    parse_skew(skew)
    started_here = None
    recall_before: list[dict[str, float]] = []
    recall_after: list[dict[str, float]] = []
    with trace_receiver() if tracing else contextlib.nullcontext() as sink:
        if url is None or not answers(url):
            endpoint = sink.endpoint if sink is not None else None
            started_here = start_app(
                users,
                memories,
                seed_cache,
                http_front,
                tracing_endpoint=endpoint,
                snapshots=snapshots,
                recall_replicas=recall_replicas,
            )
            url = started_here[0]
        try:
            offered = total_rate(weights, recall_rps)
            if started_here is not None:
                recall_before = recall_states(started_here[1].settings)
            stats = _locust(url, users, offered, duration_s, format_mix(weights), niceness, skew)
            if started_here is not None:
                recall_after = recall_states(started_here[1].settings)
        finally:
            if started_here is not None:
                stop_app(started_here[1])
        spans = len(sink.spans) if sink is not None else None
    # A light route of a short run may draw no request at all (Poisson); none at all is a failure.
    if not any(route in stats for route in weights):
        raise RuntimeError(f"locust made no request of the mix {format_mix(weights)}")
    recall, health, add = stats.get("recall", {}), stats.get("healthz", {}), stats.get("add", {})
    return {
        "mix": format_mix(weights),
        "routes": _per_route(stats),
        "users": users,
        "memories_per_user": memories,
        "offered_recall_rps": recall_rps,
        "duration_s": duration_s,
        "recall_p50_ms": recall.get("p50"),
        "recall_p95_ms": recall.get("p95"),
        "recall_p99_ms": recall.get("p99"),
        "recall_rps": recall.get("rps"),
        "recall_requests": recall.get("requests", 0),
        "healthz_p50_ms": health.get("p50"),
        "healthz_p99_ms": health.get("p99"),
        "add_p99_ms": add.get("p99"),
        "errors": int(sum(row["failures"] for name, row in stats.items() if name != "Aggregated")),
        "spans": spans,
        "skew": skew,
        **snapshot_figures(recall_before, recall_after),
    }


@dataclass(frozen=True)
class SnapshotBounds:
    """``recall.snapshot_cache_users`` and ``recall.snapshot_cache_bytes`` (in MiB) of the app a
    load test starts; None keeps the default (users: every seeded user, at least 1,000)."""

    users: int | None = None
    mib: int | None = None


def _per_route(stats: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each route's rate, percentiles and errors, and its rate against /healthz's in the same run."""
    floor = stats.get("healthz", {}).get("rps") or 0.0
    return {
        name: {
            "rps": round(row["rps"], 2),
            "p50_ms": row["p50"],
            "p95_ms": row["p95"],
            "p99_ms": row["p99"],
            "errors": row["failures"],
            "ratio_to_healthz": round(row["rps"] / floor, 2) if floor else 0.0,
        }
        for name, row in stats.items()
        if name != "Aggregated"
    }


def seeded_copy(users: int, memories: int, cache: Path | None) -> Path:
    """A fresh data directory holding ``users`` x ``memories`` seeded memories.

    With a cache directory, seeding happens once per size and later runs copy the result (the app
    writes to its data, so a run never uses the cache itself).
    """
    data_dir = Path(tempfile.mkdtemp(prefix="engram-loadtest-"))
    if cache is None:
        _seed(data_dir, users, memories)
        return data_dir
    marker = cache / SEED_MARKER
    wanted = {"users": users, "memories": memories, "format": SEED_FORMAT}
    if not (marker.exists() and json.loads(marker.read_text()) == wanted):
        shutil.rmtree(cache, ignore_errors=True)
        _seed(cache, users, memories)
        marker.write_text(json.dumps(wanted))
    shutil.copytree(cache, data_dir, dirs_exist_ok=True)
    # Written back before the load starts, so that none of a 10,000 x 100 copy's 9.3 GB (SQLite 5.4,
    # milvus-lite 3.9) is left to write during the run measured (2026-12-08: 1 s left after the copy).
    started = time.monotonic()
    os.sync()
    print(f"copied the seed, written back in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return data_dir


def _seed(data_dir: Path, users: int, memories: int) -> None:
    print(f"seeding {users} users x {memories} memories into {data_dir} ...", file=sys.stderr, flush=True)
    subprocess.run(  # noqa: S603 - our own module, fixed arguments
        [sys.executable, "-m", "engram.loadtest.seed", str(data_dir), str(users), str(memories)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


@dataclass
class StartedApp:
    """An app the load test started: its data (removed at the stop) and its HTTP front."""

    data_dir: Path
    front: LocalFront
    settings: Settings


def start_app(
    users: int,
    memories: int,
    seed_cache: Path | None,
    http_front: str = "haproxy",
    *,
    tracing_endpoint: str | None = None,
    snapshots: SnapshotBounds | None = None,
    recall_replicas: int = 1,
) -> tuple[str, StartedApp]:
    """Seed, then start both Serve applications on a Ray of their own (``http_front``: as
    ``serve.http_front``; the embedded default is HAProxy; ``tracing_endpoint``: tracing on, every
    span sent there)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir = seeded_copy(users, memories, seed_cache)
    settings = Settings(
        storage={"data_dir": data_dir},
        # Fixed Recall replicas (one by default, as the R7 figures were measured: docs/benchmarks.md).
        serve={
            "port": free_port(),
            "app_name": "engram-loadtest",
            "recall_replicas": recall_replicas,
            "recall_autoscaling": None,
            "http_front": http_front,
        },
        recall=_recall_bounds(users, snapshots or SnapshotBounds()),
    )
    if tracing_endpoint is not None:
        settings.tracing = settings.tracing.model_validate(
            {"enabled": True, "otlp_endpoint": tracing_endpoint}
        )
    # Before Ray and Serve are imported and started: their processes read the front from the environment.
    front = prepare_local_front(settings.serve)
    import ray
    from ray import serve

    from engram.serve.app import deploy

    # A Ray of its own: "auto" would join a cluster running here, and stop_app would stop its Serve.
    ray.init(address="local", include_dashboard=False, namespace="serve", log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": settings.serve.port})
    deploy(settings)
    url = f"http://127.0.0.1:{settings.serve.port}"
    print(f"app started at {url} (HTTP front: {front.kind})", file=sys.stderr, flush=True)
    wait_for_warm_snapshots(settings)
    return url, StartedApp(data_dir, front, settings)


def _recall_bounds(users: int, bounds: SnapshotBounds) -> dict[str, int]:
    recall = {"snapshot_cache_users": bounds.users or max(users, 1000)}
    if bounds.mib is not None:
        recall["snapshot_cache_bytes"] = bounds.mib * 2**20
    return recall


def stop_app(started: StartedApp) -> None:
    import ray
    from ray import serve

    from engram.models.rules.sharding import shard_name

    serve.shutdown()  # type: ignore[no-untyped-call]
    with contextlib.suppress(ValueError):  # already gone
        ray.kill(ray.get_actor(shard_name("engram-loadtest", 0), namespace="serve"))
    ray.shutdown()
    started.front.close()
    shutil.rmtree(started.data_dir, ignore_errors=True)


def _locust(
    url: str, users: int, total_rps: float, duration_s: int, mix: str, niceness: int, skew: str = "uniform"
) -> dict[str, dict[str, float]]:
    clients = max(10, math.ceil(total_rps))
    stats_file = Path(tempfile.mkdtemp(prefix="engram-locust-")) / "stats.json"
    env = {
        **os.environ,
        "ENGRAM_LT_USERS": str(users),
        "ENGRAM_LT_PER_USER_RPS": str(total_rps / clients),
        "ENGRAM_LT_STATS_FILE": str(stats_file),
        "ENGRAM_LT_MIX": mix,
        "ENGRAM_LT_SKEW": skew,
    }
    command = [
        "nice", "-n", str(niceness), sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
        "-u", str(clients), "-r", str(clients), "-t", f"{duration_s}s", "--host", url,
        "--only-summary", "--loglevel", "WARNING",
        # Requests in flight when the time is up finish and count, instead of being dropped.
        "--stop-timeout", "10",
    ]  # fmt: skip
    print(
        f"locust: {clients} clients offering {total_rps:.1f} req/s (Poisson arrivals) for {duration_s} s",
        file=sys.stderr,
        flush=True,
    )
    done = subprocess.run(command, env=env, check=False, stdout=subprocess.DEVNULL)  # noqa: S603
    if not stats_file.exists():
        raise RuntimeError(f"locust exited with {done.returncode} and wrote no statistics")
    figures: dict[str, dict[str, float]] = json.loads(stats_file.read_text())
    shutil.rmtree(stats_file.parent, ignore_errors=True)
    return figures


def http_front_option(options: argparse.ArgumentParser) -> None:
    """``--http-front``: ``serve.http_front`` of the app a tool starts."""
    options.add_argument(
        "--http-front",
        choices=("haproxy", "ray"),
        default="haproxy",
        help="serve.http_front of the app it starts (default: haproxy, as `engram serve`)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.run`` (``engram loadtest``): one load test, its figures as JSON."""
    parser = argparse.ArgumentParser(prog="engram loadtest", description=run.__doc__)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument(
        "--rps", type=float, default=30.0, help="offered recall requests per second (writes, without recall)"
    )
    parser.add_argument("--mix", default=DEFAULT_MIX, help=f"route=weight,... (default {DEFAULT_MIX})")
    parser.add_argument("--duration", type=int, default=60, help="seconds of load")
    parser.add_argument("--url", help="an Engram app already running (default: start one, seeded)")
    parser.add_argument("--seed-cache", type=Path, help="keep seeded data here and reuse it")
    http_front_option(parser)
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="tracing on in the app it starts, spans to a sink here (its cost)",
    )
    parser.add_argument("--skew", default="uniform", help="whose memories: uniform, or zipf:<s> (a hot set)")
    parser.add_argument("--snapshot-users", type=int, help="recall.snapshot_cache_users of the app it starts")
    parser.add_argument(
        "--snapshot-mib", type=int, help="recall.snapshot_cache_bytes, in MiB, of the app it starts"
    )
    parser.add_argument(
        "--recall-replicas", type=int, default=1, help="fixed Recall replicas of the app it starts"
    )
    args = parser.parse_args(argv)
    figures = run(
        args.users,
        args.memories,
        args.rps,
        args.duration,
        args.url,
        seed_cache=args.seed_cache,
        mix=args.mix,
        http_front=args.http_front,
        tracing=args.tracing,
        skew=args.skew,
        snapshots=SnapshotBounds(args.snapshot_users, args.snapshot_mib),
        recall_replicas=args.recall_replicas,
    )
    print(json.dumps(figures))
    return 0 if figures["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
