"""Envelope encryption primitives (SPEC P3, DESIGN decision 9).

Each user's content is sealed with AES-256-GCM under that user's data key; data keys are stored
wrapped by a master key that a ``KeyProvider`` holds. Destroying a user's wrapped data key makes
every copy of their content unreadable at once (crypto-shredding).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_FORMAT_VERSION = b"\x01"
_NONCE_BYTES = 12
KEY_BYTES = 32


class DecryptionError(Exception):
    """Ciphertext that cannot be opened: wrong or shredded key, or tampered data."""


def seal(key: bytes | AESGCM, plaintext: bytes, aad: bytes) -> bytes:
    """Encrypt and authenticate ``plaintext``; ``aad`` binds it to its owner. ``key``: the key, or
    an ``AESGCM`` made from it once (its key schedule is two thirds of opening a 2 KB vector)."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    aead = key if isinstance(key, AESGCM) else AESGCM(key)
    return _FORMAT_VERSION + nonce + aead.encrypt(nonce, plaintext, aad)


def unseal(key: bytes | AESGCM, blob: bytes, aad: bytes) -> bytes:
    """Open a blob made by ``seal`` with the same key (or its ``AESGCM``) and ``aad``."""
    if len(blob) < 1 + _NONCE_BYTES + 16 or blob[:1] != _FORMAT_VERSION:
        raise DecryptionError("not an Engram ciphertext")
    nonce, body = blob[1 : 1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES :]
    aead = key if isinstance(key, AESGCM) else AESGCM(key)
    try:
        return aead.decrypt(nonce, body, aad)
    except InvalidTag as exc:
        raise DecryptionError("ciphertext does not open with this key") from exc


class KeyProvider(Protocol):
    """Holds the master key; wraps and unwraps per-user data keys."""

    @property
    def key_id(self) -> str:
        """A stable, non-secret name of the master key (recorded beside each wrapped key)."""
        ...

    def wrap(self, data_key: bytes, user_id: str) -> bytes:
        """Encrypt a data key for storage."""
        ...

    def unwrap(self, wrapped: bytes, user_id: str) -> bytes:
        """Recover a data key wrapped by ``wrap``."""
        ...


def next_key_file(path: Path) -> Path:
    """Where the next master key waits while a rotation is under way (``storage.key_rotation``)."""
    return path.with_name(path.name + ".next")


def key_fingerprint(key: bytes) -> str:
    """A master key's non-secret id, recorded beside each data key it wraps."""
    return hashlib.sha256(b"engram-master-key-id:" + key).hexdigest()[:16]


class MasterKeyError(RuntimeError):
    """This process has no master key, or not the one the stored data keys were wrapped under."""


class LocalKeyFileProvider:
    """Master key in a local file (mode 0600).

    ``create``: a missing file is created with a random key at once (tools and tests); without it
    (the stores: ``storage.keyring.check_master_key``) the file is only created for a key store that
    holds no wrapped key yet, and a process that finds none uses nothing until it appears.
    While a rotation is under way (``<file>.next`` exists) new data keys are wrapped under the next
    key and either key opens a wrapped one; a key that opens with neither makes the provider read
    its files again, since a rotation may have started or finished in another process.
    """

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self._path = path
        self._keys: list[bytes] = []
        if create or path.exists():
            self._load(create=True)

    def _load(self, *, create: bool) -> None:
        if not create and not self._path.exists():
            raise MasterKeyError(
                f"no master key file at {self._path}: every process must reach the same master key "
                "(copy it there, or set storage.key_provider: secret); a second key is never created"
            )
        current = load_or_create_key_file(self._path)
        upcoming = next_key_file(self._path)
        self._keys = [read_key_file(upcoming), current] if upcoming.exists() else [current]

    def _current(self) -> list[bytes]:
        if not self._keys:
            self._load(create=False)  # another process on this node may have created it since
        return self._keys

    def available(self) -> bool:
        """Whether the master key file exists (it is read then)."""
        if not self._keys and self._path.exists():
            self._load(create=False)
        return bool(self._keys)

    def create(self) -> None:
        """Create the master key file (random key) if it is missing: a new, empty key store only."""
        self._load(create=True)

    def describe(self) -> str:
        """Where the key comes from, for error messages (never the key)."""
        return f"the master key file {self._path}"

    @property
    def key_id(self) -> str:
        """Fingerprint of the master key that wraps new data keys (not the key)."""
        return key_fingerprint(self._current()[0])

    def wrap(self, data_key: bytes, user_id: str) -> bytes:
        """Seal ``data_key`` under the master key, bound to ``user_id``."""
        return seal(self._current()[0], data_key, _wrap_aad(user_id))

    def unwrap(self, wrapped: bytes, user_id: str) -> bytes:
        """Open a wrapped data key (DecryptionError when no master key known here opens it)."""
        for attempt in range(2):
            for key in self._current():
                try:
                    return unseal(key, wrapped, _wrap_aad(user_id))
                except DecryptionError:
                    continue
            if attempt == 0:
                self._load(create=False)
        raise DecryptionError("the data key does not open with any master key known here")


