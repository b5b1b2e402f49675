"""Build the configured engine by name (SPEC O2): heavy imports happen only for the engine asked for."""

from __future__ import annotations

from typing import Any, Literal

from actors.engines.base import Engine

EngineName = Literal["rules", "openai", "local", "vllm"]


def build_engine(name: EngineName, **options: Any) -> Engine:
    """A new engine of kind ``name``; ``options`` are its constructor's keyword arguments."""
    if name == "rules":
        from actors.engines.rules import RulesEngine

        return RulesEngine(**options)
    if name == "openai":
        from actors.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(**options)
    if name == "local":
        from actors.engines.local_engine import LocalEngine

        return LocalEngine(**options)
    if name == "vllm":
        from actors.engines.vllm_engine import VllmEngine

        return VllmEngine(**options)
    raise ValueError(f"unknown engine {name!r}: expected one of rules, openai, local, vllm")
