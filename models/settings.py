"""One typed configuration for every threshold and connection (SPEC O1, DESIGN decision 8).

Values come from, in priority order: keyword arguments, ``ENGRAM_*`` environment variables
(nested with ``__``, e.g. ``ENGRAM_RECALL__MIN_RELEVANCE=0.4``), a YAML file named by
``ENGRAM_CONFIG`` (or passed as ``yaml_file``), then the SPEC's defaults below.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from engram.models.enums import MemType, Ownership, SensitiveCategory
from engram.models.redaction import problems

CONFIG_ENV_VAR = "ENGRAM_CONFIG"
# What a stop needs after the shards' grace: Serve's shutdown, Ray's, the sweep of leftovers.
STOP_RESERVE_S = 8.0


class InitialWeights(BaseModel):
    """Initial weight of a new memory by ownership and type (W7)."""

    user_semantic: float = Field(0.80, ge=0, le=1)
    user_episodic: float = Field(0.60, ge=0, le=1)
    user_procedural: float = Field(0.70, ge=0, le=1)
    agent_semantic: float = Field(0.70, ge=0, le=1)
    agent_episodic: float = Field(0.50, ge=0, le=1)
    agent_procedural: float = Field(0.60, ge=0, le=1)
    time_bound: float = Field(0.85, ge=0, le=1)
    important: float = Field(0.90, ge=0, le=1)

    def for_type(self, ownership: Ownership, mem_type: MemType) -> float:
        """Base weight of an ordinary memory of this ownership and type."""
        value: float = getattr(self, f"{ownership.value.lower()}_{mem_type.value.lower()}")
        return value


class DecaySettings(BaseModel):
    """Exponential decay w(t) = w0 * exp(-lambda * alpha * t), t in days (L1)."""

    lambda_per_day: float = Field(math.log(0.80 / 0.10) / 90, gt=0)
    important_alpha: float = Field(0.1, gt=0, le=1)
    exempt_tags: list[str] = Field(default_factory=lambda: ["persona"])


class CapacitySettings(BaseModel):
    """Per-user capacity limits and eviction policy (W8)."""

    global_limit: int = Field(500, ge=1)
    app_limit: int = Field(200, ge=1)
    total_limit: int = Field(2000, ge=1)
    important_ratio: float = Field(0.20, gt=0, le=1)
    evict_target_ratio: float = Field(0.90, gt=0, lt=1)
    archive_threshold: float = Field(0.10, ge=0, le=1)


class RecallSettings(BaseModel):
    """Recall ranking and limits (R1-R5)."""

    min_relevance: float = Field(0.3, ge=0, le=1)
    relevance_weight: float = Field(0.7, ge=0)
    weight_weight: float = Field(0.3, ge=0)
    overfetch_factor: int = Field(4, ge=1)
    overfetch_min: int = Field(60, ge=1)
    default_top_k: int = Field(10, ge=1, le=100)
    timeout_ms: int = Field(500, ge=1)
    delta_recall: float = Field(0.05, ge=0, le=1)
    # Hybrid relevance (seed 004): semantic similarity, BM25 over the user's memories, entity match.
    # Chosen on the LoCoMo development split (docs/evaluation.md): USE's cosine alone finds far fewer
    # evidence turns than BM25 there, and a larger entity share hurt. One function fuses them
    # (actors.lexical.fuse): a signal absent for a memory (lexical overlap between a query and a
    # memory in different languages) leaves its weight out of that memory's mean instead of a zero.
    semantic_weight: float = Field(0.38, ge=0)
    lexical_weight: float = Field(0.60, ge=0)
    entity_weight: float = Field(0.02, ge=0)
    # Per-user snapshots held by each recall process (DESIGN decision 5).
    snapshot_cache_users: int = Field(1000, ge=1)
    snapshot_ttl_s: float = Field(60.0, gt=0)
    # A starting recall replica loads the snapshots of this many most recently active users in the
    # background, so that a restart or a scale-out does not send every first recall to the stores.
    warm_users: int = Field(1000, ge=0)
    # Recall-hit bookkeeping (R4) leaves a recall replica in batches: one message per flush.
    hit_flush_ms: int = Field(100, ge=1)
    hit_batch_max: int = Field(256, ge=1)
    # Cosine similarity is mapped linearly from [floor, ceiling] onto [0, 1]: each embedder has its
    # own cosine range for "related" text, and relevance must be comparable with min_relevance.
    cosine_floor: float = Field(0.0, ge=-1, lt=1)
    cosine_ceiling: float = Field(0.6, gt=-1, le=1)
    # Trust weighting (P5): a score is multiplied by 1 - trust_weight x (1 - trust), trust being 1.0
    # for memories the user said or an app wrote (HIGH), 0.6 for assistant messages and imports
    # (MEDIUM), 0.3 for tool output (LOW); models.provenance. 0 (the default) ranks as before.
    trust_weight: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _check_ranges(self) -> RecallSettings:
        if self.cosine_ceiling <= self.cosine_floor:
            raise ValueError("recall.cosine_ceiling must be above recall.cosine_floor")
        if self.relevance_weight + self.weight_weight <= 0:
            raise ValueError("recall.relevance_weight + recall.weight_weight must be positive")
        if self.semantic_weight + self.lexical_weight + self.entity_weight <= 0:
            raise ValueError("recall semantic, lexical and entity weights must not all be zero")
        return self


class EvolutionSettings(BaseModel):
    """Evolution and dedup thresholds (W4, W5)."""

    similar_top_n: int = Field(10, ge=1)
    semantic_dedup_threshold: float = Field(0.95, gt=0, le=1)
    # Covers the engine's own timeout and its one retry (2 x engine.timeout_s) with room to spare.
    llm_timeout_s: float = Field(45.0, gt=0)
    # W5. On (default): when an LLM engine fails or outlasts llm_timeout_s, extraction falls back to
    # the rules engine for that add and evolution to the deterministic rules, and the task's
    # decisions say "degraded". Off: such an add fails (50001 on extraction, 50301 on evolution).
    degraded_mode: bool = True


class ExtractionSettings(BaseModel):
    """How conversations reach the extraction engine (W3)."""

    # Messages holding no first-person statement or request (greetings, general knowledge) are not
    # sent to any engine: cheaper, and small models otherwise store "There are branches in trees".
    personal_prefilter: bool = True
    # One engine request per personal statement instead of per conversation: tiny local models
    # (SmolLM2-135M) extract one fact per request at best.
    split_statements: bool = False
    max_tokens: int = Field(384, ge=16, le=4096)


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


class ArchiveSettings(BaseModel):
    """The cold archive of archived memories (L2): a local directory, or an S3-compatible bucket."""

    backend: Literal["local", "s3"] = "local"
    # Empty: ``<storage.data_dir>/archive``.
    local_dir: str = ""
    s3_bucket: str = ""
    s3_prefix: str = "engram-archive/"
    # Empty: the AWS default endpoint; set it for MinIO, Ceph and other S3-compatible stores.
    s3_endpoint_url: str = ""
    s3_region: str = ""


class CompressionSettings(BaseModel):
    """Compression (L5): many similar, low-weight memories of one dimension become one summary."""

    enabled: bool = True
    # Also after a session close that promoted memories, in the dimensions they moved to (L6).
    at_session_close: bool = True
    # A group needs at least this many memories, and takes at most max_group (the most similar).
    min_group: int = Field(8, ge=2)
    max_group: int = Field(50, ge=2)
    # Cosine similarity of every member to the group's most central memory.
    similarity: float = Field(0.90, gt=0, le=1)
    # Only memories whose decayed weight is at most this: recent or recalled memories stay as they are.
    max_weight: float = Field(0.50, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> CompressionSettings:
        if self.max_group < self.min_group:
            raise ValueError(f"max_group ({self.max_group}) is below min_group ({self.min_group})")
        return self


class LifecycleSettings(BaseModel):
    """Retention periods, thresholds and schedule of the sweeps (L1-L4, L6)."""

    purge_archived_after_days: int = Field(180, ge=0)
    purge_deleted_after_days: int = Field(30, ge=0)
    sweep_time_utc: str = Field("03:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    continuity_ttl_hours: int = Field(24, ge=1)
    # A decayed weight below this moves an active memory to the archive (L2).
    archive_below_weight: float = Field(0.10, ge=0, le=1)
    # The sweep stores a decayed weight only when it fell by at least this much: recall decays
    # lazily anyway (R3), and a rerun minutes later then writes nothing.
    decay_write_min_delta: float = Field(1e-4, gt=0)
    # The in-app scheduler runs the job daily at sweep_time_utc when enabled.
    scheduler_enabled: bool = True
    # Parallel Ray tasks of one job run, each taking one partition of the users.
    job_partitions: int = Field(4, ge=1)
    # Users handed to a shard actor per call: a progress report follows each batch.
    users_per_batch: int = Field(64, ge=1)
    # Users swept at the same time on one shard, over all job tasks (their mailboxes run concurrently;
    # more only queues writers on SQLite's single write lock).
    user_concurrency: int = Field(4, ge=1)
    reconcile: bool = True
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    compression: CompressionSettings = Field(default_factory=CompressionSettings)


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


class ApiKey(BaseModel):
    """One API key (P4): the apps it may use, whether it may reach the users' global memories, the
    one user it may be bound to, and whether it may call the privacy routes.

    The key is given either as is (``key``) or as its SHA-256 in hex (``key_sha256``, what
    ``engram keys hash`` prints): the hash is enough to check a presented key. Frozen, so that a
    change is a new object (the authenticator notices it).
    """

    # Errors never repeat the input: it holds keys.
    model_config = ConfigDict(frozen=True, hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=64)
    key: SecretStr | None = Field(None, min_length=16)
    key_sha256: SecretStr | None = None
    # "*" grants every app.
    app_ids: list[str] = Field(default_factory=list)
    # The user's global memories (requests without an app_id, GLOBAL writes, include_global
    # recalls) are shared by every app: a key reaches them only when granted explicitly.
    global_scope: bool = False
    # Set: the key acts for this user only (a personal agent, the console); every request that
    # names a user must name this one.
    user_id: str | None = Field(None, min_length=1, max_length=128)
    admin: bool = False

    @field_validator("key_sha256")
    @classmethod
    def _hex(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        hexdigest = value.get_secret_value().strip().lower()
        if len(hexdigest) != 64 or any(c not in "0123456789abcdef" for c in hexdigest):
            # The value is not repeated: it may be a key pasted into the wrong field.
            raise ValueError("key_sha256 must be 64 hex digits (engram keys hash)")
        return SecretStr(hexdigest)

    @model_validator(mode="after")
    def _one_form(self) -> ApiKey:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError(f"auth.api_keys {self.name}: give exactly one of key and key_sha256")
        return self

    def digest(self) -> bytes:
        """The SHA-256 of the key: what a presented key's own digest is compared with."""
        if self.key_sha256 is not None:
            return bytes.fromhex(self.key_sha256.get_secret_value())
        assert self.key is not None  # one of the two, checked above
        return key_digest(self.key.get_secret_value())


