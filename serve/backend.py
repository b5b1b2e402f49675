"""What the HTTP ingress needs from the rest of Engram: the table's operations and three helpers.

The in-process implementation (``LocalBackend``) runs everything in one event loop; the Ray Serve
application implements the same protocol over deployment and actor handles (``RayBackend``); the
switch gate and the rate limiter wrap either.
"""

from __future__ import annotations

from typing import Protocol

from engram.serve.operations import Backend
from engram.serve.privacy_backend import PrivacyHelpers


class EngramBackend(Backend, PrivacyHelpers, Protocol):
    """``call`` runs any operation of ``serve.operations``; errors are ``EngramError`` with a C9 code."""
