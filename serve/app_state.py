"""The backend that this process's HTTP routes serve, installed by the ingress replica at start.

Ray Serve ships the FastAPI app into the replica by value, so the routes cannot share a module
global with the deployment class; both reach this module through ``sys.modules`` instead.
"""

from __future__ import annotations

import importlib

from models.errors import EngramError, ErrorCode
from serve.backend import EngramBackend

_installed: list[EngramBackend] = []


def install(backend: EngramBackend) -> None:
    """Make ``backend`` the one the routes of this process use."""
    _installed[:] = [backend]


def current() -> EngramBackend:
    """The installed backend (50301 while the replica is still starting)."""
    # Looked up through the module registry on purpose: see the module docstring.
    state = importlib.import_module(__name__)
    installed: list[EngramBackend] = state._installed
    if not installed:
        raise EngramError(ErrorCode.DEPENDENCY_UNAVAILABLE, "the service is starting")
    return installed[0]
