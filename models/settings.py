"""One typed configuration for every threshold and connection (SPEC O1, DESIGN decision 8).

Values come from, in priority order: keyword arguments, ``ENGRAM_*`` environment variables
(nested with ``__``, e.g. ``ENGRAM_RECALL__MIN_RELEVANCE=0.4``), a YAML file named by
``ENGRAM_CONFIG`` (or passed as ``yaml_file``), then the SPEC's defaults below.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from models.enums import MemType, Ownership

CONFIG_ENV_VAR = "ENGRAM_CONFIG"


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
    # evidence turns than BM25 there, and a larger entity share hurt.
    semantic_weight: float = Field(0.38, ge=0)
    lexical_weight: float = Field(0.60, ge=0)
    entity_weight: float = Field(0.02, ge=0)
    # Per-user snapshots held by each recall process (DESIGN decision 5).
    snapshot_cache_users: int = Field(1000, ge=1)
    snapshot_ttl_s: float = Field(60.0, gt=0)
    # Cosine similarity is mapped linearly from [floor, ceiling] onto [0, 1]: each embedder has its
    # own cosine range for "related" text, and relevance must be comparable with min_relevance.
    cosine_floor: float = Field(0.0, ge=-1, lt=1)
    cosine_ceiling: float = Field(0.6, gt=-1, le=1)

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


class EngineSettings(BaseModel):
    """Which engine extracts and evolves (O2, DESIGN decision 7); secrets come from config only."""

    name: Literal["rules", "openai", "local", "vllm"] = "rules"
    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout_s: float = Field(20.0, gt=0)
    threads: int = Field(1, ge=1)


class ServeSettings(BaseModel):
    """The Ray Serve application: where it listens and how it is split (DESIGN decisions 1, 4, 5)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    app_name: str = "engram"
    # With the embedded milvus-lite only one process may own the vector file: keep 1 shard there.
    shard_count: int = Field(1, ge=1)
    recall_replicas: int = Field(1, ge=1)
    max_ongoing_requests: int = Field(200, ge=1)
    mailbox_idle_s: float = Field(300.0, gt=0)


class LifecycleSettings(BaseModel):
    """Retention periods of the sweeps (L2)."""

    purge_archived_after_days: int = Field(180, ge=0)
    purge_deleted_after_days: int = Field(30, ge=0)
    sweep_time_utc: str = Field("03:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    continuity_ttl_hours: int = Field(24, ge=1)


class LimitSettings(BaseModel):
    """Request size limit of the HTTP contract (C1); the 200-message cap is part of the API models."""

    max_request_bytes: int = Field(1024 * 1024, ge=1)


class StorageSettings(BaseModel):
    """Where metadata, vectors and keys live. Empty URLs mean the embedded default."""

    data_dir: Path = Path("./engram-data")
    database_url: str = ""
    milvus_uri: str = ""
    milvus_token: str = ""
    collection: str = "engram_memories"
    # milvus-lite scans unflushed rows one by one on every query (~45 us each): flush this often.
    milvus_lite_flush_rows: int = Field(256, ge=1)
    master_key_file: str = ""
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
    """Which embedding model turns text into vectors (O2, DESIGN decision 6)."""

    provider: Literal["use", "sentence-transformers"] = "use"
    model: str = "use-multilingual-v3"
    threads: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=1)


class Settings(BaseSettings):
    """Every tunable of Engram, with the SPEC's defaults."""

    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_",
        env_nested_delimiter="__",
        extra="forbid",
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


def load_settings(yaml_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from a YAML file (or ``ENGRAM_CONFIG``), the environment and overrides."""
    if yaml_file is None:
        return Settings(**overrides)
    previous = os.environ.get(CONFIG_ENV_VAR)
    os.environ[CONFIG_ENV_VAR] = str(yaml_file)
    try:
        return Settings(**overrides)
    finally:
        if previous is None:
            del os.environ[CONFIG_ENV_VAR]
        else:
            os.environ[CONFIG_ENV_VAR] = previous
