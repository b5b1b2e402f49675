"""The ``engram`` command line: schema migration, configuration inspection and evaluation.

Later layers add ``serve``, ``loadtest`` and ``sweep`` here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from engram.models.redaction import redacted_settings
from engram.models.settings import SettingsError, load_settings
from engram.storage.database import create_engine
from engram.storage.migrate import upgrade
from engram.storage.private_files import private_umask


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
    # Keys, tokens and passwords in URLs masked: this output lands in terminals, tickets and logs.
    print(json.dumps(redacted_settings(settings), indent=2, ensure_ascii=False))
    return 0


def _eval_locomo(args: argparse.Namespace) -> int:
    # Imported here: the harness pulls in the stores and the embedder, which other commands never need.
    from engram.serve.evaluation.locomo import EvalOptions, run

    convs = [c.strip() for c in args.convs.split(",") if c.strip()] if args.convs else None
    options = EvalOptions(
        data=Path(args.data),
        convs=convs,
        mode=args.mode,
        engine=args.engine,
        out=Path(args.out) if args.out else None,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        max_sessions=args.max_sessions,
        config=args.config,
    )
    return run(options)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _serve(args: argparse.Namespace) -> int:
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


def _http_front_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http-front",
        choices=("haproxy", "ray"),
        default="haproxy",
        help="serve.http_front of the app it starts (default: haproxy, as `engram serve`)",
    )


def _missing_extra(module: str, extra: str) -> bool:
    """True (and says how to install it) when ``module`` of the ``extra`` is not installed."""
    if importlib.util.find_spec(module) is not None:
        return False
    print(f"this command needs the {extra} extra: pip install 'engram[{extra}]'", file=sys.stderr)
    return True


def _loadtest(args: argparse.Namespace) -> int:
    if _missing_extra("locust", "loadtest"):
        return 2
    # The load tester is a layer above the service it loads: run as its own program, never imported.
    command = [
        sys.executable,
        "-m",
        "engram.loadtest.run",
        "--users",
        str(args.users),
        "--memories",
        str(args.memories),
    ]
    command += ["--rps", str(args.rps), "--duration", str(args.duration)]
    command += ["--url", args.url] if args.url else []
    command += ["--seed-cache", str(args.seed_cache)] if args.seed_cache else []
    command += ["--mix", args.mix] if args.mix else []
    command += ["--http-front", args.http_front]
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _bench_writes(args: argparse.Namespace) -> int:
    # A load generator above the service: run as its own program.
    command = [sys.executable, "-m", "engram.loadtest.bench_writes", "--clients", str(args.clients)]
    command += ["--writes", str(args.writes), "--open-rate", str(args.open_rate)]
    command += ["--open-seconds", str(args.open_seconds), "--batch-items", str(args.batch_items)]
    command += ["--batch-requests", str(args.batch_requests), "--batch-users", str(args.batch_users)]
    command += ["--http-front", args.http_front]
    command += ["--url", args.url] if args.url else []
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _bench_ingest(args: argparse.Namespace) -> int:
    command = [sys.executable, "-m", "engram.loadtest.bench_writes", "--writes", "0", "--open-seconds", "0"]
    command += ["--batch-items", str(args.items), "--batch-requests", str(args.requests)]
    command += ["--batch-users", str(args.users), "--http-front", args.http_front]
    command += ["--url", args.url] if args.url else []
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _bench_extraction(args: argparse.Namespace) -> int:
    command = [sys.executable, "-m", "engram.loadtest.bench_extraction", "--sessions", str(args.sessions)]
    for flag, value in (("--config", args.config), ("--data", args.data), ("--engine", args.engine)):
        command += [flag, value] if value else []
    command += ["--model", args.model] if args.model else []
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _bench_autoscale(args: argparse.Namespace) -> int:
    # It starts Ray and both apps itself and offers the load: run as its own program.
    command = [sys.executable, "-m", "engram.loadtest.bench_autoscale", "--clients", str(args.clients)]
    command += ["--users", str(args.users), "--memories", str(args.memories)]
    command += ["--max-replicas", str(args.max_replicas), "--target", str(args.target)]
    command += ["--hold", str(args.hold)]
    command += ["--seed-cache", args.seed_cache] if args.seed_cache else []
    command += ["--levels", args.levels] if args.levels else []
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _bench_poisoning(args: argparse.Namespace) -> int:
    # Fresh stores of its own in a temporary directory: run as its own program.
    command = [sys.executable, "-m", "engram.loadtest.bench_poisoning"]
    command += ["--data-dir", args.data_dir] if args.data_dir else []
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _mcp(args: argparse.Namespace) -> int:
    """MCP over stdio; the API key comes from ENGRAM_API_KEY."""
    from engram.serve.mcp_stdio import serve_stdio

    serve_stdio(args.url, args.user_id)
    return 0


def _bench_fuzz(args: argparse.Namespace) -> int:
    if _missing_extra("schemathesis", "dev"):
        return 2
    # Like the load test, the fuzzer sits above the service: run as its own program.
    command = [sys.executable, "-m", "engram.loadtest.fuzz", "--max-examples", str(args.max_examples)]
    command += ["--url", args.url] if args.url else []
    command += ["--scenarios", str(args.scenarios)] if args.scenarios else []
    return subprocess.call(command)  # noqa: S603 - our own interpreter and module


def _sweep(args: argparse.Namespace) -> int:
    """Run the lifecycle job now: on the cluster at ``--address``, else on a local Ray started here."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from engram.models.rules.sharding import shard_name
    from engram.serve.network import local_ray_environment
    from engram.serve.sweep_job import run_reporting

    settings = load_settings(args.config)
    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address:  # a Ray of its own, on loopback like the embedded default's (serve/network.py)
        os.environ.update(local_ray_environment(os.environ))
    ray.init(address=address or "local", namespace="serve", include_dashboard=False, log_to_driver=False)
    try:
        report = run_reporting(settings, dry_run=args.dry_run)
        print(report.to_json())
    finally:
        if not address:
            # The shards were started here: close them (flushes the vector store) before Ray goes.
            for i in range(settings.serve.shard_count):
                with contextlib.suppress(ValueError):
                    shard = ray.get_actor(shard_name(settings.serve.app_name, i), namespace="serve")
                    ray.get(shard.close.remote())
        ray.shutdown()
    return 1 if report.totals.get("failed_users") else 0


