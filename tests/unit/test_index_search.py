"""storage.index_search: a Recall replica searches a Milvus server it opens on first use, retries
a failed open only after a pause, and gets no index over a milvus-lite file (one owner: the shard)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engram.models.settings import StorageSettings
from engram.storage.index_search import RETRY_S, IndexSearch, index_search
from engram.storage.vectors import MilvusVectorStore, is_server_uri
from tests.conftest import ManualMonotonic

pytestmark = pytest.mark.unit


def test_only_a_server_uri_gives_an_index_search(tmp_path: Path) -> None:
    assert index_search(StorageSettings(data_dir=tmp_path), 512) is None  # milvus-lite under data_dir
    assert index_search(StorageSettings(data_dir=tmp_path, milvus_uri=str(tmp_path / "v.db")), 512) is None
    server = StorageSettings(data_dir=tmp_path, milvus_uri="http://m:19530")
    assert isinstance(index_search(server, 8), IndexSearch)
    assert is_server_uri("https://milvus.internal:443") and not is_server_uri("/data/vectors.db")


async def test_a_failed_open_is_retried_only_after_the_pause(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualMonotonic()
    # Nothing listens on port 1: the open fails at once.
    search = IndexSearch(MilvusVectorStore("http://127.0.0.1:1", "c", 8), clock=clock)
    with caplog.at_level(logging.WARNING, logger="engram.storage.index_search"):
        assert not await search.ready()
        clock.now += RETRY_S / 2
        assert not await search.ready()
        assert len(caplog.records) == 1, "no second try within the pause"
        clock.now += RETRY_S
        assert not await search.ready()
    assert len(caplog.records) == 2
    assert "MilvusException" in caplog.records[0].getMessage()
    await search.close()  # never opened: nothing to close, no error
