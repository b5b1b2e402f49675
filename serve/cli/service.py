"""``engram serve | migrate | config | dev-services``: run the service and set up what it stands on."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path

from engram.models.redaction import redacted_settings
from engram.models.settings import load_settings
from engram.storage.database import create_engine
from engram.storage.migrate import upgrade


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this group's commands to the ``engram`` parser."""
    commands.add_parser("migrate", help="create or upgrade the metadata schema").set_defaults(func=migrate)
    commands.add_parser("config", help="print the effective settings as JSON").set_defaults(func=config)
    dev = commands.add_parser(
        "dev-services", help="start a Milvus server and the PostgreSQL database of the distributed profile"
    )
    dev.add_argument("--data", default="./engram-dev/milvus", help="the Milvus server's data directory")
    dev.add_argument("--milvus-port", type=int, default=19530)
    dev.add_argument(
        "--database-url",
        default="postgresql+asyncpg://postgres@127.0.0.1:5432/engram",
        help="the metadata database to create when missing",
    )
    dev.set_defaults(func=dev_services)
    serve_cmd = commands.add_parser("serve", help="start the service (Ray Serve) and block until Ctrl-C")
    serve_cmd.add_argument("--port", type=int, help="HTTP port (default: serve.port, 8000)")
    serve_cmd.add_argument("--host", help="address to listen on (default: serve.host, 127.0.0.1)")
    serve_cmd.set_defaults(func=serve)


def engine_name(url: str) -> str:
    """The backend part of a database URL, without credentials."""
    return url.split(":", 1)[0]


def migrate(args: argparse.Namespace) -> int:
    """Create or upgrade the metadata schema."""
    settings = load_settings(args.config)

    async def run() -> None:
        engine = create_engine(settings.storage.resolved_database_url())
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    asyncio.run(run())
    print(f"metadata schema is up to date ({engine_name(settings.storage.resolved_database_url())})")
    return 0


def config(args: argparse.Namespace) -> int:
    """Print the effective settings, secrets masked."""
    settings = load_settings(args.config)
    # Keys, tokens and passwords in URLs masked: this output lands in terminals, tickets and logs.
    print(json.dumps(redacted_settings(settings), indent=2, ensure_ascii=False))
    return 0


def serve(args: argparse.Namespace) -> int:
    """Start the service and supervise it until a signal stops it (serve/supervisor.py)."""
    from engram.serve.auth import AUTH_OFF_WARNING, startup_notice
    from engram.serve.supervisor import ServerCommand, supervise

    settings = load_settings(args.config)
    if args.host is not None:
        settings.serve.host = args.host
    if args.port is not None:
        settings.serve.port = args.port
    if not settings.auth.api_keys:
        print(f"*** {AUTH_OFF_WARNING} ***", file=sys.stderr, flush=True)
    refusal = startup_notice(settings.auth, settings.serve.host)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    return supervise(settings, ServerCommand(args.config, args.host, args.port))


def dev_services(args: argparse.Namespace) -> int:
    """Start the distributed profile's services on this machine (a Milvus server, the PostgreSQL
    database) and block until Ctrl-C; prints one JSON line of the settings to point Engram at."""
    from engram.storage.database import ensure_postgres_database
    from engram.storage.milvus_server import MilvusServerError, start_milvus_server

    # A plain flag: an Event set from a signal handler can deadlock on the lock its own wait()
    # holds in the main thread (seen: SIGTERM left the launcher and the server running).
    stopping: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    created = asyncio.run(ensure_postgres_database(args.database_url))
    try:
        server = start_milvus_server(
            Path(args.data), port=args.milvus_port, should_stop=lambda: bool(stopping)
        )
    except MilvusServerError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 2
    print(
        json.dumps(
            {
                "milvus_uri": server.uri,
                "database_url": engine_name(args.database_url),
                "database_created": created,
                "env": {"ENGRAM_STORAGE__MILVUS_URI": server.uri},
            }
        ),
        flush=True,
    )
    try:
        while not stopping:
            if not server.running:
                print(json.dumps({"error": "the Milvus server stopped"}), flush=True)
                return 1
            time.sleep(0.5)
    finally:
        server.stop()
    return 0
