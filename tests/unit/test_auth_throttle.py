"""Failed authentication throttled per client address, and the address behind trusted proxies."""

from __future__ import annotations

import hashlib

import pytest

from engram.models.errors import EngramError
from engram.models.settings import AuthSettings, LimitSettings, Settings
from engram.serve.auth import Authenticator
from engram.serve.auth_throttle import FailureThrottle, client_address, peer_of
from engram.serve.settings_update import apply_overrides
from tests.conftest import ManualMonotonic

pytestmark = pytest.mark.unit

GOOD = "good-key-0123456789abcdef"
OTHER = "other-key-0123456789abcdef"
KEYS = {"api_keys": [{"name": "good", "key": GOOD}, {"name": "other", "key": OTHER}]}


def code_of(auth: Authenticator, key: str | None, client: str | None) -> int:
    try:
        auth.authenticate(key, client)
    except EngramError as exc:
        return exc.code.value
    return 0


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def throttled(per_minute: float = 6, burst: int = 3) -> tuple[Authenticator, ManualMonotonic]:
    clock = ManualMonotonic()
    limits = LimitSettings(auth_failures_per_minute=per_minute, auth_failure_burst=burst)
    return Authenticator(AuthSettings.model_validate(KEYS), limits, monotonic=clock), clock


def test_failures_past_the_burst_get_42903_until_the_bucket_refills() -> None:
    auth, clock = throttled(per_minute=6, burst=3)
    codes = [code_of(auth, f"guess-{i}-0123456789abcdef", "10.0.0.1") for i in range(5)]
    assert codes == [40101, 40101, 40101, 42903, 42903]
    assert code_of(auth, None, "10.0.0.1") == 42903, "a request without a key waits too"
    assert code_of(auth, "guess-0123456789abcdef", "10.0.0.2") == 40101, "another address is unaffected"
    assert code_of(auth, GOOD, "10.0.0.2") == 0
    clock.now += 10  # one failure back at 6 a minute
    assert [code_of(auth, f"again-{i}-0123456789abcdef", "10.0.0.1") for i in range(2)] == [40101, 42903]


def test_a_locked_address_tells_a_guess_nothing_but_keeps_its_proven_keys() -> None:
    auth, _ = throttled(burst=2)
    assert code_of(auth, GOOD, "10.0.0.1") == 0  # proven from this address before the flood
    for i in range(2):
        code_of(auth, f"guess-{i}-0123456789abcdef", "10.0.0.1")
    assert code_of(auth, GOOD, "10.0.0.1") == 0, "a key already used from here keeps working"
    # A right guess and a wrong one get the same answer: the throttle is no oracle.
    assert code_of(auth, OTHER, "10.0.0.1") == 42903
    assert code_of(auth, "wrong-0123456789abcdef", "10.0.0.1") == 42903
    assert code_of(auth, OTHER, "10.0.0.9") == 0


def test_a_revoked_proven_key_is_refused_even_from_a_locked_address() -> None:
    settings = Settings(auth=KEYS)
    auth = Authenticator(settings.auth, LimitSettings(auth_failure_burst=1), monotonic=ManualMonotonic())
    assert code_of(auth, GOOD, "10.0.0.1") == 0
    code_of(auth, "guess-0123456789abcdef", "10.0.0.1")
    apply_overrides(settings, {"auth": {"api_keys": [{"name": "other", "key_sha256": sha(OTHER)}]}})
    assert code_of(auth, GOOD, "10.0.0.1") == 42903


def test_zero_turns_the_throttle_off_and_no_client_means_no_throttle() -> None:
    auth, _ = throttled(per_minute=0, burst=1)
    assert all(code_of(auth, "guess-0123456789abcdef", "10.0.0.1") == 40101 for _ in range(30))
    auth, _ = throttled(burst=1)
    with pytest.raises(EngramError):
        auth.authenticate("guess-0123456789abcdef", "10.0.0.1")
    assert code_of(auth, "guess-0123456789abcdef", "10.0.0.1") == 42903
    # Without a client address (a key name for a log line) nothing is counted or refused.
    assert all(code_of(auth, "guess-0123456789abcdef", None) == 40101 for _ in range(5))
    assert code_of(auth, GOOD, None) == 0


def test_the_throttle_forgets_the_oldest_addresses_and_keeps_few_key_names() -> None:
    clock = ManualMonotonic()
    throttle = FailureThrottle(
        LimitSettings(auth_failure_burst=1), max_addresses=2, proven_per_address=2, monotonic=clock
    )
    throttle.failed("a")
    throttle.failed("b")
    throttle.failed("c")
    assert not throttle.locked("a") and throttle.locked("c")
    for name in ("k1", "k2", "k3"):
        throttle.succeeded("c", name)
    assert [throttle.proven("c", n) for n in ("k1", "k2", "k3")] == [False, True, True]


def test_forwarded_addresses_count_only_behind_a_trusted_proxy() -> None:
    trusted = LimitSettings(trusted_proxies=["127.0.0.1", "10.1.0.0/16"]).trusted_proxies
    # A client's own header says nothing.
    assert client_address("203.0.113.5", "198.51.100.7", trusted) == "203.0.113.5"
    assert client_address("203.0.113.5", "198.51.100.7", []) == "203.0.113.5"
    # Behind trusted proxies: the right-most address they did not add themselves.
    assert client_address("127.0.0.1", "198.51.100.7", trusted) == "198.51.100.7"
    assert client_address("127.0.0.1", "6.6.6.6, 198.51.100.7, 10.1.2.3", trusted) == "198.51.100.7"
    assert client_address("127.0.0.1", "10.1.0.9", trusted) == "10.1.0.9"
    assert client_address("127.0.0.1", "", trusted) == "127.0.0.1"
    scope = {
        "type": "http",
        "client": ("127.0.0.1", 5000),
        "headers": [(b"x-forwarded-for", b"1.1.1.1"), (b"X-Forwarded-For", b"2.2.2.2")],
    }
    assert peer_of(scope) == ("127.0.0.1", "1.1.1.1,2.2.2.2")
    assert peer_of({"type": "http", "headers": []}) == ("", "")


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    with pytest.raises(ValueError, match="trusted_proxies"):
        LimitSettings(trusted_proxies=["my-proxy.example"])
    assert LimitSettings(trusted_proxies=["::1"]).trusted_proxies == ["::1/128"]
