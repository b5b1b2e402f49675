"""Build the configured engine by name (SPEC O2): heavy imports happen only for the engine asked for."""

from __future__ import annotations

from typing import Any, Literal

from engram.actors.engines.base import Engine
from engram.models.settings import EngineSettings

EngineName = Literal["rules", "openai", "local", "vllm"]


def build_engine(name: EngineName, **options: Any) -> Engine:
    """A new engine of kind ``name``; ``options`` are its constructor's keyword arguments."""
    if name == "rules":
        from engram.actors.engines.rules import RulesEngine

        return RulesEngine(**options)
    if name == "openai":
        from engram.actors.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(**options)
    if name == "local":
        from engram.actors.engines.local_engine import LocalEngine

        return LocalEngine(**options)
    if name == "vllm":
        from engram.actors.engines.vllm_engine import VllmEngine

        return VllmEngine(**options)
    raise ValueError(f"unknown engine {name!r}: expected one of rules, openai, local, vllm")


def engine_from_settings(settings: EngineSettings) -> Engine:
    """The engine that ``settings.engine`` names, with its connection options."""
    if settings.name == "openai":
        if not settings.base_url or not settings.model:
            raise ValueError("engine 'openai' needs engine.base_url and engine.model")
        return build_engine(
            "openai",
            base_url=settings.base_url,
            model=settings.model,
            api_key=settings.api_key.get_secret_value(),
            timeout_s=settings.timeout_s,
        )
    if settings.name == "local":
        return build_engine("local", model_path=settings.model or None, threads=settings.threads)
    if settings.name == "vllm":
        if not settings.model:
            raise ValueError("engine 'vllm' needs engine.model")
        return build_engine("vllm", model=settings.model, **settings.vllm.engine_args())
    return build_engine("rules")
