"""Batch ingest alone: memories DONE per second (``engram bench ingest``).

``engram bench writes`` with only its batch phase: ``--items`` per ``batch_add_structured``
request, ``--requests`` of them from 4 callers, for ``--users`` users.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engram.loadtest import bench_writes
from engram.loadtest.run import http_front_option
from engram.serve.cli.options import positive_int


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.bench_ingest``: the batch figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="engram bench ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=positive_int, default=100, help="memories per request")
    parser.add_argument("--requests", type=positive_int, default=20, help="batch requests (4 callers)")
    parser.add_argument(
        "--users", type=positive_int, default=4, help="users the batches write for (1: one user's import)"
    )
    parser.add_argument("--url", help="an Engram app already running (default: start one)")
    http_front_option(parser)
    args = parser.parse_args(argv)
    writes = ["--writes", "0", "--open-seconds", "0", "--batch-items", str(args.items)]
    writes += ["--batch-requests", str(args.requests), "--batch-users", str(args.users)]
    writes += ["--http-front", args.http_front, *(["--url", args.url] if args.url else [])]
    return bench_writes.main(writes)


if __name__ == "__main__":
    sys.exit(main())
