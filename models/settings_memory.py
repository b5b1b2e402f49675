"""Settings of how memories are weighted, found, evolved and aged: the SPEC's tables and formulas
(weights, decay, capacity, recall, evolution, extraction, lifecycle, profile), a model per section."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from engram.models.enums import MemType, Ownership


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
    # ... and at most this many bytes of them (an estimate, actors.snapshot.snapshot_bytes): users
    # differ by orders of magnitude in size, so a count alone does not bound a replica's memory.
    snapshot_cache_bytes: int = Field(512 * 1024 * 1024, ge=1)
    snapshot_ttl_s: float = Field(60.0, gt=0)
    # A recall for a user whose snapshot is not held reads only the user's vector copies and scope
    # columns, opens this many nearest visible memories (at least the over-fetch pool) and ranks
    # them (actors.cold_recall); 0 loads the whole snapshot first instead, as before.
    cold_candidates: int = Field(100, ge=0)
    # ... or, where the vector index is a Milvus server that a recall process searches itself, this
    # many nearest by cosine from the index, in the user's partition (no read of the user's rows).
    cold_index_candidates: int = Field(200, ge=1)
    # False: cold recalls read the sealed copies even where the index is a server (a comparison, or
    # a Milvus too loaded to ask).
    cold_from_index: bool = True
    # ... unless the user has no more recallable memories than this: then loading (and keeping) the
    # whole snapshot costs no more than a cold answer (docs/benchmarks.md, engram bench cold).
    cold_min_memories: int = Field(200, ge=0)
    # A cold user's snapshot is loaded in the background on this many-th cold recall (1: the first).
    snapshot_admit_after: int = Field(2, ge=1)
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


class ProfileSettings(BaseModel):
    """The derived user profile (L7): how many facts per section, and when it is rebuilt."""

    max_facts_per_kind: int = Field(5, ge=1, le=50)
    # Rebuild after writes (coalesced on the user's mailbox); off, only the sweep and a read of a
    # stale profile rebuild it.
    refresh_after_writes: bool = True
    # Refreshes wait while the shard has write tasks pending (a burst of writes costs one refresh
    # per user, after it), but never longer than this under a load that keeps the shard busy.
    refresh_max_delay_s: float = Field(30.0, ge=0)
