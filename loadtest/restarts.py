"""Start and stop ``engram serve`` again and again on one data directory with pending tasks
(issues #19, #26).

Each run records a few write tasks straight into the stopped service's store (as a crash or a stop
past its grace leaves them), starts the service (``make run`` as the README does, or ``engram
serve``) in a process group of its own, waits until it listens and every seeded task is DONE
(resumed at start, so extraction is asked for while the app is still coming up), then stops it
one of the ways of loadtest/stops.py (``--stops``: one, or a list the runs take in turn) and checks
that within ``--gone-s`` nothing of the run is alive and neither of its ports is held. One JSON
line per run, a summary line last:

    python -m engram.loadtest.restarts --runs 10 --stops all --data-dir /tmp/engram-restarts
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import yaml

from engram.actors.task_runner import KIND_ADD
from engram.loadtest.stops import STOPS, ServeRun
from engram.models.api import AddRequest
from engram.models.domain import WriteTask, utcnow
from engram.models.enums import TaskStatus
from engram.models.ids import new_id
from engram.models.settings import Settings
from engram.serve.http_front import free_port
from engram.storage.database import create_engine
from engram.storage.keyring import check_master_key, keyring_for
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade

REPO = Path(__file__).resolve().parents[1]


async def seed_pending_tasks(settings: Settings, user_ids: Sequence[str], per_user: int) -> list[str]:
    """Record ``per_user`` PENDING ``add`` tasks for each user while no service runs; their ids.

    Only the metadata store is opened: the vector store belongs to whichever process serves.
    """
    storage = settings.storage
    storage.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_engine(storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms)
    await upgrade(engine)
    metadata = MetadataStore(engine, keyring_for(storage))
    task_ids: list[str] = []
    try:
        async with engine.connect() as conn:  # the first writer of an empty store makes the key
            await check_master_key(metadata.keyring, conn, may_create=True)
        now = utcnow()
        async with metadata.transaction() as tx:
            for user_id in user_ids:
                for n in range(per_user):
                    request = AddRequest.model_validate(
                        {
                            "user_id": user_id,
                            "messages": [
                                {
                                    "role": "user",
                                    "content": f"My gym locker number is {new_id()[:8]} ({n}).",
                                }
                            ],
                        }
                    )
                    task = WriteTask(
                        task_id=new_id(),
                        user_id=user_id,
                        kind=KIND_ADD,
                        status=TaskStatus.PENDING,
                        payload=request.model_dump(mode="json"),
                        created_at=now,
                        updated_at=now,
                    )
                    await tx.tasks.insert(task)
                    task_ids.append(task.task_id)
    finally:
        await metadata.close()
    return task_ids


@dataclass
class RunResult:
    """One start-and-stop: whether each phase worked and how long it took (seconds)."""

    run: int
    stop: str
    started: bool
    tasks_done: bool
    gone: bool
    start_s: float
    tasks_s: float
    gone_s: float
    exit_code: int | None
    reclaimed: bool = False
    error: str = ""

    @property
    def clean(self) -> bool:
        """Came up, finished its tasks, and left nothing once stopped."""
        return self.started and self.tasks_done and self.gone


def _poll_done(url: str, task_ids: Sequence[str], deadline: float) -> tuple[bool, str]:
    pending = set(task_ids)
    with httpx.Client(base_url=url, timeout=30) as http:
        while pending and time.monotonic() < deadline:
            for task_id in list(pending):
                answer = http.post("/memory/v1/task", json={"task_id": task_id}).json()
                if answer["code"] != 0:
                    continue
                status = answer["data"]["status"]
                if status == "FAILED":
                    return False, f"task failed: {answer['data']['error']}"
                if status == "DONE":
                    pending.discard(task_id)
            if pending:
                time.sleep(0.2)  # polling task state, bounded by the deadline
    return (not pending), (f"{len(pending)} tasks unfinished" if pending else "")


def start_command(via: str) -> tuple[list[str], Path | None]:
    """The command line a run starts (and where): the README's ``make run``, or ``engram serve``."""
    if via == "make" and (REPO / "Makefile").is_file():
        return ["make", "--no-print-directory", "-C", str(REPO), "run", f"VENV={sys.prefix}"], REPO
    return [sys.executable, "-m", "engram.serve.cli", "serve"], None


