"""Settings of who may call (API keys and their scopes) and what the write path does with
secrets and personal data (P5), a model per section."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from engram.models.enums import SensitiveCategory


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
