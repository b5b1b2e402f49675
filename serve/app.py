"""The Engram Ray Serve applications: an HTTP + handle ingress, a recall deployment, shard actors.

Two Serve applications share one Serve instance: the main one (``build_app``: the Ingress and the
Extraction deployment) at ``/``, and the recall one (``build_recall_app``: the Recall deployment)
at ``/memory/v1/recall``, so that an HTTP recall reaches its replica without a second hop.
``deploy(settings)`` runs both; ``cluster/serve_config.yaml`` declares both through the
application builders (``app_builder``, ``recall_app_builder``). Importing this module builds no
application and reads no settings. The ingress answers
the HTTP contract and, for Python callers, the same operations (recall included) over
``serve.get_app_handle(name)`` with the same models.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from fastapi import FastAPI
from pydantic import BaseModel
from ray import serve
from ray.actor import ActorHandle
from ray.serve import Application, RunTarget
from ray.serve.handle import DeploymentHandle

from engram.actors.hit_buffer import HitBuffer, RecallHits
from engram.actors.recall import Recaller
from engram.actors.snapshot import SnapshotCache
from engram.models.api import RecallRequest, RecallResponse
from engram.models.errors import EngramError, ErrorCode
from engram.models.privacy import ExportDownloadRequest, MemoryAppsRequest
from engram.models.rules.sharding import shard_of
from engram.models.rules.task_reach import TaskOwner
from engram.models.settings import Settings, load_settings
from engram.serve.auth import Authenticator, startup_notice
from engram.serve.backend import EngramBackend
from engram.serve.extraction import ExtractionDeployment, extraction_options
from engram.serve.handle_lookup import LazyDeploymentHandle
from engram.serve.heap import FULL_COLLECTIONS, freeze_long_lived, heap_census, resident_bytes
from engram.serve.http_app import RECALL_PATH, build_http_app
from engram.serve.memory_core import build_recaller
from engram.serve.metrics import install_ray_metrics
from engram.serve.network import start_decision
from engram.serve.operation_methods import OperationMethods
from engram.serve.operations import BY_NAME, Operation, Operations
from engram.serve.rate_limit import RateLimitedBackend, RateLimiter
from engram.serve.ray_backend import RayBackend
from engram.serve.replica_loopback import bind_replica_grpc_to_loopback
from engram.serve.scaling import replica_options
from engram.serve.settings_update import apply_overrides
from engram.serve.shard import ShardActor, shard_options
from engram.serve.shard_vectors import ShardVectors
from engram.serve.sweep_scheduler import start_scheduler
from engram.serve.switch_gate import GatedBackend
from engram.serve.tracing import continue_trace, sync_tracing
from engram.serve.warm_up import warm_up
from engram.storage.embedders import build_embedder
from engram.storage.keyring import master_key_check
from engram.storage.switch_reader import SwitchReader

log = logging.getLogger(__name__)


def recall_app_name(settings: Settings) -> str:
    """The Serve application of the Recall deployment, beside ``serve.app_name``."""
    return f"{settings.serve.app_name}-recall"


Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")


class _RecallRoute:
    """The backend of the recall-only HTTP app: this replica's own recall (its only operation)."""

    def __init__(self, deployment: RecallDeployment) -> None:
        self._deployment = deployment

    async def call(self, op: Operation[Req, Res], request: Req) -> Res:
        if op is not Operations.recall:
            raise EngramError(ErrorCode.NOT_FOUND, f"the recall app has no {op.name}")
        result = await self._deployment.recall(cast(RecallRequest, request))
        if isinstance(result, EngramError):
            raise result
        return cast(Res, result)

    # The recall app serves no route that needs a helper; asked anyway, it says so.
    async def export_chunk(
        self, request: ExportDownloadRequest, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        raise EngramError(ErrorCode.NOT_FOUND, "the recall app has no export")

    async def memory_apps(self, request: MemoryAppsRequest) -> dict[str, str]:
        raise EngramError(ErrorCode.NOT_FOUND, "the recall app reads no memory's app")

    async def switches(self, user_id: str) -> Mapping[str, bool]:
        raise EngramError(ErrorCode.NOT_FOUND, "the recall app reads no switches")

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        raise EngramError(ErrorCode.NOT_FOUND, "the recall app reads no task")


def shard_actors(settings: Settings) -> list[ActorHandle[Any]]:
    """The app's shard actors, created on first use (detached: they outlive an ingress restart)."""
    return [
        ShardActor.options(**shard_options(settings, i)).remote(settings, i)  # type: ignore[attr-defined]
        for i in range(settings.serve.shard_count)
    ]


@serve.deployment(name="Recall", max_ongoing_requests=100)
# Each replica builds its FastAPI app once constructed (``__serve_build_asgi_app__``): the routes
# close over that replica's backend and authenticator; nothing is built at import, and no route
# can run before both exist. HTTP recall goes straight to the Recall deployment (its own Serve
# application at RECALL_PATH): through the Ingress it cost a second replica hop (docs/benchmarks.md).
@serve.ingress()
class RecallDeployment:
    """Recall (R1-R6) over per-user snapshots held in this replica; hit bookkeeping goes to the shard.

    Answers HTTP recall itself (rate limit, switch gate and authentication as the Ingress applies
    them) and ``recall`` for handles (the Ingress forwards Python callers' recalls here).
    """

    # Serve awaits an async constructor on the replica's event loop.
    async def __init__(self, settings: Settings) -> None:  # type: ignore[misc]
        install_ray_metrics()
        sync_tracing(settings.tracing, "recall")
        bind_replica_grpc_to_loopback()  # before Serve starts it, after this constructor
        FULL_COLLECTIONS.install()
        self.settings = settings
        # A replica on a node without the master key refuses to start, saying why (it reads
        # content and never writes keys, so it creates none).
        await master_key_check(settings.storage)
        self._shards = shard_actors(settings)
        self._gate = GatedBackend(_RecallRoute(self), SwitchReader(settings.storage))
        self._http_backend: EngramBackend = RateLimitedBackend(self._gate, RateLimiter(settings.limits))
        self._authenticator = Authenticator(settings.auth, settings.limits)
        self._recaller: Recaller | None = None
        self._hits: HitBuffer | None = None
        self._embedder = build_embedder(settings.embedder)
        warm_up = getattr(self._embedder, "warm_up", None)
        if callable(warm_up):
            warm_up()  # ~1.4 s of weight loading belongs to start-up, not to a 500 ms recall
        self._warm_state: dict[str, float] = {"done": 0.0, "users": 0.0, "seconds": 0.0}
        # The constructor runs on the replica's event loop: the warm-up continues in the background
        # once the replica serves.
        self._warming = asyncio.get_running_loop().create_task(self._warm_snapshots())

    async def _warm_snapshots(self) -> None:
        limit = self.settings.recall.warm_users
        self._warm_state = await warm_up(self._shards_ready, self._get().snapshots, limit)

    async def _shards_ready(self) -> None:
        await asyncio.gather(*(shard.ready.remote() for shard in self._shards))

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The recall-only HTTP app of this replica (called by Serve once the constructor is done)."""
        return build_http_app(
            lambda: self._http_backend,
            auth=lambda: self._authenticator,
            max_body_bytes=self.settings.limits.max_request_bytes,
            recall_only=True,
        )

    def gate_stats(self) -> dict[str, int]:
        """HTTP recalls the switch gate of this replica refused and passed (counts only)."""
        return self._gate.stats()

    async def warm_status(self) -> dict[str, float]:
        """The warm-up (done, users, seconds, objects frozen); snapshots and bytes held, recalls that
        found theirs (``hits``), were answered cold (``colds``, from a Milvus server's index:
        ``index_searches``) or loaded it (``loads``, ``background_loads`` after cold recalls); the
        replica's ``rss_bytes`` and ``pid``; its ``full_collections`` and ``full_collection_ms``."""
        recaller = self._recaller
        held = recaller.snapshots.counts() if recaller is not None else SnapshotCache.nothing()
        index = recaller.index if recaller is not None else None
        process = {
            "rss_bytes": float(resident_bytes()),
            "pid": float(os.getpid()),
            **FULL_COLLECTIONS.figures(),
            "index_searches": float(getattr(index, "searches", 0)),
        }
        return {**self._warm_state, **held, **process}

    def heap_census(self) -> dict[str, int]:
        """What this replica's full garbage collections walk, by type name (``serve.heap``)."""
        return heap_census()

    def _get(self) -> Recaller:
        # Engines are created lazily on the replica's own event loop (DESIGN, Ray facts).
        if self._recaller is None:
            vectors = ShardVectors([shard.get_vectors.remote for shard in self._shards])
            self._recaller = build_recaller(self.settings, vectors, self._embedder)
        return self._recaller

    async def recall(self, request: RecallRequest) -> RecallResponse | EngramError:
        """The answer, or the expected error as a value (``ray_backend.unwrap`` raises it)."""
        try:
            return await self._get().recall(request, hits=self._hit_buffer().add)
        except EngramError as exc:
            return exc

    async def traced(
        self, op_name: str, request: RecallRequest, carrier: dict[str, str]
    ) -> RecallResponse | EngramError:
        """``recall`` under the caller's trace (``ray_backend.sent``; the only operation here)."""
        if op_name != Operations.recall.name:
            return EngramError(ErrorCode.NOT_FOUND, f"the recall app has no {op_name}")
        attributes = {"engram.op": op_name}
        return await continue_trace(
            carrier, "engram.recall.replica", attributes, lambda: self.recall(request)
        )

    def _hit_buffer(self) -> HitBuffer:
        if self._hits is None:
            recall = self.settings.recall
            self._hits = HitBuffer(
                self._send_hits, flush_after_s=recall.hit_flush_ms / 1000, max_batch=recall.hit_batch_max
            )
        return self._hits

    async def _send_hits(self, batch: list[RecallHits]) -> None:
        by_shard: dict[int, list[RecallHits]] = {}
        for hits in batch:
            by_shard.setdefault(shard_of(hits.user_id, len(self._shards)), []).append(hits)
        await asyncio.gather(
            *(self._shards[i].record_recall_hit_batch.remote(part) for i, part in by_shard.items())
        )

    async def flush_hits(self) -> int:
        """Send buffered recall-hit bookkeeping now (tests, shutdown); returns how many were waiting."""
        waiting = self._hits.pending if self._hits is not None else 0
        if self._hits is not None:
            await self._hits.flush()
        return waiting

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Serve ``user_config``: settings overrides applied without a restart (O1)."""
        apply_overrides(self.settings, config)
        sync_tracing(self.settings.tracing, "recall")


@serve.deployment(name="Ingress")
@serve.ingress()
class Ingress(OperationMethods):
    """HTTP routes and, for Python callers, every table operation as a handle method
    (``OperationMethods``: ``handle.add.remote(request)``)."""

    # Serve awaits an async constructor on the replica's event loop: nothing here blocks it.
    async def __init__(  # type: ignore[misc]
        self, settings: Settings, extraction: DeploymentHandle[Any] | None = None
    ) -> None:
        """``extraction``: the engine deployment the shards call (bound here so the app deploys it)."""
        install_ray_metrics()
        sync_tracing(settings.tracing, "ingress")
        bind_replica_grpc_to_loopback()  # before Serve starts it, after this constructor
        self.settings = settings
        self._extraction = extraction
        self._shards = shard_actors(settings)
        await asyncio.gather(*(shard.ready.remote() for shard in self._shards))  # stores open, tasks resumed
        # Switches are checked here, before any work is sent on (P1); auth guards the routes (P4).
        self._switches = SwitchReader(settings.storage)
        # Looked up on the first recall: deployed together (serve deploy), the recall app may not be
        # registered yet while this replica starts.
        recall = LazyDeploymentHandle(
            RecallDeployment.name,  # type: ignore[attr-defined]
            recall_app_name(settings),
            wait_s=settings.serve.deployment_wait_s,
        )
        self._gate = GatedBackend(RayBackend(self._shards, recall), self._switches)
        # Rate limits first: a runaway caller costs no switch lookup either (42903).
        self._limited = RateLimitedBackend(self._gate, RateLimiter(settings.limits))
        self._backend: EngramBackend = self._limited
        self._authenticator = Authenticator(settings.auth, settings.limits)
        startup_notice(settings.auth, settings.serve.host)
        # One per app, however many Ingress replicas; it reads lifecycle.scheduler_enabled each day.
        self._scheduler = start_scheduler(settings)
        freeze_long_lived()  # a full collection of the start-up heap stalled every request

    def __serve_build_asgi_app__(self) -> FastAPI:
        """This replica's HTTP app (called by Serve once the constructor is done)."""
        return build_http_app(
            lambda: self._backend,
            auth=lambda: self._authenticator,
            max_body_bytes=self.settings.limits.max_request_bytes,
            mcp=self.settings.serve.mcp,
        )

    async def operation_backend(self) -> EngramBackend:
        return self._backend

    async def traced(self, op_name: str, request: BaseModel, carrier: dict[str, str]) -> Any:
        """Operation ``op_name`` for a Python caller that passes its trace-context headers
        (``{"traceparent": ...}``): the spans of the call continue the caller's trace."""
        op = BY_NAME.get(op_name)
        if op is None:
            raise EngramError(ErrorCode.NOT_FOUND, f"no operation {op_name!r}")
        backend = self._backend
        return await continue_trace(
            carrier, f"engram.{op_name}", {"engram.op": op_name}, lambda: backend.call(op, request)
        )

    def gate_stats(self) -> dict[str, int]:
        """Calls the switch gate of this replica refused and passed (counts only)."""
        return self._gate.stats()

    async def reconfigure(self, config: dict[str, Any]) -> None:
        """Serve ``user_config``: forwarded to every shard and the sweep scheduler by message (O1)."""
        apply_overrides(self.settings, config)
        sync_tracing(self.settings.tracing, "ingress")
        await asyncio.gather(
            *(shard.reconfigure.remote(config) for shard in self._shards),
            self._scheduler.reconfigure.remote(config),
        )


def _checked(settings: Settings | None) -> Settings:
    settings = settings or load_settings()
    # Every way of deploying (engram serve, serve_config.yaml on a cluster, the tests) passes here:
    # a cluster profile without Ray's token authentication is refused (serve/network.py).
    network = start_decision(settings.serve, os.environ)
    if network.refusal is not None:
        raise ValueError(network.refusal)
    if network.warning is not None:
        log.warning(network.warning)
    if not settings.storage.milvus_uri and settings.serve.shard_count != 1:
        raise ValueError(
            "the embedded milvus-lite has one owner: serve.shard_count must be 1 without a Milvus URI"
        )
    return settings


def build_app(settings: Settings | None = None, user_config: dict[str, Any] | None = None) -> Application:
    """The main application (every route but recall) for ``settings`` (default: ``ENGRAM_CONFIG``)."""
    settings = _checked(settings)
    config = user_config or {}
    cpus = {"num_cpus": settings.serve.replica_cpus}
    extraction = (
        ExtractionDeployment.options(  # type: ignore[attr-defined]
            **extraction_options(settings), user_config=config
        ).bind(settings)
        if settings.serve.extraction_replicas
        else None
    )
    ingress: Application = Ingress.options(  # type: ignore[attr-defined]
        **replica_options(settings.serve.ingress_autoscaling),
        max_ongoing_requests=settings.serve.max_ongoing_requests,
        ray_actor_options=cpus,
        user_config=config,
    ).bind(settings, extraction)
    return ingress


def build_recall_app(
    settings: Settings | None = None, user_config: dict[str, Any] | None = None
) -> Application:
    """The recall application, served at ``RECALL_PATH`` beside the main one."""
    settings = _checked(settings)
    recall: Application = RecallDeployment.options(  # type: ignore[attr-defined]
        **replica_options(settings.serve.recall_autoscaling, settings.serve.recall_replicas),
        ray_actor_options={"num_cpus": settings.serve.replica_cpus},
        max_ongoing_requests=settings.serve.max_ongoing_requests,
        user_config=user_config or {},
    ).bind(settings)
    return recall


def deploy(settings: Settings, user_config: dict[str, Any] | None = None) -> None:
    """Run (or update in place) both applications, side by side: one after the other took a third
    of a start (the Ingress finds the recall app lazily)."""
    recall = build_recall_app(settings, user_config)
    main = build_app(settings, user_config)
    serve.run_many(
        [
            RunTarget(recall, name=recall_app_name(settings), route_prefix=RECALL_PATH),
            RunTarget(main, name=settings.serve.app_name, route_prefix="/"),
        ]
    )


def app_builder(args: dict[str, str]) -> Application:
    """``serve run serve.app:app_builder config=engram.yaml``: the main app for a settings file."""
    return build_app(load_settings(args.get("config")))


def recall_app_builder(args: dict[str, str]) -> Application:
    """``serve run serve.app:recall_app_builder config=engram.yaml``: its recall app."""
    return build_recall_app(load_settings(args.get("config")))
