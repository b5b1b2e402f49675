"""A Serve replica's inter-deployment gRPC server on loopback when its node is (SPEC P7).

Ray Serve 2.60 starts in every replica, once its constructor has run, a gRPC server for calls
from other deployments, bound to ``[::]:0``: every interface, whatever the node's address, with no
setting for it. Callers reach a replica at its node's address, so on a loopback node (the
embedded default, serve/network.py) binding that address instead changes nothing for them and
takes the port off the network. Engram's deployments call this first in their constructors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from engram.serve.network import is_loopback_host

log = logging.getLogger(__name__)
_WILDCARD = "[::]:"
_MARK = "_engram_loopback"


def loopback_address(address: str, node_ip: str) -> str:
    """``address`` with a wildcard host replaced by ``node_ip`` when that is loopback."""
    if address.startswith(_WILDCARD) and is_loopback_host(node_ip):
        host = f"[{node_ip}]" if ":" in node_ip else node_ip
        return f"{host}:{address[len(_WILDCARD) :]}"
    return address


def bind_replica_grpc_to_loopback() -> bool:
    """In a replica on a loopback node: bind Serve's inter-deployment gRPC server there. True if so."""
    import ray
    from ray.serve._private import replica

    node_ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    if not is_loopback_host(node_ip):
        return False  # a cluster node: its callers are on other nodes
    original: Callable[[Any, str], int] | None = getattr(replica, "add_port_to_grpc_server", None)
    if original is None:
        # Another Ray than this was written for: the loopback test (tests/e2e) says what binds where.
        log.warning("Serve's replica gRPC bind is not where Engram expects it: left as Ray binds it")
        return False
    if getattr(original, _MARK, False):
        return True

    def bind(server: Any, address: str) -> int:
        return original(server, loopback_address(address, node_ip))

    setattr(bind, _MARK, True)
    setattr(replica, "add_port_to_grpc_server", bind)  # noqa: B010 - the module imports it by name
    return True