def key_digest(key: str) -> bytes:
    """SHA-256 of an API key as sent (keys are long random strings: no salt or stretching needed)."""
    return hashlib.sha256(key.encode("utf-8")).digest()


class AuthSettings(BaseModel):
    """Authentication of callers; no keys means auth is off (only a loopback bind is then allowed).

    ``api_keys`` may change at run time (Serve ``user_config``, serve/settings_update.py).
    """

    model_config = ConfigDict(hide_input_in_errors=True)

    api_keys: list[ApiKey] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_keys(self) -> AuthSettings:
        digests = [k.digest() for k in self.api_keys]
        if len(set(digests)) != len(digests) or len({k.name for k in self.api_keys}) != len(self.api_keys):
            raise ValueError("auth.api_keys: names and keys must be unique")
        return self


SensitiveMode = Literal["redact", "refuse", "allow"]
"""What the write path does with a detected secret or PII value (P5, docs/privacy.md)."""


class SensitivePolicy(BaseModel):
    """Per-category handling of secrets and PII on every write path (P5): ``redact`` replaces the
    value by a typed placeholder ("[CARD]"), ``refuse`` stores nothing, ``allow`` keeps it verbatim.

    ``default`` applies to every app; ``apps`` overrides some categories for one app id ("" is the
    user's global scope), e.g. ``{"billing": {"EMAIL": "allow"}}``.
    """

    default: dict[SensitiveCategory, SensitiveMode] = Field(default_factory=lambda: _all_redact())
    apps: dict[str, dict[SensitiveCategory, SensitiveMode]] = Field(default_factory=dict)

    def for_app(self, app_id: str | None) -> dict[SensitiveCategory, SensitiveMode]:
        """The mode of every category for one app: its overrides over the default, redact if unset."""
        modes = _all_redact()
        modes.update(self.default)
        modes.update(self.apps.get(app_id or "", {}))
        return modes


