"""The ``engram`` command: each option declared once; the load tools get their arguments unparsed (#28)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engram.serve.cli import parse, tools
from engram.serve.cli.tools import TOOLS, command_line

pytestmark = pytest.mark.unit


def test_a_load_tool_gets_every_argument_after_its_command_in_order() -> None:
    argv = [
        "--config",
        "c.yaml",
        "bench",
        "writes",
        "--url",
        "http://127.0.0.1:1",
        "--clients",
        "3",
        "--help",
    ]
    args = parse(argv)
    assert args.func is tools.run and args.config == "c.yaml"
    assert args.extra_args == ["--url", "http://127.0.0.1:1", "--clients", "3", "--help"]
    assert command_line(args.tool, args.extra_args) == [
        sys.executable,
        "-m",
        "engram.loadtest.bench_writes",
        *args.extra_args,
    ]


def test_every_tool_is_a_command_and_its_module_exists() -> None:
    import importlib.util

    for tool in TOOLS:
        assert parse([*tool.words]).tool is tool
        assert importlib.util.find_spec(tool.module) is not None, tool.module


def test_other_commands_still_refuse_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(["migrate", "--clients", "3"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --clients 3" in capsys.readouterr().err


def test_the_cli_declares_no_option_of_a_load_tool() -> None:
    """The tools' options live in their modules only: the engram parser consumes none, not even -h."""
    for tool in TOOLS:
        assert parse([*tool.words, "-h", "--users", "2"]).extra_args == ["-h", "--users", "2"]


def test_a_tools_help_is_its_modules_own() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engram.serve.cli", "bench", "ingest", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: engram bench ingest")
    assert "--items" in done.stdout and "--requests" in done.stdout


def test_a_tools_bad_argument_is_refused_by_the_tool() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engram.serve.cli", "bench", "writes", "--clients", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "engram bench writes: error: argument --clients: must be a positive integer" in done.stderr


def test_bench_ingest_is_the_writes_bench_with_only_its_batch_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.loadtest import bench_ingest, bench_writes

    seen: list[list[str]] = []
    monkeypatch.setattr(bench_writes, "main", lambda argv: seen.append(list(argv)) or 0)
    assert bench_ingest.main(["--items", "7", "--users", "1", "--url", "http://127.0.0.1:1"]) == 0
    writes = bench_writes.parser().parse_args(seen[0])
    assert (writes.writes, writes.open_seconds) == (0, 0.0)
    assert (writes.batch_items, writes.batch_requests, writes.batch_users) == (7, 20, 1)
    assert (writes.url, writes.http_front) == ("http://127.0.0.1:1", "haproxy")