def _reembed(args: argparse.Namespace) -> int:
    """Move every memory onto ``embedder.model``: here, or through the running app at ``--address``."""
    from engram.serve.reembed_job import left, reembed_here, reembed_through_shards

    settings = load_settings(args.config)
    address = args.address or os.environ.get("RAY_ADDRESS")
    if address:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        import ray

        ray.init(address=address, namespace="serve", log_to_driver=False)
        try:
            counts = reembed_through_shards(
                settings,
                batch_users=args.batch_users,
                get_actor=lambda name: ray.get_actor(name, namespace="serve"),
                get=ray.get,
            )
        finally:
            ray.shutdown()
    else:
        from pymilvus.exceptions import MilvusException

        try:
            counts = reembed_here(settings, batch_users=args.batch_users)
        except MilvusException as exc:
            if settings.storage.milvus_uri:
                raise
            # milvus-lite has one owner: most likely the app itself is running on this data dir.
            print(
                f"cannot open the embedded vector store ({exc.message}): if the app is running, "
                "run `engram reembed --address <its Ray address>`",
                file=sys.stderr,
            )
            return 2
    remaining = left(settings)
    print(json.dumps({"reembedded": counts.as_dict(), "model": settings.embedder.model, "left": remaining}))
    return 0 if remaining == 0 and not counts.failed_users else 1


def _keys_rotate(args: argparse.Namespace) -> int:
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


def _keys_hash(_args: argparse.Namespace) -> int:
    """Print the SHA-256 of the API key read on stdin (for ``key_sha256`` in ``auth.api_keys``)."""
    from engram.serve.api_keys import key_sha256, read_key

    try:
        key = read_key(sys.stdin)
    except ValueError as exc:
        print(f"engram keys hash: {exc} (e.g. engram keys hash < key.txt)", file=sys.stderr)
        return 2
    print(key_sha256(key))
    return 0


def _keys_new(_args: argparse.Namespace) -> int:
    """Print a new random API key and its SHA-256, as one JSON line."""
    from engram.serve.api_keys import key_sha256, new_key

    key = new_key()
    print(json.dumps({"key": key, "key_sha256": key_sha256(key)}))
    return 0


