"""One typed configuration for every threshold and connection (SPEC O1, DESIGN decision 8).

Values come from, in priority order: keyword arguments, ``ENGRAM_*`` environment variables
(nested with ``__``, e.g. ``ENGRAM_RECALL__MIN_RELEVANCE=0.4``), a YAML file named by
``ENGRAM_CONFIG`` (or passed as ``yaml_file``), then the SPEC's defaults.

The sections are models by area, in ``settings_memory``, ``settings_runtime`` and
``settings_security``; this module composes them and re-exports them, so
``from engram.models.settings import X`` names any of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from engram.models.redaction import problems
from engram.models.settings_memory import (
    ArchiveSettings,
    CapacitySettings,
    CompressionSettings,
    DecaySettings,
    EvolutionSettings,
    ExtractionSettings,
    InitialWeights,
    LifecycleSettings,
    ProfileSettings,
    RecallSettings,
)
from engram.models.settings_runtime import (
    STOP_RESERVE_S,
    AutoscalingSettings,
    EmbedderSettings,
    EngineSettings,
    LimitSettings,
    MetricsSettings,
    ServeSettings,
    StorageSettings,
    TracingSettings,
    VllmSettings,
)
from engram.models.settings_security import (
    ApiKey,
    AuthSettings,
    PrivacySettings,
    SensitiveMode,
    SensitivePolicy,
    key_digest,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "STOP_RESERVE_S",
    "ApiKey",
    "ArchiveSettings",
    "AuthSettings",
    "AutoscalingSettings",
    "CapacitySettings",
    "CompressionSettings",
    "DecaySettings",
    "EmbedderSettings",
    "EngineSettings",
    "EvolutionSettings",
    "ExtractionSettings",
    "InitialWeights",
    "LifecycleSettings",
    "LimitSettings",
    "MetricsSettings",
    "PrivacySettings",
    "ProfileSettings",
    "RecallSettings",
    "SensitiveMode",
    "SensitivePolicy",
    "ServeSettings",
    "Settings",
    "SettingsError",
    "StorageSettings",
    "TracingSettings",
    "VllmSettings",
    "key_digest",
    "load_settings",
]


CONFIG_ENV_VAR = "ENGRAM_CONFIG"


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
    tracing: TracingSettings = Field(default_factory=TracingSettings)

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
