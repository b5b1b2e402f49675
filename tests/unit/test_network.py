"""Who may reach Engram's processes (serve/network.py, SPEC P7): the start-up decision between the
embedded default on loopback and a cluster profile that needs Ray's token authentication."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engram.models.settings import ServeSettings, load_settings
from engram.serve.network import (
    cluster_reasons,
    is_loopback_host,
    joins_a_cluster,
    local_ray_environment,
    start_decision,
)
from engram.serve.replica_loopback import loopback_address

pytestmark = pytest.mark.unit

PROFILE = Path(__file__).resolve().parents[2] / "cluster" / "distributed.yaml"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.5", "localhost", "LocalHost", "::1", "[::1]"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.2", "10.0.0.1", "example.com", "", "[::]"])
def test_hosts_beyond_this_machine(host: str) -> None:
    assert not is_loopback_host(host)


def test_the_embedded_default_starts_with_no_config_and_no_warning() -> None:
    decision = start_decision(ServeSettings(), {})
    assert decision.embedded and decision.refusal is None and decision.warning is None
    # "local" is a Ray of its own too (ray.init's own word for it).
    assert start_decision(ServeSettings(), {"RAY_ADDRESS": "local"}).embedded


@pytest.mark.parametrize(
    ("serve", "environ", "reason"),
    [
        (ServeSettings(), {"RAY_ADDRESS": "ray-head:6379"}, "RAY_ADDRESS is ray-head:6379"),
        (ServeSettings(), {"RAY_ADDRESS": "auto"}, "RAY_ADDRESS is auto"),
        (ServeSettings(ray_profile="cluster"), {}, "serve.ray_profile is cluster"),
        (ServeSettings(host="0.0.0.0"), {}, "serve.host 0.0.0.0 is not a loopback address"),
        (ServeSettings(host="10.1.2.3"), {}, "serve.host 10.1.2.3"),
    ],
)
def test_a_cluster_profile_without_token_auth_is_refused(
    serve: ServeSettings, environ: dict[str, str], reason: str
) -> None:
    for mode in (None, "disabled", ""):
        env = dict(environ) if mode is None else {**environ, "RAY_AUTH_MODE": mode}
        decision = start_decision(serve, env)
        assert not decision.embedded and decision.refusal is not None, env
        assert reason in decision.refusal and "RAY_AUTH_MODE=token" in decision.refusal
        assert "serve.allow_unauthenticated_ray" in decision.refusal  # says how to opt out


def test_a_cluster_profile_with_token_auth_starts() -> None:
    for environ in ({"RAY_ADDRESS": "ray-head:6379", "RAY_AUTH_MODE": "token"}, {"RAY_AUTH_MODE": "TOKEN"}):
        decision = start_decision(ServeSettings(ray_profile="cluster", host="0.0.0.0"), environ)
        assert not decision.embedded and decision.refusal is None and decision.warning is None


def test_the_explicit_opt_out_starts_with_a_loud_warning() -> None:
    serve = ServeSettings(ray_profile="cluster", allow_unauthenticated_ray=True)
    decision = start_decision(serve, {"RAY_ADDRESS": "ray-head:6379", "RAY_AUTH_MODE": "disabled"})
    assert decision.refusal is None and decision.warning is not None
    assert decision.warning.startswith("WARNING: RAY RUNS WITHOUT AUTHENTICATION")
    assert "RAY_ADDRESS is ray-head:6379" in decision.warning
    # The opt-out changes nothing for the embedded default: no warning there.
    assert start_decision(ServeSettings(allow_unauthenticated_ray=True), {}).warning is None


def test_the_distributed_profile_is_a_cluster_one() -> None:
    settings = load_settings(PROFILE)
    assert cluster_reasons(settings.serve, {}) == ["serve.ray_profile is cluster"]
    assert start_decision(settings.serve, {}).refusal is not None
    assert start_decision(settings.serve, {"RAY_AUTH_MODE": "token"}).refusal is None


def test_a_local_ray_runs_on_loopback_without_tokens_unless_asked() -> None:
    assert local_ray_environment({}) == {
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    # The operator's own choice of auth mode stays.
    assert local_ray_environment({"RAY_AUTH_MODE": "token"}) == {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    assert not joins_a_cluster({}) and not joins_a_cluster({"RAY_ADDRESS": " "})
    assert joins_a_cluster({"RAY_ADDRESS": "10.0.0.1:6379"})


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container spec in a KubeRay manifest, wherever it sits (cluster pods, job submitters)."""
    found = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list):
                found.extend(node["containers"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(manifest)
    return found


@pytest.mark.parametrize(
    "name", ["raycluster.yaml", "rayservice.yaml", "sweep_rayjob.yaml", "lifecycle_raycronjob.yaml"]
)
def test_every_pod_of_the_cluster_manifests_runs_ray_with_a_token(name: str) -> None:
    containers = _containers(yaml.safe_load((PROFILE.parent / name).read_text()))
    assert containers
    for container in containers:
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["RAY_AUTH_MODE"]["value"] == "token", (name, container["name"])
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "engram-ray-token",
            "key": "token",
        }


def test_a_replicas_wildcard_grpc_bind_moves_to_a_loopback_node_only() -> None:
    assert loopback_address("[::]:0", "127.0.0.1") == "127.0.0.1:0"
    assert loopback_address("[::]:0", "::1") == "[::1]:0"
    assert loopback_address("[::]:0", "10.0.0.7") == "[::]:0"  # a cluster node's callers are elsewhere
    assert loopback_address("10.0.0.7:9000", "127.0.0.1") == "10.0.0.7:9000"
