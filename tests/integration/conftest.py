"""Fixtures the integration tests share: the sweeps' stores over the test's stores, mailboxes, and
one Milvus server for the run."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from engram.actors.mailbox import MailboxHost
from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.context import LifecycleStores
from engram.models.settings import Settings
from engram.storage.stores import Stores
from tests.support.machine_lock import machine_lock
from tests.support.milvus_dev import dev_services


@pytest.fixture
def lifecycle(settings: Settings, stores: Stores, tmp_path: Path) -> LifecycleStores:
    """The lifecycle's stores over the test's stores, with a cold archive in the test's directory."""
    archive = ColdArchive(LocalDirObjectStore(tmp_path / "archive"))
    return LifecycleStores(settings, stores.metadata, stores.vectors, stores.embedder, archive)


@pytest.fixture
async def host() -> AsyncIterator[MailboxHost]:
    """Per-user mailboxes, as the shard runs each user's sweep."""
    mailboxes = MailboxHost(reap_every_s=0)
    yield mailboxes
    await mailboxes.close()


@pytest.fixture(scope="session")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Milvus standalone server (``engram dev-services``) shared by the run's tests that need one;
    ENGRAM_TEST_MILVUS_URI names one already running instead (one server per machine: its etcd
    ports are fixed)."""
    running = os.environ.get("ENGRAM_TEST_MILVUS_URI")
    if running:
        yield running
        return
    with machine_lock("milvus-server"):
        yield from dev_services(tmp_path_factory)
