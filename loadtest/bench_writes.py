"""The write path under load, beside the trivial route in the same run (#11):

    python -m engram.loadtest.bench_writes [--url URL] [--clients 16] [--writes 1000]

Phases, one JSON line at the end:
- ``healthz``: the trivial route, closed loop (``--clients`` callers, each waiting on its answer):
  the Serve ceiling on this machine.
- ``closed``: single async ``add_structured`` writes, closed loop: acknowledgements per second and
  their latency; then every task polled to DONE: memories DONE per second (first send to last DONE).
- ``open``: single writes offered at ``--open-rate`` per second as a Poisson process for
  ``--open-seconds`` (the latency a user sees at that load, not bounded by the callers' waits).
- ``batch``: ``batch_add_structured`` with ``--batch-items`` per request from 4 callers, for
  ``--batch-users`` users (request n writes for user n mod that): memories DONE per second. One
  user's batches run one after another on its mailbox; several users' run side by side.

Closed-loop latency is clients / throughput by construction; read the open loop for latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from engram.loadtest.run import http_front_option
from engram.serve.cli.options import positive_int

V1 = "/memory/v1"
USERS = 50


@dataclass
class Phase:
    """Latencies (seconds) of answered requests, errors by code, and the phase's wall time."""

    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def error(self, code: Any) -> None:
        """Count one refused or failed request."""
        self.errors[str(code)] = self.errors.get(str(code), 0) + 1

    def summary(self) -> dict[str, Any]:
        """Requests per second and latency percentiles (ms)."""
        ordered = sorted(self.latencies)

        def pct(q: float) -> float:
            return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else 0.0

        return {
            "requests": len(ordered),
            "per_s": round(len(ordered) / self.seconds, 1) if self.seconds else 0.0,
            "p50_ms": pct(0.50),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "errors": self.errors,
        }


def structured(n: int, run: str) -> dict[str, Any]:
    """A distinct ready memory for user ``n % USERS``."""
    return {
        "user_id": f"bench-{run}-{n % USERS}",
        "ownership": "USER",
        "mem_type": "SEMANTIC",
        "content": f"Note {n} of run {run}: locker {random.randrange(10**6):06d} is on floor {n % 9}.",
    }


async def timed(http: httpx.AsyncClient, phase: Phase, path: str, body: Any | None) -> Any:
    """One request; its latency when answered with code 0 (or 200 for /healthz), else an error."""
    started = time.perf_counter()
    try:
        response = await (http.get(path) if body is None else http.post(path, json=body))
    except httpx.HTTPError as exc:
        phase.error(type(exc).__name__)
        return None
    elapsed = time.perf_counter() - started
    if body is None:
        if response.status_code == 200:
            phase.latencies.append(elapsed)
        else:
            phase.error(response.status_code)
        return None
    payload = response.json()
    if payload.get("code") != 0:
        phase.error(payload.get("code"))
        return None
    phase.latencies.append(elapsed)
    return payload["data"]


async def closed_loop(clients: int, total: int, one: Callable[[int], Awaitable[Any]]) -> float:
    """``clients`` callers each sending the next request when the last was answered; wall seconds."""
    counter = iter(range(total))

    async def caller() -> None:
        for n in counter:
            await one(n)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(clients)))
    return time.perf_counter() - started


async def open_loop(rate: float, seconds: float, one: Callable[[int], Coroutine[Any, Any, Any]]) -> float:
    """Requests started as a Poisson process at ``rate`` per second, whatever the answers take."""
    rng = random.Random(7)
    started = time.perf_counter()
    pending: list[asyncio.Task[Any]] = []
    at, n = 0.0, 0
    while at < seconds:
        delay = started + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        pending.append(asyncio.create_task(one(n)))
        n += 1
        at += rng.expovariate(rate)
    await asyncio.gather(*pending)
    return time.perf_counter() - started


async def wait_done(http: httpx.AsyncClient, task_ids: Sequence[str], started: float) -> dict[str, Any]:
    """Wait until every task has finished; DONE count and memories DONE per second.

    The end is the latest ``finished_at`` the service reports, not when a poll saw it, so when the
    polls run does not change the figure, only how much they load the machine: while tasks run,
    only the last one accepted is watched (tasks end roughly in the order they came; polling every
    unfinished task loaded the two cores the tasks run on), then every task is read once.
    ``started`` is a ``time.time()`` reading (the service stamps tasks with the same clock).
    """
    waiting = list(task_ids)
    done = failed = 0
    last = started
    while waiting:
        if _status(await http.post(f"{V1}/task", json={"task_id": waiting[-1]}))[0] not in _ENDED:
            await asyncio.sleep(0.5)  # a progress poll, not a correctness wait
            continue
        still: list[str] = []
        for chunk in range(0, len(waiting), 16):
            asked = waiting[chunk : chunk + 16]
            answers = await asyncio.gather(*(http.post(f"{V1}/task", json={"task_id": t}) for t in asked))
            for task_id, answer in zip(asked, answers, strict=True):
                status, finished_at = _status(answer)
                if status not in _ENDED:
                    still.append(task_id)
                    continue
                done += status == "DONE"
                failed += status == "FAILED"
                last = max(last, finished_at)
        waiting = still
    seconds = last - started
    per_s = round(done / seconds, 1) if seconds > 0 else 0.0
    return {"done": done, "failed": failed, "seconds": round(seconds, 2), "per_s": per_s}


