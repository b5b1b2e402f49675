"""Loopback ports for servers a test starts: the service's own choice (serve/http_front.py), outside
the kernel's ephemeral range, where a port free when chosen can be taken before the server binds it."""

from __future__ import annotations

from engram.serve.http_front import free_port

__all__ = ["free_port"]
