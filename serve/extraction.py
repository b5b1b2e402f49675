"""The extraction deployment: the engine layer behind ``@serve.batch`` (DESIGN decision 7).

Shards send every extraction and evolution request here one at a time; the replica gathers the
requests that arrive within ``engine.batch_wait_ms`` (up to ``engine.batch_max_size``) into one
engine call, which is what lets vLLM decode many prompts together on a GPU. A request lost with a
dying replica is retried by the shard (``RemoteEngine``), so an accepted write still finishes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic import BaseModel
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError

from engram.actors.engines.base import Engine, EngineError, StructuredRequest
from engram.actors.engines.factory import engine_from_settings
from engram.actors.engines.metered import metered
from engram.actors.engines.remote import RemoteEngine
from engram.models.settings import Settings
from engram.models.tracing import TRACING
from engram.serve.handle_lookup import LazyDeploymentHandle
from engram.serve.metrics import install_ray_metrics
from engram.serve.replica_loopback import bind_replica_grpc_to_loopback
from engram.serve.scaling import replica_options
from engram.serve.settings_update import apply_overrides
from engram.serve.tracing import continue_trace, sync_tracing

DEPLOYMENT_NAME = "Extraction"
# What a replica dying or restarting looks like from a caller; anything else is a real failure.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    RayActorError,
    BackPressureError,
    DeploymentUnavailableError,
    ReplicaUnavailableError,
)


def extraction_options(settings: Settings) -> dict[str, Any]:
    """The Serve options of the extraction deployment: replicas, batching room and resources.

    A ``vllm`` engine asks Ray for GPUs (``engine.num_gpus``, default one per tensor-parallel rank)
    and, where set, a GPU kind; other engines ask for none. With tensor parallelism above 1 the
    replica reserves a placement group of one GPU bundle per rank on one node (the vLLM workers
    are Ray actors inside it).
    """
    engine = settings.engine
    actor: dict[str, Any] = {"num_cpus": settings.serve.replica_cpus}
    options: dict[str, Any] = {
        **replica_options(settings.serve.extraction_autoscaling, settings.serve.extraction_replicas),
        # Room for several batches in flight, or batches could never fill.
        "max_ongoing_requests": 4 * engine.batch_max_size,
    }
    if engine.name == "vllm":
        ranks = engine.vllm.tensor_parallel_size
        gpus = engine.num_gpus if engine.num_gpus is not None else float(ranks)
        if engine.accelerator_type:
            actor["accelerator_type"] = engine.accelerator_type
        if ranks > 1:
            per_rank = gpus / ranks
            options["placement_group_bundles"] = [
                {"CPU": settings.serve.replica_cpus, "GPU": per_rank},
                *({"GPU": per_rank} for _ in range(ranks - 1)),
            ]
            options["placement_group_strategy"] = "STRICT_PACK"
        else:
            actor["num_gpus"] = gpus
    options["ray_actor_options"] = actor
    return options


@serve.deployment(name=DEPLOYMENT_NAME)
class ExtractionDeployment:
    """One engine per replica; concurrent requests are answered in batches."""

    def __init__(self, settings: Settings) -> None:
        install_ray_metrics()
        sync_tracing(settings.tracing, "extraction")
        bind_replica_grpc_to_loopback()  # before Serve starts it, after this constructor
        self.settings = settings
        self._engine: Engine | None = None
        self._batch_sizes: Counter[int] = Counter()
        self._apply_batching()

    def _apply_batching(self) -> None:
        engine = self.settings.engine
        self.generate.set_max_batch_size(engine.batch_max_size)  # type: ignore[attr-defined]
        self.generate.set_batch_wait_timeout_s(engine.batch_wait_ms / 1000)  # type: ignore[attr-defined]

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.02)
    async def generate(self, requests: list[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request; Serve hands this method whole batches."""
        if self._engine is None:
            # Created on the replica's own event loop (DESIGN, Ray facts).
            self._engine = metered(engine_from_settings(self.settings.engine))
        self._batch_sizes[len(requests)] += 1
        return await self._engine.generate(requests)

    async def traced(self, request: StructuredRequest, carrier: dict[str, str]) -> BaseModel | EngineError:
        """``generate`` for one request under the caller's trace: its span holds the wait for a
        batch and the batch's engine call (``extraction_engine`` sends this when tracing is on)."""
        engine = {"engram.engine": self.settings.engine.name}

        async def generate() -> BaseModel | EngineError:
            return await self.generate(request)

        return await continue_trace(carrier, "engram.extraction.generate", engine, generate)

    def batch_sizes(self) -> dict[int, int]:
        """How many batches of each size this replica has run (counts only)."""
        return dict(self._batch_sizes)

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Serve ``user_config``: run-time settings (O1); the engine section needs a redeploy."""
        apply_overrides(self.settings, config)
        sync_tracing(self.settings.tracing, "extraction")


def extraction_engine(settings: Settings) -> RemoteEngine:
    """An engine whose requests go to this app's extraction deployment.

    The handle is looked up on the first request, not here: a shard starts (and resumes its tasks)
    before Serve may have registered the deployment, and its tasks then wait for it instead of
    failing the start (``serve.deployment_wait_s``).
    """
    extraction = LazyDeploymentHandle(
        DEPLOYMENT_NAME, settings.serve.app_name, wait_s=settings.serve.deployment_wait_s
    )

    async def call(request: StructuredRequest) -> BaseModel | EngineError:
        handle = await extraction.get()
        carrier = TRACING.carrier()
        if carrier is None:
            answer: BaseModel | EngineError = await handle.generate.remote(request)
            return answer
        with TRACING.span("engram.engine.call", {"engram.engine.task": request.task}, kind=SpanKind.CLIENT):
            traced: BaseModel | EngineError = await handle.traced.remote(request, TRACING.carrier())
            return traced

    return RemoteEngine(
        call,
        name=f"{settings.engine.name}@{DEPLOYMENT_NAME}",
        is_llm=settings.engine.name != "rules",
        transient=TRANSIENT_ERRORS,
        attempts=settings.engine.remote_attempts,
        backoff_s=0.5,
    )
