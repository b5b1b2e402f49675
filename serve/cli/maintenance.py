"""``engram sweep | reembed``: the lifecycle job now, and moving every memory onto a new embedder."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from engram.models.settings import load_settings
from engram.serve.cli.options import positive_int


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this group's commands to the ``engram`` parser."""
    sweep_cmd = commands.add_parser(
        "sweep", help="run the lifecycle sweeps now (decay, archive, purge, reconcile)"
    )
    sweep_cmd.add_argument(
        "--dry-run", action="store_true", help="print what the sweep would do, change nothing"
    )
    sweep_cmd.add_argument(
        "--address", help="Ray cluster of a running app (default: $RAY_ADDRESS, else local)"
    )
    sweep_cmd.set_defaults(func=sweep)
    reembed_cmd = commands.add_parser(
        "reembed",
        help="move every memory onto embedder.model (resumable; progress as JSON lines)",
    )
    reembed_cmd.add_argument(
        "--address",
        help="Ray cluster of a running app: work through its shards (default: $RAY_ADDRESS, else here)",
    )
    reembed_cmd.add_argument("--batch-users", type=positive_int, default=64, help="users per progress line")
    reembed_cmd.set_defaults(func=reembed)


def sweep(args: argparse.Namespace) -> int:
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


def reembed(args: argparse.Namespace) -> int:
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
