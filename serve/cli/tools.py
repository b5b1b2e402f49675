"""``engram loadtest`` and ``engram bench ...``: the load tools, each run as its own program.

The load tools sit above the service they load (``loadtest/``, a layer above ``serve``), so the
``engram`` command never imports them: it runs ``python -m engram.loadtest.<module>`` and hands it
the arguments unparsed. Each tool declares its own options, once; ``engram bench writes --help``
prints them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from engram.models.settings import CONFIG_ENV_VAR


@dataclass(frozen=True, slots=True)
class LoadTool:
    """One command that runs a load tool's module."""

    words: tuple[str, ...]  # ("bench", "writes"): the command's words after ``engram``
    module: str
    help: str
    extra: tuple[str, str] | None = None  # (a module the tool needs, the extra that installs it)


TOOLS: tuple[LoadTool, ...] = (
    LoadTool(
        ("loadtest",),
        "engram.loadtest.run",
        "seed, start the app if needed, run locust, print recall P99",
        extra=("locust", "loadtest"),
    ),
    LoadTool(
        ("bench", "fuzz"),
        "engram.loadtest.fuzz",
        "fuzz the HTTP contract (schemathesis); one JSON report",
        extra=("schemathesis", "dev"),
    ),
    LoadTool(
        ("bench", "writes"),
        "engram.loadtest.bench_writes",
        "the write path beside /healthz: closed, open loop, batches",
    ),
    LoadTool(("bench", "ingest"), "engram.loadtest.bench_ingest", "batch ingest: memories DONE per second"),
    LoadTool(
        ("bench", "cold"),
        "engram.loadtest.bench_cold",
        "a user's first recall (snapshot built) beside its next, by memories per user",
    ),
    LoadTool(
        ("bench", "extraction"),
        "engram.loadtest.bench_extraction",
        "extraction throughput of the configured engine (the vLLM device check)",
    ),
    LoadTool(
        ("bench", "autoscale"),
        "engram.loadtest.bench_autoscale",
        "Recall scaling out under recall load and back: replicas over time, p50/p99",
    ),
    LoadTool(
        ("bench", "poisoning"),
        "engram.loadtest.bench_poisoning",
        "write-path defenses (P5): poisoning quarantined, false positives, no secret leaks",
    ),
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the load tools' commands; their arguments are left for the tool to parse."""
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for tool in TOOLS:
        parent = commands
        if len(tool.words) == 2:
            group = tool.words[0]
            if group not in groups:
                bench = commands.add_parser(group, help="long checks that print figures")
                groups[group] = bench.add_subparsers(dest=group, required=True)
            parent = groups[group]
        # No help of its own: ``--help`` is the tool's, as every other argument.
        command = parent.add_parser(tool.words[-1], help=tool.help, add_help=False)
        command.set_defaults(func=run, tool=tool, takes_extra_args=True)


def command_line(tool: LoadTool, tool_args: Sequence[str]) -> list[str]:
    """The program that runs ``tool`` with the arguments given after its command."""
    return [sys.executable, "-m", tool.module, *tool_args]


def run(args: argparse.Namespace) -> int:
    """Run the tool named by ``args.tool`` with ``args.extra_args``; its exit status."""
    tool: LoadTool = args.tool
    if tool.extra is not None and importlib.util.find_spec(tool.extra[0]) is None:
        print(
            f"this command needs the {tool.extra[1]} extra: pip install 'engram[{tool.extra[1]}]'",
            file=sys.stderr,
        )
        return 2
    env = dict(os.environ)
    if args.config:
        env[CONFIG_ENV_VAR] = args.config  # the tools' settings are read as the service's are
    return subprocess.call(command_line(tool, args.extra_args), env=env)  # noqa: S603 - our own module
