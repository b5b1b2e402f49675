"""Loopback ports for servers a test starts."""

from __future__ import annotations

from engram.serve.http_front import free_port as _free_port


def free_port() -> int:
    """A TCP port that nothing listens on right now, outside the kernel's ephemeral range (the
    service's own choice, serve/http_front.py: a port from that range can be taken meanwhile)."""
    return _free_port()