def _all_redact() -> dict[SensitiveCategory, SensitiveMode]:
    mode: SensitiveMode = "redact"
    return dict.fromkeys(SensitiveCategory, mode)


class PrivacySettings(BaseModel):
    """Export files (P2): where they are written and how they are streamed back; the secrets and
    PII policy of the write path (``sensitive``, P5)."""

    # Relative paths are under storage.data_dir.
    export_dir: Path = Path("exports")
    export_page: int = Field(200, ge=1, le=2000)
    download_chunk_bytes: int = Field(256 * 1024, ge=1024)
    sensitive: SensitivePolicy = Field(default_factory=SensitivePolicy)
    # A finished task (its decisions may quote content) and an export's file are deleted by the
    # first lifecycle sweep this long after the task ended (P8); the task then answers 40401.
    task_retention_hours: float = Field(168.0, gt=0, le=24 * 366)


class EmbedderSettings(BaseModel):
    """Which embedding model turns text into vectors (O2, DESIGN decision 6).

    ``openai``: any OpenAI-compatible ``POST {base_url}/embeddings`` (vLLM, TEI, a hosted API).
    Every memory records its model; a change of model needs a collection of its own and
    ``engram reembed`` (docs/operations.md).
    """

    provider: Literal["use", "sentence-transformers", "openai"] = "use"
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


