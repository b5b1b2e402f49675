"""The ``engram`` command line: schema migration and configuration inspection.

Later layers add ``serve``, ``eval``, ``loadtest`` and ``sweep`` here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from models.settings import load_settings
from storage.database import create_engine
from storage.migrate import upgrade


def _migrate(args: argparse.Namespace) -> int:
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


def _config(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    print(json.dumps(settings.model_dump(mode="json"), indent=2, ensure_ascii=False))
    return 0


def engine_name(url: str) -> str:
    """The backend part of a database URL, without credentials."""
    return url.split(":", 1)[0]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``engram`` command."""
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for LLM agents.")
    parser.add_argument("--config", help="YAML settings file (default: $ENGRAM_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="create or upgrade the metadata schema").set_defaults(func=_migrate)
    commands.add_parser("config", help="print the effective settings as JSON").set_defaults(func=_config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``engram`` console script."""
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
