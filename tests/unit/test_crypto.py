"""Envelope encryption primitives and the local master key file (P3)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from engram.storage.crypto import ContentCipher, DecryptionError, LocalKeyFileProvider, seal, unseal

pytestmark = pytest.mark.unit

KEY = bytes(range(32))


def test_seal_round_trips_and_randomises_nonces() -> None:
    first, second = seal(KEY, b"secret", b"alice"), seal(KEY, b"secret", b"alice")
    assert first != second
    assert unseal(KEY, first, b"alice") == b"secret"
    assert b"secret" not in first


@pytest.mark.parametrize("mutate", ["aad", "key", "flip", "truncate", "version"])
def test_tampering_or_wrong_context_fails(mutate: str) -> None:
    blob, key, aad = seal(KEY, b"secret", b"alice"), KEY, b"alice"
    if mutate == "aad":
        aad = b"bob"
    elif mutate == "key":
        key = bytes(32)
    elif mutate == "flip":
        blob = blob[:-1] + bytes([blob[-1] ^ 1])
    elif mutate == "truncate":
        blob = blob[:10]
    else:
        blob = b"\x02" + blob[1:]
    with pytest.raises(DecryptionError):
        unseal(key, blob, aad)


def test_key_file_is_created_once_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "master.key"
    first = LocalKeyFileProvider(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = LocalKeyFileProvider(path)
    assert first.key_id == second.key_id
    wrapped = first.wrap(KEY, "alice")
    assert second.unwrap(wrapped, "alice") == KEY
    with pytest.raises(DecryptionError):
        second.unwrap(wrapped, "bob")  # a wrapped key is bound to its user


def test_corrupt_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_text("dG9vIHNob3J0\n")
    with pytest.raises(ValueError, match="32-byte"):
        LocalKeyFileProvider(path)


def test_content_cipher_binds_to_user_and_hides_failures() -> None:
    alice, bob = ContentCipher("alice", KEY), ContentCipher("bob", KEY)
    blob = alice.encrypt("我对花生过敏")
    assert alice.decrypt(blob) == "我对花生过敏"
    assert bob.decrypt(blob) is None
    assert alice.hash_key != KEY