class ProfileSettings(BaseModel):
    """The derived user profile (L7): how many facts per section, and when it is rebuilt."""

    max_facts_per_kind: int = Field(5, ge=1, le=50)
    # Rebuild after writes (coalesced on the user's mailbox); off, only the sweep and a read of a
    # stale profile rebuild it.
    refresh_after_writes: bool = True
    # Refreshes wait while the shard has write tasks pending (a burst of writes costs one refresh
    # per user, after it), but never longer than this under a load that keeps the shard busy.
    refresh_max_delay_s: float = Field(30.0, ge=0)


class Settings(BaseSettings):
    """Every tunable of Engram, with the SPEC's defaults."""

    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_",
        env_nested_delimiter="__",
        extra="forbid",
        # A refused value is never repeated in the error: it may be an API key or a token.
        hide_input_in_errors=True,
    )

    weights: InitialWeights = Field(default_factory=InitialWeights)
    decay: DecaySettings = Field(default_factory=DecaySettings)
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    evolution: EvolutionSettings = Field(default_factory=EvolutionSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    profile: ProfileSettings = Field(default_factory=ProfileSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        yaml_path = os.environ.get(CONFIG_ENV_VAR)
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if yaml_path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_path))
        return tuple(sources)


class SettingsError(ValueError):
    """Settings that do not validate, named by field and reason only (the values may be secrets)."""


def _validated(overrides: dict[str, Any]) -> Settings:
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        # Not chained: pydantic's own message quotes every value given, an API key among them.
        raise SettingsError(f"invalid settings: {problems(exc)}") from None


def load_settings(yaml_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from a YAML file (or ``ENGRAM_CONFIG``), the environment and overrides."""
    if yaml_file is None:
        return _validated(overrides)
    previous = os.environ.get(CONFIG_ENV_VAR)
    os.environ[CONFIG_ENV_VAR] = str(yaml_file)
    try:
        return _validated(overrides)
    finally:
        if previous is None:
            del os.environ[CONFIG_ENV_VAR]
        else:
            os.environ[CONFIG_ENV_VAR] = previous
