"""The Engram Ray Serve application: an HTTP + handle ingress, a recall deployment, shard actors.

``serve run serve.app:app`` (defaults) or ``serve.run(build_app(settings))``; ``cluster/`` holds
the Serve config. The ingress answers the HTTP contract and, for Python callers, the same
operations over ``serve.get_app_handle(name)`` with the same models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.actor import ActorHandle
from ray.serve import Application
from ray.serve.handle import DeploymentHandle

from actors.recall import Recaller
from models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchDeleteRequest,
    ChangeLogPage,
    ChangeLogRequest,
    DeleteRequest,
    DeleteResult,
    HistoryRequest,
    HistoryResponse,
    MemoryCreated,
    MemoryView,
    RecallRequest,
    RecallResponse,
    TaskAccepted,
    TaskRequest,
    TaskView,
    UpdateRequest,
)
from models.domain import utcnow
from models.settings import Settings, load_settings
from serve import app_state
from serve.http_app import build_http_app
from serve.ray_backend import RayBackend
from serve.settings_update import apply_overrides
from serve.shard import ShardActor, shard_name, shard_of
from storage.crypto import LocalKeyFileProvider
from storage.database import create_engine
from storage.embedders import build_embedder
from storage.keyring import KeyRing
from storage.metadata import MetadataStore

api = build_http_app(app_state.current)


def shard_actors(settings: Settings) -> list[ActorHandle[Any]]:
    """The app's shard actors, created on first use (detached: they outlive an ingress restart)."""
    return [
        ShardActor.options(  # type: ignore[attr-defined]
            name=shard_name(settings.serve.app_name, i), get_if_exists=True, lifetime="detached"
        ).remote(settings, i)
        for i in range(settings.serve.shard_count)
    ]


class _ShardVectors:
    """Vectors for recall snapshots, read through the shard that owns the vector store."""

    def __init__(self, shards: Sequence[ActorHandle[Any]]) -> None:
        self._shards = shards

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        # Every shard reaches the same vectors (one milvus-lite owner, or one Milvus server).
        result: dict[str, np.ndarray] = await self._shards[0].get_vectors.remote(list(memory_ids))
        return result


@serve.deployment(name="Recall", max_ongoing_requests=100)
class RecallDeployment:
    """Recall (R1-R6) over per-user snapshots held in this replica; hit bookkeeping goes to the shard."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._shards = shard_actors(settings)
        self._recaller: Recaller | None = None
        self._embedder = build_embedder(settings.embedder)
        warm_up = getattr(self._embedder, "warm_up", None)
        if callable(warm_up):
            warm_up()  # ~1.4 s of weight loading belongs to start-up, not to a 500 ms recall

    def _get(self) -> Recaller:
        # Engines are created lazily on the replica's own event loop (DESIGN, Ray facts).
        if self._recaller is None:
            storage = self.settings.storage
            metadata = MetadataStore(
                create_engine(
                    storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms
                ),
                KeyRing(LocalKeyFileProvider(storage.resolved_master_key_file())),
            )
            self._recaller = Recaller(
                self.settings, metadata, _ShardVectors(self._shards), self._embedder, utcnow
            )
        return self._recaller

    async def recall(self, request: RecallRequest) -> RecallResponse:
        outcome = await self._get().recall(request)
        if outcome.hit_ids:
            shard = self._shards[shard_of(request.user_id, len(self._shards))]
            shard.record_recall_hits.remote(request.user_id, outcome.hit_ids, utcnow())
        return outcome.response

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Serve ``user_config``: settings overrides applied without a restart (O1)."""
        apply_overrides(self.settings, config)


@serve.deployment(name="Ingress")
@serve.ingress(api)
class Ingress:
    """HTTP routes (through ``api``) and the same operations as Python methods for handles."""

    def __init__(self, recall: DeploymentHandle[Any], settings: Settings) -> None:
        self.settings = settings
        self._shards = shard_actors(settings)
        ray.get([shard.ready.remote() for shard in self._shards])  # stores open, tasks resumed
        self._backend = RayBackend(self._shards, recall)
        app_state.install(self._backend)

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Serve ``user_config``: forwarded to every shard by message (O1)."""
        apply_overrides(self.settings, config)
        ray.get([shard.reconfigure.remote(config) for shard in self._shards])

    async def add(self, r: AddRequest) -> TaskAccepted:
        return await self._backend.add(r)

    async def task(self, r: TaskRequest) -> TaskView:
        return await self._backend.task(r)

    async def add_structured(self, r: AddStructuredRequest) -> MemoryCreated | TaskAccepted:
        return await self._backend.add_structured(r)

    async def recall(self, r: RecallRequest) -> RecallResponse:
        return await self._backend.recall(r)

    async def update(self, r: UpdateRequest) -> MemoryView:
        return await self._backend.update(r)

    async def delete(self, r: DeleteRequest) -> DeleteResult:
        return await self._backend.delete(r)

    async def batch_delete(self, r: BatchDeleteRequest) -> DeleteResult:
        return await self._backend.batch_delete(r)

    async def history(self, r: HistoryRequest) -> HistoryResponse:
        return await self._backend.history(r)

    async def change_log(self, r: ChangeLogRequest) -> ChangeLogPage:
        return await self._backend.change_log(r)


def build_app(settings: Settings | None = None, user_config: dict[str, Any] | None = None) -> Application:
    """The application for ``settings`` (default: ``ENGRAM_CONFIG`` / environment)."""
    settings = settings or load_settings()
    if not settings.storage.milvus_uri and settings.serve.shard_count != 1:
        raise ValueError(
            "the embedded milvus-lite has one owner: serve.shard_count must be 1 without a Milvus URI"
        )
    config = user_config or {}
    recall = RecallDeployment.options(  # type: ignore[attr-defined]
        num_replicas=settings.serve.recall_replicas,
        max_ongoing_requests=settings.serve.max_ongoing_requests,
        user_config=config,
    ).bind(settings)
    ingress: Application = Ingress.options(  # type: ignore[attr-defined]
        max_ongoing_requests=settings.serve.max_ongoing_requests, user_config=config
    ).bind(recall, settings)
    return ingress


def app_builder(args: dict[str, str]) -> Application:
    """``serve run serve.app:app_builder config=engram.yaml``: the app for a settings file."""
    return build_app(load_settings(args.get("config")))


app = build_app()
