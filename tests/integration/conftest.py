"""Fixtures the lifecycle tests share: the sweeps' stores over the test's stores, and mailboxes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engram.actors.mailbox import MailboxHost
from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.context import LifecycleStores
from engram.models.settings import Settings
from engram.storage.stores import Stores


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
