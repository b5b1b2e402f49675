"""Shared fixtures: settings in a temporary data dir, real stores, one embedder per run."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Generator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from engram.actors.memory_service import MemoryService
from engram.models.settings import Settings
from engram.storage.embedders import Embedder, UseEmbedder
from engram.storage.processes import end_processes, processes_marked
from engram.storage.stores import Stores, open_stores

# Every process a test run starts, whoever starts it and wherever it moves (Ray's, HAProxy, servers,
# children of children), inherits this run's mark: at the end the run checks none is left.
TEST_RUN_ENV = "ENGRAM_TEST_RUN"
os.environ[TEST_RUN_ENV] = uuid.uuid4().hex
# A 2-core machine under load starts Ray's GCS slower than Ray's 30 s default allows.
os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "180")
# How long the run waits at its end for processes on their way out (Ray's, after its shutdown).
LEFTOVER_WAIT_S = 30.0

# Property tests check what holds, never how fast: hypothesis' 200 ms per example failed a rules test
# on a busy machine (make test beside a CPU hog, #26). Examples still run in full.
hypothesis_settings.register_profile("engram", deadline=None)
hypothesis_settings.load_profile("engram")

POSTGRES_URL = os.environ.get("ENGRAM_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
# Engram's tests get a database of their own beside ``test``, emptied before each test; runs that
# share one PostgreSQL at the same time name different databases.
POSTGRES_TEST_DB = os.environ.get("ENGRAM_TEST_POSTGRES_DB", "engram_test")


class ManualClock:
    """A clock the test moves by hand: no sleeping, no wall time."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


class ManualMonotonic:
    """A monotonic clock in seconds that the test moves by hand (``clock.now += 1.5``)."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return UseEmbedder(threads=1)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # A generous recall timeout: this machine is shared and noisy. The 50401 path itself is tested
    # deterministically with an embedder that never answers.
    return Settings(storage={"data_dir": tmp_path / "data"}, recall={"timeout_ms": 30_000})


_postgres_checked: list[str | None] = []


async def _postgres_unavailable() -> str | None:
    """None when the test PostgreSQL answers, else the reason (checked once per run)."""
    if not _postgres_checked:
        engine = create_async_engine(POSTGRES_URL)
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            _postgres_checked.append(None)
        except Exception as exc:  # any failure to connect means "not reachable here"
            _postgres_checked.append(f"PostgreSQL not reachable at {POSTGRES_URL}: {type(exc).__name__}")
        finally:
            await engine.dispose()
    return _postgres_checked[0]


def _own_database_url() -> str:
    return str(make_url(POSTGRES_URL).set(database=POSTGRES_TEST_DB).render_as_string(hide_password=False))


async def _reset_postgres() -> None:
    admin = create_async_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        exists = await conn.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": POSTGRES_TEST_DB}
        )
        if exists.scalar() is None:
            await conn.execute(text(f'CREATE DATABASE "{POSTGRES_TEST_DB}"'))
    await admin.dispose()
    own = create_async_engine(_own_database_url())
    async with own.begin() as conn:
        await conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        await conn.execute(text("CREATE SCHEMA public"))
    await own.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty metadata database: SQLite in tmp_path, or a clean PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'meta.db'}"
        return
    reason = await _postgres_unavailable()
    if reason:
        pytest.skip(reason)
    await _reset_postgres()
    yield _own_database_url()


@pytest.fixture
async def stores(settings: Settings, database_url: str, embedder: Embedder) -> AsyncIterator[Stores]:
    """Real stores on the embedded default (SQLite or PostgreSQL metadata, milvus-lite vectors)."""
    settings.storage.database_url = database_url
    opened = await open_stores(settings, embedder=embedder)
    yield opened
    await opened.close()


@pytest.fixture
async def service(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[MemoryService]:
    """A MemoryService over the real stores with a hand-moved clock."""
    svc = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder, clock=clock)
    yield svc
    await svc.drain()


# Each suite folder's tests carry its marker (``-m unit`` must select exactly tests/unit).
_FOLDER_MARKERS = {"unit": "unit", "integration": "integration", "e2e": "e2e", "distributed": "distributed"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--distributed",
        action="store_true",
        help="run tests/distributed (a 2-node Ray cluster, PostgreSQL, a Milvus server) instead of the rest",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/distributed needs a Ray session of its own: it runs only, and alone, with --distributed."""
    inside = "distributed" in collection_path.relative_to(config.rootpath).parts[1:2]
    if config.getoption("--distributed"):
        return None if inside or collection_path == config.rootpath / "tests" else True
    return True if inside else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a run where a test in tests/<suite>/ lacks that suite's marker."""
    unmarked = []
    for item in items:
        parts = item.path.relative_to(config.rootpath).parts
        suite = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
        if suite in _FOLDER_MARKERS and item.get_closest_marker(_FOLDER_MARKERS[suite]) is None:
            unmarked.append(item.nodeid)
    if unmarked:
        raise pytest.UsageError(f"tests without their folder's marker: {', '.join(unmarked[:10])}")


EARLY_REPORT_LINES = 25


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Say why a test failed the moment it fails, not only in the summary: a long run that is
    stopped before its end (a CI limit, a person) still tells what went wrong."""
    report = yield
    if report.failed:
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        tail = "\n".join(report.longreprtext.splitlines()[-EARLY_REPORT_LINES:])
        if reporter is not None:
            reporter.write_line(f"\nFAILED {item.nodeid} ({report.when}):\n{tail}", red=True)
    return report


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process it started is still alive once every fixture has stopped."""
    mark = os.environ[TEST_RUN_ENV]
    deadline = time.monotonic() + LEFTOVER_WAIT_S
    left = processes_marked(TEST_RUN_ENV, mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)  # processes on their way out, bounded
        left = processes_marked(TEST_RUN_ENV, mark)
    if not left:
        return
    names = ", ".join(f"{p.pid} ({p.name})" for p in left)
    end_processes(left, grace_s=2.0)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"the test run left {len(left)} process(es) alive, now ended: {names}"
    if reporter is not None:
        reporter.write_line(message, red=True)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
