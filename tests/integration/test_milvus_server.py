"""The vector store on a real Milvus standalone server, started by ``engram dev-services``.

The milvus-lite suite's tests of search, scopes, filters, deletes and upserts
(tests/integration/test_vectors.py) are imported and run here against the server through this
module's ``store`` fixture: the two back ends must agree. (The id and expression checks are the
same code on both and run once, there.)
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from engram.storage.vectors import MilvusVectorStore
from tests.conftest import POSTGRES_URL
from tests.integration.test_vectors import (
    COLLECTION,
    DIM,
    test_delete_and_delete_user,
    test_ownership_and_mem_type_filters,
    test_scope_levels_and_users_never_leak,
    test_search_returns_nearest_first_with_cosine_scores,
    test_upsert_replaces_vector_and_scope,
)
from tests.support.machine_lock import machine_lock
from tests.support.net import free_port

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

__all__ = [
    "test_delete_and_delete_user",
    "test_ownership_and_mem_type_filters",
    "test_scope_levels_and_users_never_leak",
    "test_search_returns_nearest_first_with_cosine_scores",
    "test_upsert_replaces_vector_and_scope",
]


def _first_line(stream: object, timeout_s: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()  # type: ignore[attr-defined]
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        raise AssertionError(f"engram dev-services printed nothing within {timeout_s:.0f} s") from None


@pytest.fixture(scope="module")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with machine_lock("milvus-server"):
        yield from _dev_services(tmp_path_factory)


def _dev_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("milvus-server")
    database = str(make_url(POSTGRES_URL).set(database="engram_dev_services_test").render_as_string(False))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engram.serve.cli",
            "dev-services",
            "--data",
            str(data),
            "--milvus-port",
            str(free_port()),
            "--database-url",
            database,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        started = json.loads(_first_line(process.stdout, 240))
        assert "error" not in started, started
        assert started["database_url"] == "postgresql+asyncpg"  # no credentials printed
        yield str(started["milvus_uri"])
    finally:
        # SIGTERM (what kill, systemd and container runtimes send) once left both running.
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    assert code == 0
    # The server binary went with it (its process group was stopped, not only the launcher).
    left = subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == ""


@pytest.fixture
async def store(milvus_uri: str) -> AsyncIterator[MilvusVectorStore]:
    from pymilvus import MilvusClient

    collection = f"{COLLECTION}_{uuid.uuid4().hex[:8]}"
    vectors = MilvusVectorStore(milvus_uri, collection, DIM)
    await vectors.start()
    yield vectors
    await vectors.close()
    client = MilvusClient(uri=milvus_uri)
    client.drop_collection(collection)
    client.close()


async def test_a_second_client_sees_the_first_ones_writes(milvus_uri: str, tmp_path: Path) -> None:
    # Shards and the sweep are separate processes: the server's Strong consistency makes one
    # process's upsert visible to the next read of any other.
    from tests.integration.test_vectors import rec

    collection = f"{COLLECTION}_{uuid.uuid4().hex[:8]}"
    writer, reader = (MilvusVectorStore(milvus_uri, collection, DIM) for _ in range(2))
    await writer.start()
    await reader.start()
    try:
        record = rec()
        await writer.upsert([record])
        assert await reader.memory_ids(record.user_id) == [record.memory_id]
        assert set(await reader.get_vectors([record.memory_id])) == {record.memory_id}
    finally:
        await writer.close()
        await reader.close()
