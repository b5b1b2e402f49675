"""One master key for every process (#12, P3): a process without it, or with another one, refuses
to start with the reason and never creates a second key; providers by configuration."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from engram.actors.memory_service import MemoryService
from engram.models.settings import Settings
from engram.storage.crypto import MasterKeyError, SecretKeyProvider, read_key_file
from engram.storage.embedders import Embedder
from engram.storage.keyring import key_provider_for, master_key_check
from engram.storage.stores import open_stores
from tests.support import kms
from tests.support.service import recall_ids, remember

pytestmark = pytest.mark.integration


async def _store_one(settings: Settings, embedder: Embedder) -> str:
    stores = await open_stores(settings, embedder=embedder)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        return await remember(service, "Keeps bees on the roof", "beekeeper")
    finally:
        await stores.close()


def _settings(data: Path, **storage: object) -> Settings:
    return Settings(storage={"data_dir": data, **storage}, recall={"timeout_ms": 30_000})


async def test_a_process_without_the_master_key_refuses_and_creates_none(
    tmp_path: Path, embedder: Embedder
) -> None:
    data = tmp_path / "data"
    await _store_one(_settings(data), embedder)  # the first start of an empty store makes the key
    assert (data / "master.key").exists()
    elsewhere = tmp_path / "other-node" / "master.key"
    other_node = _settings(data, master_key_file=str(elsewhere))
    with pytest.raises(MasterKeyError, match="holds 1 wrapped data keys but this process has no master key"):
        await open_stores(other_node, embedder=embedder)
    with pytest.raises(MasterKeyError, match="no master key"):
        await master_key_check(other_node.storage)  # what a recall replica runs at start
    assert not elsewhere.exists()  # never a second master key


async def test_another_master_key_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    data = tmp_path / "data"
    await _store_one(_settings(data), embedder)
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(base64.b64encode(bytes(32)) + b"\n")
    other = _settings(data, master_key_file=str(wrong))
    with pytest.raises(MasterKeyError, match="do not open with the master key file"):
        await open_stores(other, embedder=embedder)
    with pytest.raises(MasterKeyError, match="do not open"):
        await master_key_check(other.storage)


async def test_a_reader_of_an_empty_store_waits_for_the_first_writer(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "data")
    await master_key_check(settings.storage)  # not even migrated yet: nothing to check
    assert not settings.storage.resolved_master_key_file().exists()


async def test_a_secret_master_key_from_the_environment_opens_the_store(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    memory_id = await _store_one(_settings(data), embedder)
    key = read_key_file(data / "master.key")
    (data / "master.key").unlink()  # the cluster's secret is the only copy now
    monkeypatch.setenv("ENGRAM_MASTER_KEY", base64.b64encode(key).decode())
    settings = _settings(data, key_provider="secret")
    stores = await open_stores(settings, embedder=embedder)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        assert await recall_ids(service, "who keeps bees", "beekeeper") == [memory_id]
    finally:
        await stores.close()
    assert not (data / "master.key").exists()
    monkeypatch.setenv("ENGRAM_MASTER_KEY", base64.b64encode(bytes(32)).decode())
    with pytest.raises(MasterKeyError, match="secret master key from \\$ENGRAM_MASTER_KEY"):
        await open_stores(settings, embedder=embedder)
    monkeypatch.delenv("ENGRAM_MASTER_KEY")
    with pytest.raises(MasterKeyError, match="holds no master key"):
        key_provider_for(settings.storage)


def test_a_secret_file_stands_in_for_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGRAM_MASTER_KEY", raising=False)
    secret = tmp_path / "mounted" / "master.key"
    secret.parent.mkdir()
    secret.write_bytes(base64.b64encode(bytes(range(32))))
    provider = key_provider_for(
        _settings(tmp_path, key_provider="secret", master_key_file=str(secret)).storage
    )
    assert isinstance(provider, SecretKeyProvider)
    assert provider.unwrap(provider.wrap(b"k" * 32, "u1"), "u1") == b"k" * 32
    secret.write_text("not base64!")
    with pytest.raises(MasterKeyError, match="base64"):
        key_provider_for(_settings(tmp_path, key_provider="secret", master_key_file=str(secret)).storage)


async def test_a_kms_provider_is_built_by_import_path(tmp_path: Path, embedder: Embedder) -> None:
    settings = _settings(tmp_path / "data", key_provider="tests.support.kms:provider")
    memory_id = await _store_one(settings, embedder)
    assert kms.built and not settings.storage.resolved_master_key_file().exists()
    stores = await open_stores(settings, embedder=embedder)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        assert await recall_ids(service, "who keeps bees", "beekeeper") == [memory_id]
    finally:
        await stores.close()
    # The same store under the local file provider: its (new) key is not the KMS's, refused.
    with pytest.raises(MasterKeyError):
        await open_stores(_settings(tmp_path / "data"), embedder=embedder)