def one_run(run: int, config: Path, settings: Settings, stop: str, options: argparse.Namespace) -> RunResult:
    """Seed pending tasks, start the service, wait for them, stop it, check what it left."""
    task_ids = asyncio.run(seed_pending_tasks(settings, [f"restart-user-{run % 5}"], options.tasks))
    url = f"http://127.0.0.1:{settings.serve.port}"
    env = dict(os.environ, ENGRAM_CONFIG=str(config), PYTHONUNBUFFERED="1")
    argv, cwd = start_command(options.via)
    service = ServeRun(
        argv, settings.storage.data_dir, [settings.serve.port, settings.metrics.export_port], env, cwd
    )
    result = RunResult(run, stop, False, False, False, 0.0, 0.0, 0.0, None)
    try:
        result.started = service.wait_listening(options.limit_s)
        result.start_s = time.monotonic() - service.began
        result.reclaimed = "reclaimed what run" in service.output.text()
        if result.started:
            t0 = time.monotonic()
            result.tasks_done, result.error = _poll_done(url, task_ids, t0 + options.limit_s)
            result.tasks_s = time.monotonic() - t0
        else:
            result.error = "never listened"
    finally:
        t0 = time.monotonic()
        if service.record is not None:
            service.snapshot()
            service.stop(stop)
        else:
            service.stop("sigterm-group")
        left = service.wait_gone(options.gone_s)
        result.gone_s = time.monotonic() - t0
        result.gone = not left
        result.exit_code = service.process.poll()
        if left:
            result.error = (result.error + f" | left after the stop: {left}").strip(" |")
        service.kill_everything()
        if not result.clean:
            result.error = (result.error + " | " + " / ".join(service.output.lines[-15:]))[:2000]
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the start/stop loop; exit 0 only when every run came up, finished its tasks and left nothing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=5, help="pending tasks seeded before each start")
    parser.add_argument("--data-dir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--limit-s", type=float, default=240.0, help="bound on the start and on the tasks")
    parser.add_argument("--gone-s", type=float, default=30.0, help="bound on the stop (issue #26: 30)")
    parser.add_argument(
        "--stops",
        default="all",
        help=f"comma-separated ways of stopping, taken in turn, or 'all' ({', '.join(STOPS)})",
    )
    parser.add_argument("--via", choices=("make", "serve"), default="make", help="what each run starts")
    args = parser.parse_args(argv)
    stops = list(STOPS) if args.stops == "all" else [s.strip() for s in args.stops.split(",") if s.strip()]
    unknown = [s for s in stops if s not in STOPS]
    if unknown or not stops:
        parser.error(f"unknown stops {unknown}; choose from {', '.join(STOPS)}")
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="engram-restarts-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "engram.yaml"
    port, metrics_port = free_port(), free_port()
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"data_dir": str(data_dir / "data")},
                "serve": {"port": port},
                "metrics": {"export_port": metrics_port},
                "lifecycle": {"scheduler_enabled": False},
            }
        )
    )
    settings = Settings(
        storage={"data_dir": data_dir / "data"}, serve={"port": port}, metrics={"export_port": metrics_port}
    )
    results = []
    for run in range(1, args.runs + 1):
        result = one_run(run, config, settings, stops[(run - 1) % len(stops)], args)
        results.append(result)
        print(json.dumps(asdict(result)), flush=True)
    ok = [r for r in results if r.clean]
    summary = {
        "runs": len(results),
        "clean": len(ok),
        "came_up": sum(r.started for r in results),
        "start_s_max": round(max(r.start_s for r in results), 1),
        "start_s_mean": round(sum(r.start_s for r in results) / len(results), 1),
        "gone_s_max": round(max(r.gone_s for r in results), 1),
        "gone_s_by_stop": {
            stop: round(max(r.gone_s for r in results if r.stop == stop), 1)
            for stop in dict.fromkeys(r.stop for r in results)
        },
    }
    print(json.dumps(summary), flush=True)
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