def _dev_services(args: argparse.Namespace) -> int:
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
    dev.set_defaults(func=_dev_services)
    serve_cmd = commands.add_parser("serve", help="start the service (Ray Serve) and block until Ctrl-C")
    serve_cmd.add_argument("--port", type=int, help="HTTP port (default: serve.port, 8000)")
    serve_cmd.add_argument("--host", help="address to listen on (default: serve.host, 127.0.0.1)")
    serve_cmd.set_defaults(func=_serve)
    load = commands.add_parser("loadtest", help="seed, start the app if needed, run locust, print recall P99")
    load.add_argument("--users", type=int, default=1000)
    load.add_argument("--memories", type=int, default=100)
    load.add_argument(
        "--rps", type=float, default=30.0, help="offered recall requests per second (writes, without recall)"
    )
    load.add_argument("--mix", help="route=weight,... e.g. recall=18,add=1,add_structured=1 (the default)")
    load.add_argument("--duration", type=int, default=60, help="seconds of load")
    load.add_argument("--url", help="an Engram app already running (default: start one, seeded)")
    load.add_argument(
        "--seed-cache",
        type=Path,
        help="keep the seeded data here and reuse it on later runs of the same size (seeding takes minutes)",
    )
    _http_front_option(load)
    load.set_defaults(func=_loadtest)
    sweep = commands.add_parser(
        "sweep", help="run the lifecycle sweeps now (decay, archive, purge, reconcile)"
    )
    sweep.add_argument("--dry-run", action="store_true", help="print what the sweep would do, change nothing")
    sweep.add_argument("--address", help="Ray cluster of a running app (default: $RAY_ADDRESS, else local)")
    sweep.set_defaults(func=_sweep)
    bench = commands.add_parser("bench", help="long checks that print figures")
    benches = bench.add_subparsers(dest="bench", required=True)
    fuzz = benches.add_parser("fuzz", help="fuzz the HTTP contract (schemathesis); one JSON report")
    fuzz.add_argument("--max-examples", type=_positive_int, default=100, help="requests per operation")
    fuzz.add_argument(
        "--scenarios", type=_positive_int, help="linked call sequences (default: --max-examples)"
    )
    fuzz.add_argument("--url", help="an Engram app already running (default: start one)")
    fuzz.set_defaults(func=_bench_fuzz)
    writes = benches.add_parser("writes", help="the write path beside /healthz: closed, open loop, batches")
    writes.add_argument("--clients", type=_positive_int, default=16, help="closed-loop callers")
    writes.add_argument("--writes", type=int, default=1000, help="closed-loop single writes (0: none)")
    writes.add_argument("--open-rate", type=float, default=50.0, help="open loop: writes offered per second")
    writes.add_argument("--open-seconds", type=float, default=20.0, help="open loop length (0: none)")
    writes.add_argument("--batch-items", type=int, default=100, help="items per batch request (0: none)")
    writes.add_argument("--batch-requests", type=_positive_int, default=10, help="batch requests")
    writes.add_argument("--batch-users", type=_positive_int, default=4, help="users the batches write for")
    writes.add_argument("--url", help="an Engram app already running (default: start one)")
    _http_front_option(writes)
    writes.set_defaults(func=_bench_writes)
    ingest = benches.add_parser("ingest", help="batch ingest: memories DONE per second")
    ingest.add_argument("--items", type=_positive_int, default=100, help="memories per request")
    ingest.add_argument("--requests", type=_positive_int, default=20, help="batch requests (4 callers)")
    ingest.add_argument(
        "--users", type=_positive_int, default=4, help="users the batches write for (1: one user's import)"
    )
    ingest.add_argument("--url", help="an Engram app already running (default: start one)")
    _http_front_option(ingest)
    ingest.set_defaults(func=_bench_ingest)
    extraction = benches.add_parser(
        "extraction", help="extraction throughput of the configured engine (the vLLM device check)"
    )
    extraction.add_argument("--data", help="a LoCoMo JSON file (default: the few-shot cases only)")
    extraction.add_argument(
        "--sessions", type=_positive_int, default=1, help="sessions of its first conversation"
    )
    extraction.add_argument(
        "--engine", choices=["rules", "openai", "local", "vllm"], help="default: engine.name"
    )
    extraction.add_argument("--model", help="engine.model (vllm: a local path or a model id)")
    extraction.set_defaults(func=_bench_extraction)
    autoscale = benches.add_parser(
        "autoscale", help="Recall scaling out under recall load and back: replicas over time, p50/p99"
    )
    autoscale.add_argument("--clients", type=_positive_int, default=16, help="closed-loop recall callers")
    autoscale.add_argument("--max-replicas", type=_positive_int, default=2, help="Recall's max_replicas")
    autoscale.add_argument("--target", type=float, default=4.0, help="target_ongoing_requests")
    autoscale.add_argument("--hold", type=float, default=20.0, help="seconds of load once scaled out")
    autoscale.add_argument("--users", type=_positive_int, default=200, help="seeded users")
    autoscale.add_argument("--memories", type=_positive_int, default=50, help="seeded memories per user")
    autoscale.add_argument("--seed-cache", help="keep seeded data here and reuse it")
    autoscale.add_argument(
        "--levels", help="instead: latency at these requests in flight on one replica, e.g. 1,2,4,8"
    )
    autoscale.set_defaults(func=_bench_autoscale)
    poisoning = benches.add_parser(
        "poisoning", help="write-path defenses (P5): poisoning quarantined, false positives, no secret leaks"
    )
    poisoning.add_argument("--data-dir", help="where the fresh stores go (default: a temporary directory)")
    poisoning.set_defaults(func=_bench_poisoning)
    mcp = commands.add_parser(
        "mcp", help="serve Engram's memory tools over MCP on stdio, against a running Engram"
    )
    mcp.add_argument("--url", default="http://127.0.0.1:8000", help="the running Engram")
    mcp.add_argument("--user-id", help="the user this agent remembers for (tools may then omit it)")
    mcp.set_defaults(func=_mcp)
    reembed = commands.add_parser(
        "reembed",
        help="move every memory onto embedder.model (resumable; progress as JSON lines)",
    )
    reembed.add_argument(
        "--address",
        help="Ray cluster of a running app: work through its shards (default: $RAY_ADDRESS, else here)",
    )
    reembed.add_argument("--batch-users", type=_positive_int, default=64, help="users per progress line")
    reembed.set_defaults(func=_reembed)
    keys = commands.add_parser("keys", help="manage the master key; make API keys and their hashes")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    rotate = key_commands.add_parser(
        "rotate", help="re-wrap every user's data key under a new master key (resumable; progress as JSON)"
    )
    rotate.add_argument("--batch", type=_positive_int, default=500, help="data keys per transaction")
    rotate.add_argument(
        "--keep-old", help="also write the old master key to this file (else it is gone once rotated)"
    )
    rotate.set_defaults(func=_keys_rotate)
    key_commands.add_parser(
        "hash", help="print the SHA-256 of the API key on stdin (auth.api_keys[].key_sha256)"
    ).set_defaults(func=_keys_hash)
    key_commands.add_parser(
        "new", help="print a new random API key and its SHA-256 as one JSON line"
    ).set_defaults(func=_keys_new)
    evaluation = commands.add_parser("eval", help="run an offline evaluation")
    benchmarks = evaluation.add_subparsers(dest="benchmark", required=True)
    locomo = benchmarks.add_parser(
        "locomo", help="LoCoMo evidence retrieval: hit@5, hit@10, recall@10, latency; one JSON line last"
    )
    locomo.add_argument("--data", required=True, help="LoCoMo JSON file (e.g. locomo_dev.json)")
    locomo.add_argument("--convs", help="comma-separated sample ids (default: all)")
    locomo.add_argument("--mode", choices=["turns", "extract"], default="turns", help="how to ingest")
    locomo.add_argument("--engine", help="extraction engine for --mode extract (default: configured)")
    locomo.add_argument("--out", help="also write the JSON result to this file")
    locomo.add_argument("--data-dir", help="data dir for the stores (default: a temporary one)")
    locomo.add_argument(
        "--max-sessions",
        type=_positive_int,
        help="keep only each conversation's first N sessions and the questions whose evidence lies there",
    )
    locomo.set_defaults(func=_eval_locomo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``engram`` console script."""
    # Whatever a command creates (data dir, keys, Ray's session files) is the user's alone (P8).
    private_umask()
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:  # its message names fields and reasons, never the values
        print(exc, file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
