"""cluster/: the RayService, the RayCluster, the sweep RayJob and RayCronJob, the Serve config and
the distributed settings file stay in step (#12)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engram.models.settings import Settings, load_settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
SETTINGS_PATH = "/etc/engram/engram.yaml"


def _load(name: str) -> Any:
    return yaml.safe_load((CLUSTER / name).read_text())


def _pods(cluster_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of the head group and of every worker group."""
    groups = [cluster_spec["headGroupSpec"], *cluster_spec["workerGroupSpecs"]]
    return [group["template"]["spec"] for group in groups]


def _profile() -> Settings:
    """The distributed profile's settings (cluster/distributed.yaml), the ConfigMap's content."""
    path = CLUSTER / "distributed.yaml"
    # load_settings of a missing file gives the defaults: say so instead.
    assert path.is_file(), "cluster/distributed.yaml, the distributed profile, is missing"
    return load_settings(path)


def _deployments(serve_config: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for app in serve_config["applications"] for d in app["deployments"]]


def _worker_cpus(group: dict[str, Any]) -> float:
    """Ray CPUs of one worker: ``num-cpus`` when given, else the container's CPU limit (KubeRay's rule)."""
    if "num-cpus" in group["rayStartParams"]:
        return float(group["rayStartParams"]["num-cpus"])
    [container] = group["template"]["spec"]["containers"]
    return float(container["resources"]["limits"]["cpu"])


def _custom_resources(group: dict[str, Any]) -> dict[str, float]:
    text = group["rayStartParams"].get("resources")
    # KubeRay passes the value to `ray start --resources` as it is: a quoted JSON object.
    found: dict[str, float] = json.loads(json.loads(text)) if text else {}
    return found


def test_the_rayservice_serves_the_serve_config() -> None:
    service = _load("rayservice.yaml")
    assert (service["apiVersion"], service["kind"]) == ("ray.io/v1", "RayService")
    served = yaml.safe_load(service["spec"]["serveConfigV2"])
    # The same Serve config as a laptop deploys, but listening on the pod's address, naming the
    # mounted settings file (not only through ENGRAM_CONFIG: `serve build` shows it) and scaling as
    # that file says (the Serve config's numbers win over the settings' on the cluster).
    profile = _profile().serve
    scaling = {"Recall": profile.recall_autoscaling, "Extraction": profile.extraction_autoscaling}
    expected = _load("serve_config.yaml")
    expected["http_options"]["host"] = "0.0.0.0"
    for app in expected["applications"]:
        app["args"] = {"config": SETTINGS_PATH}
        for deployment in app["deployments"]:
            wanted = scaling.get(deployment["name"])
            if wanted is not None:
                deployment["autoscaling_config"] = wanted.serve_config()
    assert served == expected


def test_the_rayservice_runs_the_raycluster_spec() -> None:
    cluster = _load("raycluster.yaml")
    assert (cluster["apiVersion"], cluster["kind"]) == ("ray.io/v1", "RayCluster")
    service = _load("rayservice.yaml")["spec"]
    assert service["rayClusterConfig"] == cluster["spec"]
    # Never two clusters (two sets of shards, two consumers of a user's tasks) on one store.
    assert service["upgradeStrategy"] == {"type": "None"}


def test_every_pod_mounts_the_settings_and_reads_the_master_key_from_a_secret() -> None:
    spec = _load("raycluster.yaml")["spec"]
    pods = _pods(spec)
    assert len(pods) >= 2  # a head and at least one worker group
    key_env = Settings().storage.master_key_env
    images = set()
    for pod in pods:
        [container] = pod["containers"]
        images.add(container["image"])
        env = {e["name"]: e for e in container["env"]}
        assert env["ENGRAM_CONFIG"]["value"] == SETTINGS_PATH
        assert env[key_env]["valueFrom"]["secretKeyRef"]["name"] == "engram-master-key"
        # No key file on any node: the secret provider never creates one (docs/privacy.md).
        assert "ENGRAM_STORAGE__MASTER_KEY_FILE" not in env
        volumes = {v["name"]: v for v in pod["volumes"]}
        [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == SETTINGS_PATH]
        assert volumes[mount["name"]]["configMap"]["name"] == "engram-config"
        assert mount["subPath"] == "engram.yaml"
        data = env["ENGRAM_STORAGE__DATA_DIR"]["value"]
        [shared] = [m for m in container["volumeMounts"] if m["mountPath"] == data]
        assert "persistentVolumeClaim" in volumes[shared["name"]]
    assert len(images) == 1
    # The ConfigMap is made from the distributed profile's settings file, as the header says.
    command = "--from-file=engram.yaml=cluster/distributed.yaml"
    assert command in (CLUSTER / "raycluster.yaml").read_text()
    assert command in (ROOT / "docs" / "operations.md").read_text()


