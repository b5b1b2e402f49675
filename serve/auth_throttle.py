"""Failed authentications throttled per client address (C9 42903), so that keys cannot be guessed fast.

Each address has a bucket of ``limits.auth_failure_burst`` failures, refilled at
``limits.auth_failures_per_minute``; every 40101 takes one. While an address's bucket is empty,
a request from it gets 42903 whatever key it carries, unless that key already authenticated from
that address: the answer to a guess is then the same whether it was right or not. A client that
shares its address with the guesser (a NAT, a proxy that hides addresses) keeps working with the
keys it has used; only a key new to the address waits for the flood to stop.

The address is the connection's peer; behind a proxy listed in ``limits.trusted_proxies`` it is
the right-most X-Forwarded-For entry that is not such a proxy. A client's own X-Forwarded-For is
never believed: the header counts only when the connection comes from a trusted proxy.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from starlette.types import Scope

from engram.models.settings import LimitSettings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(slots=True)
class _Address:
    tokens: float
    at: float
    # Names of the keys that authenticated from this address, oldest first.
    proven: list[str] = field(default_factory=list)


class FailureThrottle:
    """Failure buckets by client address; the least recently seen are forgotten beyond ``max_addresses``."""

    def __init__(
        self,
        limits: LimitSettings,
        *,
        max_addresses: int = 100_000,
        proven_per_address: int = 8,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = limits
        self._max_addresses = max_addresses
        self._proven_per_address = proven_per_address
        self._monotonic = monotonic
        self._addresses: OrderedDict[str, _Address] = OrderedDict()

    def locked(self, address: str) -> bool:
        """True while ``address`` has no failure left to spend."""
        entry = self._refilled(address)
        return entry is not None and entry.tokens < 1.0

    def proven(self, address: str, key_name: str) -> bool:
        """True when the key named ``key_name`` authenticated from ``address`` before."""
        entry = self._addresses.get(address)
        return entry is not None and key_name in entry.proven

    def failed(self, address: str) -> None:
        """Spend one of ``address``'s failures."""
        if self._rate() <= 0:
            return
        entry = self._refilled(address) or self._new(address)
        entry.tokens = max(0.0, entry.tokens - 1.0)

    def succeeded(self, address: str, key_name: str) -> None:
        """Remember that the key named ``key_name`` authenticated from ``address``."""
        if self._rate() <= 0:
            return
        entry = self._refilled(address) or self._new(address)
        if key_name in entry.proven:
            return
        entry.proven.append(key_name)
        del entry.proven[: -self._proven_per_address]

    def _rate(self) -> float:
        return self._limits.auth_failures_per_minute / 60.0

    def _refilled(self, address: str) -> _Address | None:
        entry = self._addresses.get(address)
        if entry is None:
            return None
        now = self._monotonic()
        rate = self._rate()
        burst = float(self._limits.auth_failure_burst)
        # Off (rate 0): never locked, whatever was spent before.
        entry.tokens = burst if rate <= 0 else min(burst, entry.tokens + (now - entry.at) * rate)
        entry.at = now
        self._addresses.move_to_end(address)
        return entry

    def _new(self, address: str) -> _Address:
        entry = _Address(float(self._limits.auth_failure_burst), self._monotonic())
        self._addresses[address] = entry
        while len(self._addresses) > self._max_addresses:
            self._addresses.popitem(last=False)  # a forgotten address starts again with a full bucket
        return entry


def peer_of(scope: Scope) -> tuple[str, str]:
    """The connection's peer address and every X-Forwarded-For value of the request, joined."""
    client = scope.get("client")
    peer = str(client[0]) if client else ""
    forwarded = [
        value.decode("latin-1")
        for name, value in scope.get("headers") or []
        if name.lower() == b"x-forwarded-for"
    ]
    return peer, ",".join(forwarded)


def client_address(peer: str, forwarded_for: str, trusted_proxies: Sequence[str]) -> str:
    """The address failures count against: ``peer``, or behind trusted proxies the client they name."""
    if not trusted_proxies or not forwarded_for:
        return peer
    networks = _networks(tuple(trusted_proxies))
    if not _within(peer, networks):
        return peer  # a client's own X-Forwarded-For says nothing
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    # Each trusted proxy appends the address it saw: the right-most untrusted entry is the client.
    for hop in reversed(hops):
        if not _within(hop, networks):
            return hop
    return hops[0] if hops else peer


@lru_cache(maxsize=16)
def _networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(t, strict=False) for t in trusted)


def _within(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)
