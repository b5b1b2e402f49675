"""API keys: hashed at rest, checked by their hash, added and revoked at run time, never repeated."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from pydantic import ValidationError

from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import ApiKey, AuthSettings, Settings
from engram.serve import cli
from engram.serve.api_keys import key_sha256, new_key, read_key
from engram.serve.auth import Authenticator
from engram.serve.settings_update import apply_overrides

pytestmark = pytest.mark.unit

KEY = "shop-key-0123456789abcdef"
NEW = "new-key-0123456789abcdefgh"


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def name_of(auth: Authenticator, key: str) -> str | int:
    try:
        return auth.authenticate(key).name
    except EngramError as exc:
        return exc.code.value


def test_a_hashed_key_authenticates_and_a_wrong_one_does_not() -> None:
    settings = AuthSettings.model_validate(
        {"api_keys": [{"name": "shop", "key_sha256": sha(KEY).upper(), "app_ids": ["shop"]}]}
    )
    auth = Authenticator(settings)
    principal = auth.authenticate(KEY)
    assert (principal.name, principal.app_ids) == ("shop", frozenset({"shop"}))
    assert name_of(auth, KEY[:-1]) == 40101
    assert name_of(auth, sha(KEY)) == 40101, "the hash itself is not a key"


def test_a_key_is_given_once_in_one_form_and_errors_never_repeat_it() -> None:
    with pytest.raises(ValidationError, match="exactly one of key and key_sha256"):
        ApiKey.model_validate({"name": "a"})
    with pytest.raises(ValidationError, match="exactly one"):
        ApiKey.model_validate({"name": "a", "key": KEY, "key_sha256": sha(KEY)})
    # The same key in both forms under two names is one key twice.
    with pytest.raises(ValidationError, match="must be unique"):
        AuthSettings.model_validate(
            {"api_keys": [{"name": "a", "key": KEY}, {"name": "b", "key_sha256": sha(KEY)}]}
        )
    for bad in ({"name": "a", "key_sha256": KEY}, {"name": "a", "key": "short-secret"}):
        for build in (
            lambda b=bad: AuthSettings.model_validate({"api_keys": [b]}),
            lambda b=bad: Settings(auth={"api_keys": [b]}),
        ):
            with pytest.raises(ValidationError) as refused:
                build()
            assert KEY not in str(refused.value) and "short-secret" not in str(refused.value)
    shown = repr(ApiKey.model_validate({"name": "a", "key_sha256": sha(KEY)}))
    assert sha(KEY) not in shown and KEY not in repr(ApiKey.model_validate({"name": "a", "key": KEY}))


def test_keys_added_and_revoked_at_run_time_count_at_once() -> None:
    settings = Settings(auth={"api_keys": [{"name": "shop", "key": KEY}]})
    auth = Authenticator(settings.auth)
    assert name_of(auth, KEY) == "shop" and name_of(auth, NEW) == 40101
    keys = [{"name": "shop", "key_sha256": sha(KEY)}, {"name": "new", "key_sha256": sha(NEW)}]
    apply_overrides(settings, {"auth": {"api_keys": keys}})
    assert (name_of(auth, KEY), name_of(auth, NEW)) == ("shop", "new")
    apply_overrides(settings, {"auth": {"api_keys": keys[1:]}})  # shop revoked
    assert (name_of(auth, KEY), name_of(auth, NEW)) == (40101, "new")


def test_a_run_time_change_never_carries_a_key_in_clear_nor_turns_auth_off() -> None:
    settings = Settings(auth={"api_keys": [{"name": "shop", "key": KEY}]})
    auth = Authenticator(settings.auth)
    with pytest.raises(ValueError, match="key_sha256, not key") as refused:
        apply_overrides(settings, {"auth": {"api_keys": [{"name": "new", "key": NEW}]}})
    assert NEW not in str(refused.value)
    with pytest.raises(ValueError, match="cannot become empty"):
        apply_overrides(settings, {"auth": {"api_keys": []}})
    twice = [{"name": "a", "key_sha256": sha(NEW)}, {"name": "a", "key_sha256": sha(KEY)}]
    with pytest.raises(ValidationError):  # two keys of one name: refused whole
        apply_overrides(settings, {"auth": {"api_keys": twice}})
    assert auth.enabled and name_of(auth, KEY) == "shop" and name_of(auth, NEW) == 40101


def test_engram_keys_hash_reads_stdin_and_keys_new_makes_a_random_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{KEY}\n"))
    assert cli.main(["keys", "hash"]) == 0
    assert capsys.readouterr().out.strip() == sha(KEY)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert cli.main(["keys", "hash"]) == 2
    assert cli.main(["keys", "new"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["key_sha256"] == sha(made["key"]) and len(made["key"]) >= 43
    assert new_key() != new_key()
    assert key_sha256(KEY) == sha(KEY)
    with pytest.raises(ValueError, match="no key"):
        read_key(io.StringIO(""))
    # The printed hash configures a key that the printed key opens.
    configured = AuthSettings.model_validate({"api_keys": [{"name": "x", "key_sha256": made["key_sha256"]}]})
    assert Authenticator(configured).authenticate(made["key"]).name == "x"
    with pytest.raises(EngramError) as refused:
        Authenticator(configured).authenticate(None)
    assert refused.value.code is ErrorCode.UNAUTHENTICATED
