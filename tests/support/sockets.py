"""The sockets a set of processes listens on, read from ``/proc`` (Linux): for the loopback and
side-by-side tests.

A TCP socket listens in state ``0A`` (LISTEN); a UDP socket has no listen state, and one bound to
a port (``07``, unconnected) receives from anyone who can reach that address, so it counts too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engram.storage.processes import open_sockets

PROC = Path("/proc")
_TCP_LISTEN = "0A"
_UDP_UNCONNECTED = "07"
# Which table holds which kind of socket, and the state that means "open to whoever reaches it".
_TABLES = {"tcp": _TCP_LISTEN, "tcp6": _TCP_LISTEN, "udp": _UDP_UNCONNECTED, "udp6": _UDP_UNCONNECTED}


@dataclass(frozen=True, slots=True)
class Listener:
    """One socket that takes connections or datagrams: where, and which process holds it."""

    table: str
    address: str
    port: int
    pid: int
    process: str

    def is_loopback(self) -> bool:
        """Bound to a loopback address (127.0.0.0/8, ::1, or an IPv4-mapped loopback)."""
        ip = ipaddress.ip_address(self.address)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            return ip.ipv4_mapped.is_loopback
        return ip.is_loopback

    def shares_port_with(self, other: Listener) -> bool:
        """Both take the same traffic: one protocol and port, and one address or a wildcard."""
        if self.table.rstrip("6") != other.table.rstrip("6") or self.port != other.port:
            return False
        mine, theirs = _plain(self.address), _plain(other.address)
        return mine == theirs or _WILDCARD in (mine, theirs) or "::" in (mine, theirs)

    def __str__(self) -> str:
        return f"{self.table} {self.address}:{self.port} ({self.pid} {self.process})"


_WILDCARD = "0.0.0.0"  # compared with, never bound


def _plain(address: str) -> str:
    """An IPv4-mapped IPv6 address as its IPv4 form; any other as it is."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _address(hex_address: str) -> str:
    """``/proc/net`` writes addresses as the kernel's 32-bit words in host order, hex."""
    raw = bytes.fromhex(hex_address)
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(raw))


def socket_table(proc: Path = PROC) -> dict[str, tuple[str, str, int]]:
    """Every open-to-the-network socket of this network namespace: inode -> (table, address, port)."""
    sockets = open_sockets(_TABLES, proc)
    return {inode: (table, _address(host), port) for inode, (table, host, port) in sockets.items()}


def process_sockets(pid: int, proc: Path = PROC) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open (empty if it is gone or unreadable)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in (proc / str(pid) / "fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def listeners_of(processes: Iterable[tuple[int, str]], proc: Path = PROC) -> list[Listener]:
    """The listening sockets held by ``processes`` ((pid, name) pairs)."""
    table = socket_table(proc)
    found = []
    for pid, name in processes:
        for inode in sorted(process_sockets(pid, proc)):
            if inode in table:
                kind, address, port = table[inode]
                found.append(Listener(kind, address, port, pid, name))
    return found
