"""``engram mcp | eval``: Engram's tools for an agent over stdio, and the offline evaluation."""

from __future__ import annotations

import argparse
from pathlib import Path

from engram.serve.cli.options import positive_int


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this group's commands to the ``engram`` parser."""
    mcp_cmd = commands.add_parser(
        "mcp", help="serve Engram's memory tools over MCP on stdio, against a running Engram"
    )
    mcp_cmd.add_argument("--url", default="http://127.0.0.1:8000", help="the running Engram")
    mcp_cmd.add_argument("--user-id", help="the user this agent remembers for (tools may then omit it)")
    mcp_cmd.set_defaults(func=mcp)
    evaluation = commands.add_parser("eval", help="run an offline evaluation")
    benchmarks = evaluation.add_subparsers(dest="benchmark", required=True)
    locomo = benchmarks.add_parser(
        "locomo", help="LoCoMo evidence retrieval: hit@5, hit@10, recall@10, latency; one JSON line last"
    )
    locomo.add_argument("--data", required=True, help="LoCoMo JSON file (e.g. locomo_dev.json)")
    locomo.add_argument("--convs", help="comma-separated sample ids (default: all)")
    locomo.add_argument("--mode", choices=["turns", "extract"], default="turns", help="how to ingest")
    locomo.add_argument("--engine", help="extraction engine for --mode extract (default: configured)")
    locomo.add_argument(
        "--no-context",
        action="store_true",
        help="--mode turns: store each turn without the turn before it as its context",
    )
    locomo.add_argument("--out", help="also write the JSON result to this file")
    locomo.add_argument("--data-dir", help="data dir for the stores (default: a temporary one)")
    locomo.add_argument(
        "--max-sessions",
        type=positive_int,
        help="keep only each conversation's first N sessions and the questions whose evidence lies there",
    )
    locomo.set_defaults(func=eval_locomo)


def mcp(args: argparse.Namespace) -> int:
    """MCP over stdio; the API key comes from ENGRAM_API_KEY."""
    from engram.serve.mcp_stdio import serve_stdio

    serve_stdio(args.url, args.user_id)
    return 0


def eval_locomo(args: argparse.Namespace) -> int:
    """The LoCoMo evidence-retrieval evaluation; one JSON line last."""
    # Imported here: the harness pulls in the stores and the embedder, which other commands never need.
    from engram.serve.evaluation.locomo import EvalOptions, run

    convs = [c.strip() for c in args.convs.split(",") if c.strip()] if args.convs else None
    options = EvalOptions(
        data=Path(args.data),
        convs=convs,
        mode=args.mode,
        engine=args.engine,
        turn_context=not args.no_context,
        out=Path(args.out) if args.out else None,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        max_sessions=args.max_sessions,
        config=args.config,
    )
    return run(options)
