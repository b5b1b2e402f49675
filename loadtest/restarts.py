"""Start and stop ``engram serve`` again and again on a data directory with pending tasks (issue #19).

Each run records a few write tasks straight into the stopped service's store (as a crash or a stop
past its grace leaves them), starts ``engram serve``, waits until it listens and every seeded task
is DONE (resumed at start, so extraction is asked for while the app is still coming up), then
stops it with SIGINT and checks that it exits 0. One JSON line per run, a summary line last:

    python -m engram.loadtest.restarts --runs 30 --data-dir /tmp/engram-restarts
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import yaml

from engram.actors.write_path import KIND_ADD
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
                    await tx.insert_task(task)
                    task_ids.append(task.task_id)
    finally:
        await metadata.close()
    return task_ids


@dataclass
class RunResult:
    """One start-and-stop: whether each phase worked and how long it took (seconds)."""

    run: int
    started: bool
    tasks_done: bool
    stopped_cleanly: bool
    start_s: float
    tasks_s: float
    stop_s: float
    exit_code: int | None
    error: str = ""


class _Output:
    """Collects a child's output on a thread (a full pipe would stall it) and notes a marker line."""

    def __init__(self, process: subprocess.Popen[str], marker: str) -> None:
        self.lines: list[str] = []
        self.seen = threading.Event()
        self.ended = threading.Event()
        self._marker = marker
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip())
            if self._marker in line:
                self.seen.set()
        self.ended.set()

    def wait_for_marker(self, deadline: float) -> bool:
        """True once the marker line appeared; False if the output ended or time ran out first."""
        while time.monotonic() < deadline:
            if self.seen.wait(timeout=0.1):
                return True
            if self.ended.is_set():
                return self.seen.is_set()
        return False


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


def one_run(run: int, config: Path, settings: Settings, tasks_per_run: int, limit_s: float) -> RunResult:
    """Seed pending tasks, start the service, wait for them, stop it."""
    task_ids = asyncio.run(seed_pending_tasks(settings, [f"restart-user-{run % 5}"], tasks_per_run))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, ENGRAM_CONFIG=str(config), PYTHONUNBUFFERED="1")
    began = time.monotonic()
    process = subprocess.Popen(  # noqa: S603 - our own command line
        [sys.executable, "-m", "engram.serve.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    output = _Output(process, "Engram listens on")
    result = RunResult(run, False, False, False, 0.0, 0.0, 0.0, None)
    try:
        result.started = output.wait_for_marker(began + limit_s)
        result.start_s = time.monotonic() - began
        if result.started:
            t0 = time.monotonic()
            result.tasks_done, result.error = _poll_done(url, task_ids, t0 + limit_s)
            result.tasks_s = time.monotonic() - t0
        else:
            result.error = "never listened"
    finally:
        t0 = time.monotonic()
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            result.error = result.error or "did not stop in time"
        output.ended.wait(timeout=10)
        result.stop_s = time.monotonic() - t0
        result.exit_code = process.returncode
        result.stopped_cleanly = process.returncode == 0
        if not (result.started and result.tasks_done and result.stopped_cleanly):
            result.error = (result.error + " | " + " / ".join(output.lines[-15:]))[:2000]
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the start/stop loop; exit 0 only when every run started, finished its tasks and stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=5, help="pending tasks seeded before each start")
    parser.add_argument("--data-dir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--limit-s", type=float, default=240.0, help="bound on each phase of a run")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="engram-restarts-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "engram.yaml"
    config.write_text(yaml.safe_dump({"storage": {"data_dir": str(data_dir / "data")}}))
    settings = Settings(storage={"data_dir": data_dir / "data"})
    results = []
    for run in range(1, args.runs + 1):
        result = one_run(run, config, settings, args.tasks, args.limit_s)
        results.append(result)
        print(json.dumps(asdict(result)), flush=True)
    ok = [r for r in results if r.started and r.tasks_done and r.stopped_cleanly]
    summary = {
        "runs": len(results),
        "clean": len(ok),
        "start_s_max": round(max(r.start_s for r in results), 1),
        "start_s_mean": round(sum(r.start_s for r in results) / len(results), 1),
        "stop_s_max": round(max(r.stop_s for r in results), 1),
    }
    print(json.dumps(summary), flush=True)
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