_ENDED = ("DONE", "FAILED")


def _status(answer: httpx.Response) -> tuple[str, float]:
    """A task's status and, once it ended, its ``finished_at`` as a ``time.time()`` reading."""
    view = answer.json()["data"]
    ended = view["status"] in _ENDED
    return view["status"], datetime.fromisoformat(view["finished_at"]).timestamp() if ended else 0.0


async def bench(
    url: str,
    clients: int,
    writes: int,
    open_rate: float,
    open_seconds: float,
    batch_items: int,
    batch_requests: int = 10,
    batch_users: int = 4,
) -> dict[str, Any]:
    """Run every phase against ``url``; the figures as one dict."""
    run = f"{int(time.time())}"
    limits = httpx.Limits(max_connections=max(clients, 256), max_keepalive_connections=max(clients, 256))
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        report: dict[str, Any] = {"clients": clients}

        health = Phase()
        trivial = max(writes, 500)
        health.seconds = await closed_loop(clients, trivial, lambda n: timed(http, health, "/healthz", None))
        report["healthz"] = health.summary()

        writes_phase = Phase()
        task_ids: list[str] = []

        async def write(n: int) -> None:
            data = await timed(http, writes_phase, f"{V1}/add_structured", structured(n, run))
            if data is not None:
                task_ids.append(data["task_id"])

        if writes:
            first_send = time.time()
            writes_phase.seconds = await closed_loop(clients, writes, write)
            report["closed"] = writes_phase.summary()
            report["closed"]["done"] = await wait_done(http, task_ids, first_send)
            report["closed"]["ratio_to_healthz"] = round(
                report["closed"]["per_s"] / max(report["healthz"]["per_s"], 1e-9), 2
            )

        opened = Phase()
        open_ids: list[str] = []

        async def offered(n: int) -> None:
            data = await timed(http, opened, f"{V1}/add_structured", structured(10**6 + n, run))
            if data is not None:
                open_ids.append(data["task_id"])

        if open_seconds > 0:
            opened.seconds = await open_loop(open_rate, open_seconds, offered)
            report["open"] = {"offered_per_s": open_rate, **opened.summary()}
            await wait_done(http, open_ids, time.time())

        if batch_items:
            batches = Phase()
            batch_ids: list[str] = []
            requests = batch_requests

            async def batch(n: int) -> None:
                items = [structured(2 * 10**6 + n * batch_items + i, run) for i in range(batch_items)]
                body = {
                    "user_id": f"bench-{run}-batch-{n % batch_users}",
                    "items": [{k: v for k, v in i.items() if k != "user_id"} for i in items],
                }
                data = await timed(http, batches, f"{V1}/batch_add_structured", body)
                if data is not None:
                    batch_ids.append(data["task_id"])

            started = time.time()
            batches.seconds = await closed_loop(4, requests, batch)
            report["batch"] = {"items_per_request": batch_items, "users": batch_users, **batches.summary()}
            finished = await wait_done(http, batch_ids, started)
            report["batch"]["memories_done_per_s"] = round(
                finished["done"] * batch_items / finished["seconds"], 1
            )
    return report


def parser() -> argparse.ArgumentParser:
    """The options of ``engram bench writes`` (``engram bench ingest`` presets some of them)."""
    options = argparse.ArgumentParser(prog="engram bench writes", description=__doc__.splitlines()[0])
    options.add_argument("--url", help="an Engram app already running (default: start one)")
    http_front_option(options)
    options.add_argument("--clients", type=positive_int, default=16, help="closed-loop callers")
    options.add_argument("--writes", type=int, default=1000, help="closed-loop single writes (0: none)")
    options.add_argument("--open-rate", type=float, default=50.0, help="open loop: writes offered per second")
    options.add_argument("--open-seconds", type=float, default=20.0, help="open loop length (0: none)")
    options.add_argument("--batch-items", type=int, default=100, help="items per batch request (0: none)")
    options.add_argument(
        "--batch-requests", type=positive_int, default=10, help="batch requests, from 4 callers"
    )
    options.add_argument(
        "--batch-users",
        type=positive_int,
        default=4,
        help="users the batches write for (1: every batch one user's)",
    )
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.bench_writes`` (``engram bench writes``): figures as one JSON line."""
    args = parser().parse_args(argv)
    started: Any = None
    url = args.url
    if url is None:
        from engram.loadtest.run import start_app

        url, started = start_app(1, 1, None, args.http_front)
    try:
        report = asyncio.run(
            bench(
                url,
                args.clients,
                args.writes,
                args.open_rate,
                args.open_seconds,
                args.batch_items,
                args.batch_requests,
                args.batch_users,
            )
        )
    finally:
        if started is not None:
            from engram.loadtest.run import stop_app

            stop_app(started)
    # Which front carried the requests (an app at --url: whatever it was started with).
    report["http_front"] = args.http_front if started is not None else "as started at --url"
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