def test_the_settings_file_is_the_cluster_profile() -> None:
    settings = _profile()
    storage = settings.storage
    assert storage.key_provider == "secret" and storage.master_key_env == Settings().storage.master_key_env
    assert storage.database_url.startswith("postgresql") and storage.milvus_uri
    assert settings.serve.shard_count > 1
    # What build_app runs with on the cluster is what the RayService's Serve config says.
    served = yaml.safe_load(_load("rayservice.yaml")["spec"]["serveConfigV2"])
    recall = next(d for d in _deployments(served) if d["name"] == "Recall")
    assert settings.serve.recall_autoscaling is not None
    assert recall["autoscaling_config"] == settings.serve.recall_autoscaling.serve_config()
    extraction = next(d for d in _deployments(served) if d["name"] == "Extraction")
    assert settings.serve.extraction_autoscaling is not None
    assert extraction["autoscaling_config"] == settings.serve.extraction_autoscaling.serve_config()
    # Every resource a shard asks for is offered by a worker group.
    offered: dict[str, float] = {}
    for group in _load("raycluster.yaml")["spec"]["workerGroupSpecs"]:
        offered.update(_custom_resources(group))
    assert set(settings.serve.shard_resources) <= set(offered)


def test_the_workers_hold_what_the_serve_config_and_the_shards_ask_for() -> None:
    spec = _load("raycluster.yaml")["spec"]
    # The head schedules nothing: losing a worker never takes the GCS or the controller with it.
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    workers = spec["workerGroupSpecs"]
    served = yaml.safe_load(_load("rayservice.yaml")["spec"]["serveConfigV2"])
    deployments = _deployments(served)

    def asked(replicas: str) -> float:
        cpus = 0.0
        for d in deployments:
            count = (
                d["autoscaling_config"][replicas] if "autoscaling_config" in d else d.get("num_replicas", 1)
            )
            cpus += count * d["ray_actor_options"]["num_cpus"]
        return cpus

    # A shard actor needs one free CPU to be placed (Ray's default for actors).
    shards = _profile().serve.shard_count
    at_least = sum(g["minReplicas"] * _worker_cpus(g) for g in workers)
    at_most = sum(g["maxReplicas"] * _worker_cpus(g) for g in workers)
    assert asked("min_replicas") + shards <= at_least
    assert asked("max_replicas") + shards <= at_most
    # Two workers at least: a node's loss leaves one to restart shards and replicas on.
    assert sum(g["minReplicas"] for g in workers) >= 2
    offered: dict[str, float] = {}
    for group in workers:
        offered.update(_custom_resources(group))
    for d in deployments:
        assert set(d["ray_actor_options"].get("resources", {})) <= set(offered)


def test_the_sweep_job_and_the_cron_job_run_on_that_cluster() -> None:
    job, cron, cluster = (
        _load("sweep_rayjob.yaml"),
        _load("lifecycle_raycronjob.yaml"),
        _load("raycluster.yaml"),
    )
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    assert (cron["apiVersion"], cron["kind"]) == ("ray.io/v1", "RayCronJob")
    assert cron["spec"]["jobTemplate"] == job["spec"]
    spec = job["spec"]
    assert spec["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
    # Never a cluster of its own (the sweep must reach the app's shards) nor one deleted after it.
    assert "rayClusterSpec" not in spec and not spec.get("shutdownAfterJobFinishes", False)
    program, flag, module = spec["entrypoint"].split()
    assert (program, flag) == ("python", "-m") and module == "engram.serve.sweep_job"
    assert importlib.util.find_spec(module) is not None
    env = yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"]
    [head] = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    head_env = {e["name"]: e.get("value") for e in head["env"]}
    # The driver runs on the head: the settings file it names is the one mounted there.
    assert env["ENGRAM_CONFIG"] == head_env["ENGRAM_CONFIG"] == SETTINGS_PATH
    assert any(m["mountPath"] == SETTINGS_PATH for m in head["volumeMounts"])
    [submitter] = spec["submitterPodTemplate"]["spec"]["containers"]
    assert submitter["image"] == head["image"]


def test_the_gpu_profile_scales_as_its_settings_say() -> None:
    settings = load_settings(CLUSTER / "gpu" / "engram.yaml")
    config = yaml.safe_load((CLUSTER / "gpu" / "serve_config.yaml").read_text())
    scaling = {
        "Recall": settings.serve.recall_autoscaling,
        "Extraction": settings.serve.extraction_autoscaling,
    }
    for deployment in _deployments(config):
        written = deployment.get("autoscaling_config")
        if deployment["name"] in scaling:
            wanted = scaling[deployment["name"]]
            assert written is not None and wanted is not None
            assert written == wanted.serve_config()
        else:
            assert written is None and settings.serve.ingress_autoscaling is None
