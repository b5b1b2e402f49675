"""Authenticators for tests that drive the HTTP app directly."""

from __future__ import annotations

from engram.models.settings import AuthSettings
from engram.serve.auth import Authenticator

AUTH_OFF = Authenticator(AuthSettings())
"""No keys configured: authentication deliberately off, as on a loopback-only development server."""
