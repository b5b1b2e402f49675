"""A key provider built by import path (``storage.key_provider: tests.support.kms:provider``): the
interface a KMS client implements, here over a key the test sets (no KMS runs on this machine)."""

from __future__ import annotations

from engram.models.settings import StorageSettings
from engram.storage.crypto import SecretKeyProvider

KEY = bytes(range(32))
built: list[StorageSettings] = []


def provider(storage: StorageSettings) -> SecretKeyProvider:
    """What a KMS factory returns: anything with key_id, wrap and unwrap."""
    built.append(storage)
    return SecretKeyProvider(KEY, "the test KMS")
