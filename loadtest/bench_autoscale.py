"""The Recall deployment scaling out under recall load and back (#12):

    python -m engram.loadtest.bench_autoscale [--max-replicas 2] [--clients 16] [--levels 1,2,4,8]

Starts both Serve applications here (Ray in process, seeded users, the embedded default) with
Recall autoscaling between 1 and ``--max-replicas``, offers closed-loop HTTP recall from
``--clients`` callers until Serve has that many RUNNING replicas (bounded by ``--up-limit``), keeps
the load ``--hold`` seconds more, stops it and waits (bounded by ``--down-limit``) for the scale-down
to one replica. The RUNNING count is polled from ``serve.status()`` every ``--poll`` seconds. One
JSON line: the replica count over time, the times to scale up and down, and recall p50/p99 of each
phase (``one_replica``: load on before the second replica ran; ``scaled``: after it ran).

``--levels 1,2,4,8`` measures instead, on one fixed replica, recall latency and throughput at each
number of requests in flight (closed loop, ``--level-seconds`` each): what ``target_ongoing_requests``
is chosen from (docs/benchmarks.md, "Recall autoscaling").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from engram.models.settings import AutoscalingSettings, Settings
from engram.serve.cli.options import positive_int

APP_NAME = "engram-autoscale"
RECALL = "/memory/v1/recall"
ANSWERED = (0, 20001)
QUERIES = ("what food do I like", "where did I travel", "which sports do I play", "what music do I enjoy")


@dataclass
class Sample:
    """One recall: when it started (seconds since the run began), its latency, Engram's code."""

    at: float
    seconds: float
    code: int | str = 0

    @property
    def ok(self) -> bool:
        """Answered: memories (0) or none relevant (20001); 50401 is a recall past its timeout."""
        return self.code in ANSWERED


@dataclass
class Run:
    """What the load and the poller saw: every recall, (time, RUNNING replicas) polls, and the
    times of polls that found a replica STARTING (Serve decided to scale, the replica is not up)."""

    samples: list[Sample] = field(default_factory=list)
    polls: list[tuple[float, int]] = field(default_factory=list)
    starting: list[float] = field(default_factory=list)
    # (time, replicas by state) whenever the states changed: STARTING, RUNNING, STOPPING...
    states: list[tuple[float, dict[str, int]]] = field(default_factory=list)


