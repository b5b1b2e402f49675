"""Run-time settings changes (SPEC O1): a nested dict of overrides validated and applied in place.

Every component keeps a reference to one Settings object, so updating its sections in place reaches
them all without a restart; an invalid override is refused whole and changes nothing.
"""

from __future__ import annotations

from typing import Any

from engram.models.settings import Settings

RUNTIME_SECTIONS = (
    "weights",
    "decay",
    "capacity",
    "recall",
    "evolution",
    "extraction",
    "lifecycle",
    "limits",
    "profile",
    "auth",
    "tracing",
)
"""Sections that may change while running; storage, embedder, engine and serve need a restart."""


def apply_overrides(settings: Settings, overrides: dict[str, Any]) -> None:
    """Validate ``overrides`` ({"recall": {"min_relevance": 0.4}, ...}) and apply them to ``settings``."""
    unknown = set(overrides) - set(RUNTIME_SECTIONS)
    if unknown:
        raise ValueError(f"settings sections {sorted(unknown)} cannot change at run time")
    if "auth" in overrides:
        check_runtime_keys(settings, overrides["auth"])
    tracing = overrides.get("tracing")
    if isinstance(tracing, dict) and "otlp_headers" in tracing:
        # Serve stores a user_config and shows it (serve status): a token there is in clear.
        raise ValueError("tracing.otlp_headers cannot change at run time: set them in the config file")
    # Validate every section first, so that one bad value leaves all sections untouched.
    checked = {
        section: type(getattr(settings, section)).model_validate(
            {**getattr(settings, section).model_dump(), **values}
        )
        for section, values in overrides.items()
    }
    for section, validated in checked.items():
        current = getattr(settings, section)
        for field_name in type(current).model_fields:
            setattr(current, field_name, getattr(validated, field_name))


def check_runtime_keys(settings: Settings, auth: Any) -> None:
    """Refuse a run-time ``auth`` change that would turn authentication off or carry a key in clear.

    A Serve ``user_config`` is stored by Serve and shown by ``serve status``: keys added there are
    given by their SHA-256 (``key_sha256``, ``engram keys hash``), never as ``key``.
    """
    keys = auth.get("api_keys") if isinstance(auth, dict) else None
    if not isinstance(keys, list):
        return  # the validation says what is wrong
    if any(isinstance(k, dict) and k.get("key") is not None for k in keys):
        raise ValueError("auth.api_keys at run time: give each key as key_sha256, not key")
    if settings.auth.api_keys and not keys:
        raise ValueError("auth.api_keys cannot become empty at run time: that would turn authentication off")
