"""HAProxy with its stats and Prometheus listeners on loopback, for Serve's HAProxy mode.

Serve's HAProxy configuration binds its stats page (``listen stats``) and its Prometheus exporter
(``frontend prometheus``) to every interface, whatever ``http_options.host`` says, and has no
setting for their address. ``serve/http_front.py`` points ``RAY_SERVE_HAPROXY_BINARY_PATH`` at a
wrapper that runs this file: it copies the configuration that Serve passes with ``-f``, binds
every wildcard listener outside Serve's HTTP and gRPC frontends (those follow ``serve.host``) to
127.0.0.1, and replaces itself with the real HAProxy (``exec``: the pid Serve signals stays
HAProxy's). Standard library only: it runs as a script (``python -I``), not as part of the package.

    python -I haproxy_loopback.py REAL_HAPROXY [haproxy's arguments ...]
"""

from __future__ import annotations

import os
import re
import sys

LOOPBACK = "127.0.0.1"
# The sections whose listeners Serve binds to its HTTP host (serve.host): left as Serve wrote them.
FRONTENDS = frozenset({"frontend http_frontend", "frontend grpc_frontend"})
_SECTION = re.compile(
    r"^(global|defaults|frontend|backend|listen|userlist|peers|resolvers|program|cache|ring|"
    r"http-errors|mailers|crt-store|traces)\b"
)
# "bind :P", "bind *:P", "bind 0.0.0.0:P", "bind :::P", "bind [::]:P": every interface.
_WILDCARD_BIND = re.compile(r"^(\s*bind\s+)(?:\*|0\.0\.0\.0|::|\[::\])?:(\d+)")


def loopback_binds(config: str, host: str = LOOPBACK) -> str:
    """``config`` with every wildcard ``bind`` outside :data:`FRONTENDS` bound to ``host``."""
    out = []
    section = ""
    for line in config.splitlines(keepends=True):
        if _SECTION.match(line):
            section = " ".join(line.split()[:2])
        elif section not in FRONTENDS:
            line = _WILDCARD_BIND.sub(rf"\g<1>{host}:\g<2>", line)
        out.append(line)
    return "".join(out)


def rewritten_arguments(args: list[str], pid: int) -> list[str]:
    """HAProxy's arguments with the file after ``-f`` replaced by its loopback copy (written here,
    beside it, private to the owner, one per process: a reload never overwrites a running one's)."""
    args = list(args)
    for i, arg in enumerate(args[:-1]):
        if arg == "-f":
            source = args[i + 1]
            with open(source, encoding="utf-8") as f:
                config = f.read()
            target = f"{source}.loopback.{pid}"
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(loopback_binds(config))
            args[i + 1] = target
    return args


def main(argv: list[str]) -> None:
    """Exec the real HAProxy (``argv[0]``) on the loopback copy of its configuration."""
    if not argv:
        sys.exit("usage: haproxy_loopback.py REAL_HAPROXY [ARGS ...]")
    real, args = argv[0], argv[1:]
    os.execv(real, [real, *rewritten_arguments(args, os.getpid())])  # noqa: S606 - Serve's own HAProxy


if __name__ == "__main__":
    main(sys.argv[1:])