def percentiles(latencies: Sequence[float]) -> dict[str, Any]:
    """Request count and p50 / p99 in milliseconds (nearest rank)."""
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else 0.0

    return {"requests": len(ordered), "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


def phase(samples: Sequence[Sample], start: float, end: float) -> dict[str, Any]:
    """Recalls started in ``[start, end)``: percentiles of the answered ones, rate and errors."""
    inside = [s for s in samples if start <= s.at < end]
    figures = percentiles([s.seconds for s in inside if s.ok])
    span = end - start
    figures["per_s"] = round(figures["requests"] / span, 1) if span > 0 else 0.0
    errors: dict[str, int] = {}
    for sample in inside:
        if not sample.ok:
            errors[str(sample.code)] = errors.get(str(sample.code), 0) + 1
    figures["errors"] = errors
    return figures


def timeline(polls: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    """The polls where the RUNNING count changed (and the first and last poll)."""
    kept: list[tuple[float, int]] = []
    for n, (at, count) in enumerate(polls):
        if not kept or count != kept[-1][1] or n == len(polls) - 1:
            kept.append((round(at, 1), count))
    return kept


def first_at(polls: Sequence[tuple[float, int]], after: float, reached: Any) -> float | None:
    """The time of the first poll at or after ``after`` whose count satisfies ``reached``."""
    return next((at for at, count in polls if at >= after and reached(count)), None)


def summarize(run: Run, load_start: float, load_stop: float, max_replicas: int) -> dict[str, Any]:
    """The report: replica timeline, scale-up and scale-down times, p50/p99 before and after scaling."""
    up_at = first_at(run.polls, load_start, lambda count: count >= max_replicas)
    # A scale-down is only one after a scale-up.
    down_at = None if up_at is None else first_at(run.polls, load_stop, lambda count: count <= 1)
    scaled_from = up_at if up_at is not None else load_stop
    decided_at = next((at for at in run.starting if at >= load_start), None)
    return {
        "replicas": timeline(run.polls),
        "load_start_s": round(load_start, 1),
        "load_stop_s": round(load_stop, 1),
        "scale_up_s": None if up_at is None else round(up_at - load_start, 1),
        # Of that: until Serve started a replica (the autoscaler's delays), then its start-up.
        "replica_starting_s": None if decided_at is None else round(decided_at - load_start, 1),
        "scale_down_s": None if down_at is None else round(down_at - load_stop, 1),
        "one_replica": phase(run.samples, load_start, scaled_from),
        "scaled": phase(run.samples, scaled_from, load_stop) if up_at is not None else None,
        "max_running": max((count for _, count in run.polls), default=0),
        # Below max_replicas while the load was still on: Serve scaled down under load (or a
        # replica died); the scale-down time then does not measure the scale-down.
        "min_running_while_scaled": None
        if up_at is None
        else min((count for at, count in run.polls if up_at <= at < load_stop), default=None),
        "states": run.states,
    }


def replica_states(app_name: str, deployment: str) -> dict[str, int]:
    """Replicas of one deployment by state (RUNNING, STARTING, ...), as the Serve controller reports them."""
    from ray import serve

    status = serve.status().applications.get(app_name)
    if status is None or deployment not in status.deployments:
        return {}
    states = status.deployments[deployment].replica_states
    return {str(getattr(state, "value", state)): count for state, count in states.items()}


async def _recall(http: httpx.AsyncClient, users: int) -> int | str:
    """One recall of a random seeded user: Engram's code (0: answered), an HTTP status or error name."""
    body = {"user_id": f"lt-{random.randrange(users)}", "query": random.choice(QUERIES), "top_k": 10}
    try:
        answer = await http.post(RECALL, json=body)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    try:
        code: int | str = answer.json().get("code", answer.status_code)
    except ValueError:  # not Engram's envelope (a proxy's error page)
        return answer.status_code
    return code


async def _load(
    http: httpx.AsyncClient, run: Run, t0: float, users: int, clients: int, stop: asyncio.Event
) -> None:
    """``clients`` callers, each sending its next recall once the last is answered, until ``stop``."""

    async def caller() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            code = await _recall(http, users)
            run.samples.append(Sample(started - t0, time.perf_counter() - started, code))

    await asyncio.gather(*(caller() for _ in range(clients)))


@dataclass
class Watch:
    """Set once a poll at or after ``after`` finds a RUNNING count that passes ``test``."""

    test: Callable[[int], bool]
    after: float = 0.0
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait(self, limit_s: float) -> bool:
        """True when reached within ``limit_s``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.reached.wait(), limit_s)
        return self.reached.is_set()


async def _poll(
    run: Run, t0: float, every_s: float, stop: asyncio.Event, recall_app: str, watches: Sequence[Watch]
) -> None:
    while not stop.is_set():
        states = await asyncio.to_thread(replica_states, recall_app, "Recall")
        at = time.perf_counter() - t0
        count = states.get("RUNNING", 0)
        run.polls.append((at, count))
        if states.get("STARTING", 0):
            run.starting.append(at)
        if not run.states or run.states[-1][1] != states:
            run.states.append((round(at, 1), states))
        for watch in watches:
            if at >= watch.after and watch.test(count):
                watch.reached.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)  # the poll period, ended early by stop


async def autoscale(url: str, args: argparse.Namespace, recall_app: str) -> dict[str, Any]:
    """Load until scaled up (bounded), hold, stop, wait for the scale-down (bounded); the report."""
    run = Run()
    t0 = time.perf_counter()
    scaled_up = Watch(lambda count: count >= args.max_replicas)
    scaled_down = Watch(lambda count: count <= 1, after=math.inf)
    limits = httpx.Limits(max_connections=args.clients + 8, max_keepalive_connections=args.clients + 8)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        stop_poll, stop_load = asyncio.Event(), asyncio.Event()
        poller = asyncio.create_task(
            _poll(run, t0, args.poll, stop_poll, recall_app, (scaled_up, scaled_down))
        )
        load_start = time.perf_counter() - t0
        load = asyncio.create_task(_load(http, run, t0, args.users, args.clients, stop_load))
        if await scaled_up.wait(args.up_limit):
            await asyncio.sleep(args.hold)  # the measured phase at the scaled-out size
        stop_load.set()
        await load
        load_stop = time.perf_counter() - t0
        scaled_down.after = load_stop
        await scaled_down.wait(args.down_limit)
        stop_poll.set()
        await poller
    return summarize(run, load_start, load_stop, args.max_replicas)


async def levels(url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Closed-loop recall at each number of requests in flight, on the one fixed replica."""
    rows: list[dict[str, Any]] = []
    limits = httpx.Limits(
        max_connections=max(args.levels) + 8, max_keepalive_connections=max(args.levels) + 8
    )
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        for in_flight in args.levels:
            run, stop = Run(), asyncio.Event()
            t0 = time.perf_counter()
            load = asyncio.create_task(_load(http, run, t0, args.users, in_flight, stop))
            await asyncio.sleep(args.level_seconds)  # the measured window at this level
            stop.set()
            await load
            rows.append({"in_flight": in_flight, **phase(run.samples, 0.0, args.level_seconds)})
    return rows


def _settings(args: argparse.Namespace, data_dir: Any, port: int) -> Settings:
    scaling = (
        None
        if args.levels
        else AutoscalingSettings(
            min_replicas=1,
            max_replicas=args.max_replicas,
            target_ongoing_requests=args.target,
            upscale_delay_s=args.upscale_delay,
            downscale_delay_s=args.downscale_delay,
            look_back_period_s=args.look_back,
        )
    )
    return Settings(
        storage={"data_dir": data_dir},
        serve={
            "port": port,
            "app_name": APP_NAME,
            "recall_replicas": 1,
            "recall_autoscaling": scaling,
            "replica_cpus": args.replica_cpus,
        },
        recall={"snapshot_cache_users": max(args.users, 1000)},
        # Many recalls of few users: the per-user limit would answer 42903, not measure recall.
        limits={"user_rate_per_s": 0},
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.bench_autoscale`` (``engram bench autoscale``): one JSON line."""
    parser = argparse.ArgumentParser(prog="engram bench autoscale", description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=positive_int, default=200, help="seeded users")
    parser.add_argument("--memories", type=positive_int, default=50, help="seeded memories per user")
    parser.add_argument("--seed-cache", help="keep seeded data here and reuse it")
    parser.add_argument("--clients", type=positive_int, default=16, help="closed-loop recall callers")
    parser.add_argument("--max-replicas", type=positive_int, default=2, help="Recall's max_replicas")
    parser.add_argument("--target", type=float, default=4.0, help="target_ongoing_requests")
    parser.add_argument("--upscale-delay", type=float, default=5.0)
    parser.add_argument("--downscale-delay", type=float, default=30.0)
    parser.add_argument("--look-back", type=float, default=12.0, help="look_back_period_s (> 10)")
    parser.add_argument("--replica-cpus", type=float, default=0.1, help="serve.replica_cpus")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between serve.status() polls")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds of load once scaled out")
    parser.add_argument("--up-limit", type=float, default=180.0, help="longest wait for the scale-up")
    parser.add_argument("--down-limit", type=float, default=180.0, help="longest wait for the scale-down")
    parser.add_argument(
        "--levels",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[],
        help="instead: latency at these requests in flight on one replica, e.g. 1,2,4,8",
    )
    parser.add_argument("--level-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray import serve

    from engram.loadtest.recall_replicas import wait_for_warm_snapshots
    from engram.loadtest.run import seeded_copy
    from engram.models.rules.sharding import shard_name
    from engram.serve.app import deploy, recall_app_name
    from engram.serve.http_front import free_port

    data_dir = seeded_copy(args.users, args.memories, Path(args.seed_cache) if args.seed_cache else None)
    settings = _settings(args, data_dir, free_port())
    # A Ray of its own, always: "auto" would join a cluster running here (another engineer's, a
    # test's) and the shutdown below would stop that cluster's Serve apps.
    ray.init(address="local", include_dashboard=False, namespace="serve", log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": settings.serve.port})
        deploy(settings)
        wait_for_warm_snapshots(settings)
        url = f"http://127.0.0.1:{settings.serve.port}"
        # The load generator runs at the service's priority (Ray's processes run at nice 15): at
        # nice 19 on a busy machine it read answers late, and Serve saw fewer requests in flight
        # than were offered.
        os.nice(max(0, 15 - os.nice(0)))
        report: dict[str, Any] = {
            "load_average_1m": round(os.getloadavg()[0], 1),
            "users": args.users,
            "memories_per_user": args.memories,
            "clients": args.clients,
        }
        if args.levels:
            report["levels"] = asyncio.run(levels(url, args))
        else:
            assert settings.serve.recall_autoscaling is not None
            report["autoscaling_config"] = settings.serve.recall_autoscaling.serve_config()
            report.update(asyncio.run(autoscale(url, args, recall_app_name(settings))))
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        with contextlib.suppress(ValueError):  # already gone
            ray.kill(ray.get_actor(shard_name(APP_NAME, 0), namespace="serve"))
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
    report["load_average_1m_after"] = round(os.getloadavg()[0], 1)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
