"""cluster/gpu/: the settings, the Serve config and the RayService stay in step (#18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engram.models.settings import load_settings
from engram.serve.extraction import extraction_options

pytestmark = pytest.mark.unit

GPU = Path(__file__).resolve().parents[2] / "cluster" / "gpu"


def _deployment(config: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for app in config["applications"] for d in app["deployments"] if d["name"] == name)


def test_the_serve_config_asks_for_what_the_settings_give() -> None:
    settings = load_settings(GPU / "engram.yaml")
    assert settings.engine.name == "vllm"
    config = yaml.safe_load((GPU / "serve_config.yaml").read_text())
    extraction = _deployment(config, "Extraction")
    expected = extraction_options(settings)
    assert extraction["ray_actor_options"] == expected["ray_actor_options"]
    assert extraction["ray_actor_options"]["num_gpus"] >= 1
    assert extraction["max_ongoing_requests"] == expected["max_ongoing_requests"]
    # Nothing but extraction takes a GPU.
    for name in ("Ingress", "Recall"):
        assert "num_gpus" not in _deployment(config, name)["ray_actor_options"]
    for app in config["applications"]:
        assert app["args"]["config"] == "/etc/engram/engram.yaml"


def test_the_rayservice_serves_that_config_with_a_gpu_worker_group() -> None:
    service = yaml.safe_load((GPU / "rayservice.yaml").read_text())
    assert (service["apiVersion"], service["kind"]) == ("ray.io/v1", "RayService")
    assert yaml.safe_load(service["spec"]["serveConfigV2"]) == yaml.safe_load(
        (GPU / "serve_config.yaml").read_text()
    )
    cluster = service["spec"]["rayClusterConfig"]
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    gpu = groups["gpu"]
    [container] = gpu["template"]["spec"]["containers"]
    gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
    assert int(gpu["rayStartParams"]["num-gpus"]) == gpus >= 1
    needed = _deployment(yaml.safe_load(service["spec"]["serveConfigV2"]), "Extraction")
    assert needed["ray_actor_options"]["num_gpus"] <= gpus
    # One extraction replica per GPU worker at most: the autoscaler's ceiling matches the group's.
    assert needed["autoscaling_config"]["max_replicas"] <= gpu["maxReplicas"] * gpus
    for group in groups.values():
        [worker] = group["template"]["spec"]["containers"]
        env = {e["name"] for e in worker["env"]}
        assert {"ENGRAM_CONFIG", "ENGRAM_STORAGE__DATABASE_URL", "ENGRAM_STORAGE__MASTER_KEY_FILE"} <= env
    assert "nvidia.com/gpu" not in str(groups["cpu"])
