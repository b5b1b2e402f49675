"""LLM engine layer (SPEC O2, DESIGN decision 7): one call shape, several engines."""

from engram.actors.engines.base import (
    ChatMessage,
    Engine,
    EngineError,
    StructuredRequest,
    UnsupportedTaskError,
    generate_with_retry,
)

__all__ = [
    "ChatMessage",
    "Engine",
    "EngineError",
    "StructuredRequest",
    "UnsupportedTaskError",
    "generate_with_retry",
]
