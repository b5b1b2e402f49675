"""The composition root: the memory core of one process, built from ``Settings`` and its stores.

A shard (serve/shard.py), the tests and the README's library example get their core here, and
nowhere else is any of it wired: the MemoryService with its engine, the durable WritePath, the
lifecycle stores, the services over them (session close with compression, profile refresh, privacy,
quarantine) and the hooks that tie them together (the write path's export handler and change
listener, the lifecycle's summariser). A Recall replica, which only reads, gets its Recaller from
``build_recaller``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from engram.actors.compression import EngineSummarizer
from engram.actors.engines.base import Engine
from engram.actors.mailbox import MailboxHost
from engram.actors.memory_service import MemoryService
from engram.actors.privacy import KIND_EXPORT, PrivacyService
from engram.actors.profile import ProfileRefresher, Profiles
from engram.actors.quarantine import QuarantineService
from engram.actors.recall import Recaller
from engram.actors.session_close import SessionCloser
from engram.actors.snapshot import VectorSource
from engram.actors.write_path import WritePath
from engram.lifecycle.archive import ColdArchive, build_archive
from engram.lifecycle.compression import Compressor
from engram.lifecycle.context import LifecycleStores
from engram.models.domain import utcnow
from engram.models.settings import Settings
from engram.storage.database import create_engine
from engram.storage.embedders import Embedder
from engram.storage.index_search import index_search
from engram.storage.keyring import keyring_for
from engram.storage.metadata import MetadataStore
from engram.storage.stores import Stores


@dataclass
class MemoryCore:
    """Everything one process serves operations with (``serve/local_backend.py`` turns it into the
    operations)."""

    service: MemoryService
    write_path: WritePath
    lifecycle: LifecycleStores
    profiles: Profiles
    profile_refresher: ProfileRefresher
    session_closer: SessionCloser
    privacy: PrivacyService
    quarantine: QuarantineService

    @property
    def settings(self) -> Settings:
        """The settings the core was built with."""
        return self.service.settings


def build_core(
    settings: Settings,
    stores: Stores,
    *,
    engine: Engine | None = None,
    recall_vectors: VectorSource | None = None,
    archive: ColdArchive | None = None,
    clock: Callable[[], datetime] = utcnow,
    host: MailboxHost | None = None,
    shard: int = 0,
) -> MemoryCore:
    """The core over ``stores``: ``engine`` defaults to ``settings.engine``, ``recall_vectors`` to
    the vector store, ``archive`` to ``storage.archive``'s; ``shard`` labels the write path's gauge."""
    service = MemoryService(
        settings,
        stores.metadata,
        stores.vectors,
        stores.embedder,
        clock=clock,
        engine=engine,
        recall_vectors=recall_vectors,
    )
    lifecycle = LifecycleStores(
        settings, stores.metadata, stores.vectors, stores.embedder, archive or build_archive(settings)
    )
    return wire_core(service, WritePath(service, host, shard=shard), lifecycle)


def wire_core(
    service: MemoryService, write_path: WritePath, lifecycle: LifecycleStores | None = None
) -> MemoryCore:
    """The services over a MemoryService and its write path, hooked together (``build_core`` ends
    here; a test that needs its own engine, clock or mailboxes builds those two and starts here).

    Call before the write path resumes any task: it registers the task kinds (export) that a
    resumed task may have."""
    settings = service.settings
    lifecycle = lifecycle or LifecycleStores(
        settings, service.metadata, service.vectors, service.embedder, build_archive(settings)
    )
    # Compression (L5) lives in lifecycle, the engine in actors: the summary is wired here.
    if lifecycle.summarize is None:
        lifecycle.summarize = EngineSummarizer(service.ingestor.engine, settings.evolution)
    compressor = Compressor(lifecycle)
    session_closer = SessionCloser(
        service,
        compress=lambda user_id, app_ids: compressor.compress_user(user_id, service.clock(), app_ids=app_ids),
    )
    # The profile (L7) is rebuilt after writes, once the shard's pending write tasks are done:
    # a refresh reads and decrypts every memory of the user, too much to pay on every write.
    profiles = service.recaller.profiles
    refresher = ProfileRefresher(
        profiles,
        write_path.host,
        busy=lambda: write_path.pending_tasks > 0,
        max_delay_s=settings.profile.refresh_max_delay_s,
    )
    write_path.on_change = refresher.changed
    privacy = PrivacyService(service, lifecycle.archive)
    write_path.handlers[KIND_EXPORT] = privacy.run_export
    return MemoryCore(
        service=service,
        write_path=write_path,
        lifecycle=lifecycle,
        profiles=profiles,
        profile_refresher=refresher,
        session_closer=session_closer,
        privacy=privacy,
        quarantine=QuarantineService(service),
    )


def build_recaller(settings: Settings, vectors: VectorSource, embedder: Embedder) -> Recaller:
    """The read side alone, for a process that answers recall and writes nothing (a Recall
    replica): its own metadata store over ``storage``'s database, vectors from ``vectors``.
    Call on the event loop that will use it (an async engine belongs to its loop)."""
    storage = settings.storage
    metadata = MetadataStore(
        create_engine(storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms),
        keyring_for(storage),
    )
    index = index_search(storage, embedder.dim) if settings.recall.cold_from_index else None
    return Recaller(settings, metadata, vectors, embedder, utcnow, index)