class SecretKeyProvider:
    """A master key handed to the process (a cluster secret: an environment variable or a mounted
    file), base64 of 32 bytes; never created, never written."""

    def __init__(self, key: bytes, source: str) -> None:
        if len(key) != KEY_BYTES:
            raise MasterKeyError(f"{source} does not hold a {KEY_BYTES}-byte base64 master key")
        self._key = key
        self._source = source

    @classmethod
    def from_environment(cls, variable: str, fallback_file: Path | None) -> SecretKeyProvider:
        """The key in ``variable``, else in ``fallback_file``; MasterKeyError when neither holds one."""
        value = os.environ.get(variable, "").strip()
        if value:
            return cls(_b64(value.encode(), f"${variable}"), f"${variable}")
        if fallback_file is not None and fallback_file.exists():
            return cls(_b64(fallback_file.read_bytes().strip(), str(fallback_file)), str(fallback_file))
        where = f"${variable}" + (f" or {fallback_file}" if fallback_file is not None else "")
        raise MasterKeyError(f"storage.key_provider is secret, but {where} holds no master key")

    def describe(self) -> str:
        """Where the key comes from, for error messages (never the key)."""
        return f"the secret master key from {self._source}"

    @property
    def key_id(self) -> str:
        """Fingerprint of the master key (not the key)."""
        return key_fingerprint(self._key)

    def wrap(self, data_key: bytes, user_id: str) -> bytes:
        """Seal ``data_key`` under the master key, bound to ``user_id``."""
        return seal(self._key, data_key, _wrap_aad(user_id))

    def unwrap(self, wrapped: bytes, user_id: str) -> bytes:
        """Open a wrapped data key (DecryptionError when this master key does not open it)."""
        return unseal(self._key, wrapped, _wrap_aad(user_id))


def _b64(data: bytes, source: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise MasterKeyError(f"{source} is not base64") from None


def _wrap_aad(user_id: str) -> bytes:
    return b"engram-dek:" + user_id.encode()


def load_or_create_key_file(path: Path) -> bytes:
    """The key in the master key file at ``path``, created (random, mode 0600) when absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: of two processes starting together, exactly one creates the key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as handle:
            handle.write(base64.b64encode(secrets.token_bytes(KEY_BYTES)) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
    return read_key_file(path)


def read_key_file(path: Path) -> bytes:
    """The key a master key file holds (ValueError when it holds none)."""
    key = base64.b64decode(path.read_bytes().strip() or b"")
    if len(key) != KEY_BYTES:
        raise ValueError(f"master key file {path} does not hold a {KEY_BYTES}-byte base64 key")
    return key


class ContentCipher:
    """Seals and opens one user's content with their data key."""

    def __init__(self, user_id: str, data_key: bytes) -> None:
        self._aad = b"engram-content:" + user_id.encode()
        self._key = AESGCM(data_key)
        self.hash_key = hmac.new(data_key, b"engram-content-hash", hashlib.sha256).digest()

    def encrypt(self, text: str) -> bytes:
        """Ciphertext of ``text``."""
        return seal(self._key, text.encode(), self._aad)

    def decrypt(self, blob: bytes) -> str | None:
        """Plaintext of ``blob``, or None when it cannot be opened (e.g. written under a shredded key)."""
        try:
            return unseal(self._key, blob, self._aad).decode()
        except DecryptionError:
            return None

    def seal_bytes(self, data: bytes, label: str) -> bytes:
        """Ciphertext of ``data``, bound to ``label`` (e.g. the memory it belongs to)."""
        return seal(self._key, data, self._aad + b":" + label.encode())

    def open_bytes(self, blob: bytes, label: str) -> bytes | None:
        """Plaintext sealed under ``label``, or None when it cannot be opened."""
        try:
            return unseal(self._key, blob, self._aad + b":" + label.encode())
        except DecryptionError:
            return None
