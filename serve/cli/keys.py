"""``engram keys rotate | hash | new``: the master key and API keys."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from engram.models.settings import load_settings
from engram.serve.cli.options import positive_int
from engram.storage.database import create_engine
from engram.storage.migrate import upgrade


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this group's commands to the ``engram`` parser."""
    keys = commands.add_parser("keys", help="manage the master key; make API keys and their hashes")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    rotate_cmd = key_commands.add_parser(
        "rotate", help="re-wrap every user's data key under a new master key (resumable; progress as JSON)"
    )
    rotate_cmd.add_argument("--batch", type=positive_int, default=500, help="data keys per transaction")
    rotate_cmd.add_argument(
        "--keep-old", help="also write the old master key to this file (else it is gone once rotated)"
    )
    rotate_cmd.set_defaults(func=rotate)
    key_commands.add_parser(
        "hash", help="print the SHA-256 of the API key on stdin (auth.api_keys[].key_sha256)"
    ).set_defaults(func=hash_key)
    key_commands.add_parser(
        "new", help="print a new random API key and its SHA-256 as one JSON line"
    ).set_defaults(func=new)


def rotate(args: argparse.Namespace) -> int:
    """Re-wrap every user's data key under a new master key; resumable after a crash."""
    from engram.storage.key_rotation import rotate_master_key
    from engram.storage.schema import user_keys

    settings = load_settings(args.config)
    storage = settings.storage
    key_file = storage.resolved_master_key_file()
    if not key_file.exists():
        print(f"no master key file at {key_file}: nothing to rotate", file=sys.stderr)
        return 2

    def progress(done: int, total: int) -> None:
        print(json.dumps({"rewrapped": done, "total": total}), flush=True)

    async def run() -> dict[str, object]:
        # The wrapped keys live in the key store when there is one, else in the metadata database.
        url = storage.key_database_url or storage.resolved_database_url()
        engine = create_engine(url, busy_timeout_ms=storage.sqlite_busy_timeout_ms)
        try:
            if storage.key_database_url:
                async with engine.begin() as conn:
                    await conn.run_sync(lambda sync: user_keys.create(sync, checkfirst=True))
            else:
                await upgrade(engine)
            report = await rotate_master_key(
                engine,
                key_file,
                batch=args.batch,
                keep_old=Path(args.keep_old) if args.keep_old else None,
                on_batch=progress,
            )
        finally:
            await engine.dispose()
        return dict(report.__dict__)

    print(json.dumps({"rotated": asyncio.run(run())}), flush=True)
    return 0


def hash_key(_args: argparse.Namespace) -> int:
    """Print the SHA-256 of the API key read on stdin (for ``key_sha256`` in ``auth.api_keys``)."""
    from engram.serve.api_keys import key_sha256, read_key

    try:
        key = read_key(sys.stdin)
    except ValueError as exc:
        print(f"engram keys hash: {exc} (e.g. engram keys hash < key.txt)", file=sys.stderr)
        return 2
    print(key_sha256(key))
    return 0


def new(_args: argparse.Namespace) -> int:
    """Print a new random API key and its SHA-256, as one JSON line."""
    from engram.serve.api_keys import key_sha256, new_key

    key = new_key()
    print(json.dumps({"key": key, "key_sha256": key_sha256(key)}))
    return 0
