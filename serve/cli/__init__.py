"""The ``engram`` command line: one module per group of commands.

``service`` (serve, migrate, config, dev-services), ``maintenance`` (sweep, reembed), ``keys``,
``agents`` (mcp, eval) and ``tools`` (loadtest, bench: the load tools, run as their own programs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engram.models.settings import SettingsError
from engram.serve.cli import agents, keys, maintenance, service, tools
from engram.storage.private_files import private_umask

GROUPS = (service, maintenance, keys, agents, tools)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``engram`` command."""
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for LLM agents.")
    parser.add_argument("--config", help="YAML settings file (default: $ENGRAM_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(commands)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line; a load tool's arguments are kept, unparsed, in ``extra_args``."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "takes_extra_args", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.extra_args = rest
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``engram`` console script."""
    # Whatever a command creates (data dir, keys, Ray's session files) is the user's alone (P8).
    private_umask()
    args = parse(argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:  # its message names fields and reasons, never the values
        print(exc, file=sys.stderr)
        return 2
    return code
