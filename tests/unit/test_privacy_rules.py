"""Pure privacy logic: switches, auth rules, cursors, export lines, import plans, export paths."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from engram.actors.export_import import Step, decode_vector, encode_vector, exported, parse_line, plan_import
from engram.actors.privacy import decode_cursor, encode_cursor, exact_counters
from engram.actors.switches import check_store, gate_recall, is_on
from engram.models.api import RecallRequest
from engram.models.domain import ChangeLogEntry, Memory
from engram.models.enums import Level, OpSource, OpType
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import AuthSettings
from engram.serve.auth import Authenticator, Principal, authorize, presented_key, startup_notice
from engram.storage.export_files import export_path
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def codes(fn: object, *args: object) -> int:
    try:
        fn(*args)  # type: ignore[operator]
    except EngramError as exc:
        return int(exc.code)
    return 0


# --- switches -----------------------------------------------------------------------------------


def test_switch_rules() -> None:
    assert is_on({}) and is_on({}, "a")
    assert not is_on({"": False}, "a") and not is_on({"a": False}, "a") and is_on({"a": False}, "b")
    assert codes(check_store, {"": False}, None) == 40301
    assert codes(check_store, {"a": False}, "a") == 40301
    assert codes(check_store, {"a": False}, None) == 0


def test_recall_gate_narrows_to_global_when_the_app_is_off() -> None:
    request = RecallRequest(user_id="u", query="q", scope={"app_id": "a", "session_id": "s"})
    assert gate_recall({}, request) is request
    narrowed = gate_recall({"a": False}, request)
    assert (
        narrowed.scope.app_id is None and narrowed.scope.session_id is None and narrowed.scope.include_global
    )
    assert codes(gate_recall, {"": False}, request) == 40301
    closed = RecallRequest(user_id="u", query="q", scope={"app_id": "a", "include_global": False})
    assert codes(gate_recall, {"a": False}, closed) == 40301


# --- authentication and tenancy ---------------------------------------------------------------------


def keys() -> Authenticator:
    return Authenticator(
        AuthSettings.model_validate(
            {
                "api_keys": [
                    {"name": "ops", "key": "k-admin-0123456789abcdef", "admin": True},
                    {"name": "shop", "key": "k-shop-0123456789abcdef", "app_ids": ["shop"]},
                    {"name": "any", "key": "k-any-01234567890abcdef", "app_ids": ["*"]},
                ]
            }
        )
    )


def test_authenticate() -> None:
    auth = keys()
    assert auth.enabled and not Authenticator(AuthSettings()).enabled
    assert auth.authenticate("k-shop-0123456789abcdef").name == "shop"
    for bad in (None, "", "k-shop-0123456789abcde", "k-shop-0123456789abcdefX"):
        assert codes(auth.authenticate, bad) == 40101
    assert Authenticator(AuthSettings()).authenticate(None).admin  # auth off
    assert presented_key({"authorization": "Bearer abc"}) == "abc"
    assert presented_key({"authorization": "bearer abc "}) == "abc"
    assert presented_key({"x-api-key": "xyz"}) == "xyz"
    assert presented_key({"authorization": "Basic abc"}) is None


def test_auth_settings_refuse_duplicates_and_short_keys() -> None:
    with pytest.raises(ValueError, match="unique"):
        AuthSettings.model_validate(
            {"api_keys": [{"name": "a", "key": "x" * 16}, {"name": "b", "key": "x" * 16}]}
        )
    with pytest.raises(ValueError, match="at least 16"):
        AuthSettings.model_validate({"api_keys": [{"name": "a", "key": "short"}]})


def test_authorize_rules() -> None:
    shop = Principal("shop", frozenset({"shop"}), global_scope=True, admin=False)
    closed = Principal("clinic", frozenset({"clinic"}), global_scope=False, admin=False)
    admin = Principal("ops", frozenset(), global_scope=False, admin=True)
    alice = Principal("alice-agent", frozenset({"*"}), global_scope=True, admin=False, user_id="alice")
    console = Principal("alice-console", frozenset(), global_scope=False, admin=True, user_id="alice")
    cases = [
        (alice, "recall", {"user_id": "alice"}, {}, 0),
        (alice, "recall", {"user_id": "bob"}, {}, 40303),
        (alice, "recall", {}, {}, 40303),  # a user-bound key must name its user
        (alice, "add", {"user_id": "alice", "app_id": "any"}, {}, 0),
        (alice, "task", {}, {}, 0),
        (alice, "user/export", {"user_id": "alice"}, {}, 40303),
        (console, "user/export", {"user_id": "alice"}, {}, 0),
        (console, "user/purge", {"user_id": "bob"}, {}, 40303),
        (console, "history", {"user_id": "bob", "memory_id": "m1"}, {}, 40303),
        (shop, "add", {"app_id": "shop"}, {}, 0),
        (shop, "add", {"app_id": "bank"}, {}, 40303),
        (shop, "add", {}, {}, 0),
        (closed, "add", {}, {}, 40303),
        (closed, "add_structured", {"app_id": "clinic", "level": "GLOBAL"}, {}, 40303),
        (shop, "recall", {"scope": {"app_id": "bank"}}, {}, 40303),
        (shop, "recall", {"scope": {"app_id": "shop"}}, {}, 0),
        (closed, "recall", {"scope": {"app_id": "clinic"}}, {}, 40303),
        (closed, "recall", {"scope": {"app_id": "clinic", "include_global": False}}, {}, 0),
        (shop, "delete", {"memory_id": "m1"}, {"m1": "bank"}, 40401),  # out of reach: unknown
        (shop, "delete", {"memory_id": "m1"}, {"m1": "shop"}, 0),
        (shop, "delete", {"memory_id": "m1"}, {}, 0),  # unknown: the route answers 40401
        (shop, "batch_delete", {"memory_ids": ["m1", "m2"]}, {"m1": "shop", "m2": ""}, 0),
        (closed, "batch_delete", {"memory_ids": ["m1"]}, {"m1": ""}, 0),  # m1 is reported unknown
        (shop, "change_log", {}, {}, 40303),
        (shop, "change_log", {"app_id": "shop"}, {}, 0),
        (shop, "task", {}, {}, 0),
        (shop, "user/list", {}, {}, 40303),
        (shop, "some/future/route", {}, {}, 40303),
        (admin, "user/purge", {}, {}, 0),
        (admin, "recall", {"scope": {"app_id": "anything"}}, {}, 0),
    ]
    for principal, route, body, apps, expected in cases:
        assert codes(authorize, principal, route, body, apps) == expected, (principal.name, route, body)
    # A batch names each out-of-reach id back to the route, which answers for it as an unknown one.
    named = {"memory_ids": ["m1", "m2"]}
    assert authorize(closed, "batch_delete", named, {"m1": "", "m2": "clinic"}) == {"m1"}
    assert authorize(shop, "batch_delete", {"memory_ids": ["m1"]}, {"m1": "shop"}) == frozenset()


def test_no_keys_means_loopback_only_and_a_loud_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engram.serve.auth"):
        assert startup_notice(AuthSettings(), "127.0.0.1") is None
        refusal = startup_notice(AuthSettings(), "0.0.0.0")
    assert refusal is not None and "0.0.0.0" in refusal
    assert "AUTHENTICATION IS OFF" in caplog.text
    configured = AuthSettings.model_validate({"api_keys": [{"name": "a", "key": "x" * 16}]})
    assert startup_notice(configured, "0.0.0.0") is None


def test_engram_serve_refuses_a_public_address_without_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from engram.serve.cli import main

    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "AUTHENTICATION IS OFF" in err and "refusing to listen on 0.0.0.0" in err


# --- cursors, counters ----------------------------------------------------------------------------


def test_cursor_round_trip_and_refusals() -> None:
    cursor = encode_cursor(NOW, "ab" * 16)
    assert decode_cursor(cursor) == (NOW, "ab" * 16)
    for bad in ("", "!!!", "e30=", "WyIyMDI2LTAxLTAxIiwgIngiXQ==", "' OR 1=1"):
        assert codes(decode_cursor, bad) == ErrorCode.BAD_PARAMETER


def test_exact_counters() -> None:
    counts = exact_counters({("", False): 3, ("", True): 1, ("shop", True): 2})
    assert counts == {
        "global": 4,
        "important:global": 1,
        "total": 6,
        "important:total": 3,
        "app:shop": 2,
        "important:app:shop": 2,
    }


# --- export lines and import plans ------------------------------------------------------------------


def sample_memory() -> Memory:
    return build_memory(NOW, memory_id="a" * 32, app_id="shop", level=Level.APP)


def test_vector_codec() -> None:
    vector = np.array([0.5, -1.25, 3.0], dtype=np.float32)
    assert np.array_equal(decode_vector(encode_vector(vector), 3), vector)
    assert decode_vector(encode_vector(vector), 4) is None
    assert decode_vector("not base64!", 3) is None
    assert decode_vector(encode_vector(np.array([np.nan, 0, 0], dtype=np.float32)), 3) is None


def test_export_line_round_trip_without_the_keyed_hash() -> None:
    change = ChangeLogEntry(
        1, "a" * 32, "u", "shop", OpType.ADD, OpSource.USER, NOW, "add", None, "Likes tea"
    )
    line = exported(sample_memory(), np.ones(3, dtype=np.float32), [change]).model_dump_json()
    assert "content_hash" not in line
    parsed = parse_line(line, 1)
    assert (
        parsed.content == "Likes tea"
        and parsed.app_id == "shop"
        and parsed.changes[0].content_after == "Likes tea"
    )
    assert codes(parse_line, "{", 7) == 40001
    with pytest.raises(EngramError, match=r"^import line 3: invalid content$"):
        parse_line(line.replace("Likes tea", ""), 3)


def test_import_plan() -> None:
    item = parse_line(exported(sample_memory(), None, []).model_dump_json(), 1)
    mine, theirs, new = (
        item,
        item.model_copy(update={"memory_id": "b" * 32}),
        item.model_copy(update={"memory_id": "c" * 32}),
    )
    owners = {"a" * 32: "u", "b" * 32: "other"}
    skip = plan_import([mine, theirs, new, mine], owners, "u", "skip")
    assert [p.step for p in skip] == [Step.SKIP, Step.ADD, Step.ADD, Step.SKIP]
    assert skip[1].memory_id != "b" * 32 and skip[2].memory_id == "c" * 32
    overwrite = plan_import([mine], owners, "u", "overwrite")
    assert [(p.step, p.memory_id) for p in overwrite] == [(Step.OVERWRITE, "a" * 32)]


def test_export_paths_cannot_escape(tmp_path: Path) -> None:
    assert export_path(tmp_path, "f" * 32).parent == tmp_path.resolve()
    for bad in ("../" + "f" * 29, "..", "/etc/passwd", "F" * 32, "f" * 31, "f" * 32 + "/x"):
        with pytest.raises(ValueError, match="export"):
            export_path(tmp_path, bad)
