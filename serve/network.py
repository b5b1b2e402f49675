"""Who can reach Engram's processes: the embedded default on loopback, a cluster behind Ray's tokens.

The embedded default (``engram serve`` starting a Ray of its own, ``serve.host`` on loopback) binds
every socket of every process to loopback (SPEC P7). Ray binds its GCS, raylet, agents, metrics
exporter and every worker's gRPC port to the node's address, which it takes from the machine's
network interface unless it runs "without clusters" (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, what
it does on macOS and Windows): then the node's address is 127.0.0.1 (docs/operations.md, "Network
surface"). A cluster profile (another Ray, a cluster settings file, a non-loopback ``serve.host``)
must run Ray with token authentication (``RAY_AUTH_MODE=token``), or start only when the operator
says so explicitly (``serve.allow_unauthenticated_ray``). No Ray import: pure decisions over settings
and the environment.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from engram.models.settings import ServeSettings

# The names a browser or a client on this machine uses for it; ports are allowed on any of them.
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# Ray's node address is loopback when Ray believes clusters are off (ray._private.services).
LOCAL_RAY_ENVIRONMENT = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
AUTH_MODE_ENV = "RAY_AUTH_MODE"


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine only."""
    name = host.strip().lower().removeprefix("[").removesuffix("]")
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def joins_a_cluster(environ: Mapping[str, str]) -> bool:
    """Whether Ray is one that runs elsewhere (``RAY_ADDRESS``), not a local one started here."""
    return environ.get("RAY_ADDRESS", "").strip() not in ("", "local")


def cluster_reasons(serve: ServeSettings, environ: Mapping[str, str]) -> list[str]:
    """Why this start is a cluster profile (reachable beyond this machine); empty: the embedded default."""
    reasons = []
    if joins_a_cluster(environ):
        reasons.append(f"RAY_ADDRESS is {environ['RAY_ADDRESS'].strip()}")
    if serve.ray_profile == "cluster":
        reasons.append("serve.ray_profile is cluster")
    if not is_loopback_host(serve.host):
        reasons.append(f"serve.host {serve.host} is not a loopback address")
    return reasons


def token_auth_on(environ: Mapping[str, str]) -> bool:
    """Whether Ray runs with token authentication (set explicitly: Ray's default depends on how
    each node was started, so an unset mode proves nothing)."""
    return environ.get(AUTH_MODE_ENV, "").strip().lower() == "token"


@dataclass(frozen=True)
class StartDecision:
    """Whether a start may go ahead: a refusal (exit 2) or a warning to print, and its profile."""

    embedded: bool
    refusal: str | None = None
    warning: str | None = None


def start_decision(serve: ServeSettings, environ: Mapping[str, str]) -> StartDecision:
    """The embedded default starts as it is; a cluster profile needs Ray's token authentication,
    or ``serve.allow_unauthenticated_ray`` (then with a loud warning)."""
    reasons = cluster_reasons(serve, environ)
    if not reasons:
        return StartDecision(embedded=True)
    if token_auth_on(environ):
        return StartDecision(embedded=False)
    why = "; ".join(reasons)
    if serve.allow_unauthenticated_ray:
        return StartDecision(
            embedded=False,
            warning=(
                f"WARNING: RAY RUNS WITHOUT AUTHENTICATION on a cluster profile ({why}), because "
                "serve.allow_unauthenticated_ray is true: anyone who reaches a Ray port can run code "
                "on its nodes and read the master key. Set RAY_AUTH_MODE=token (docs/operations.md)."
            ),
        )
    return StartDecision(
        embedded=False,
        refusal=(
            f"refusing to start: this is a cluster profile ({why}) and Ray's token authentication is "
            "off. Start every node and client with RAY_AUTH_MODE=token and the cluster's token "
            "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; docs/operations.md, "
            '"Ray with token authentication"), or set serve.allow_unauthenticated_ray: true to run '
            "without it"
        ),
    )


def local_ray_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What to add to the environment of a local Ray started here (the embedded default): its node
    on loopback, and no token unless the operator asked for one (nothing but this machine reaches it)."""
    env = dict(LOCAL_RAY_ENVIRONMENT)
    if AUTH_MODE_ENV not in environ:
        env[AUTH_MODE_ENV] = "disabled"
    return env
