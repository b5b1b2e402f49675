"""cluster/serve_config.yaml stays in step with the application serve/app.py builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from models.settings import Settings

pytestmark = pytest.mark.unit

CONFIG = Path(__file__).resolve().parents[2] / "cluster" / "serve_config.yaml"


def test_config_names_the_app_and_its_deployments() -> None:
    from serve import app as app_module

    config = yaml.safe_load(CONFIG.read_text())
    [application] = config["applications"]
    assert application["import_path"] == "serve.app:app"
    module_name, attribute = application["import_path"].split(":")
    assert module_name == app_module.__name__ and hasattr(app_module, attribute)
    declared = {d["name"] for d in application["deployments"]}
    assert declared == {
        app_module.RecallDeployment.name,
        app_module.Ingress.name,
        app_module.ExtractionDeployment.name,
    }
    assert config["http_options"]["host"] == "127.0.0.1"
    recall = next(d for d in application["deployments"] if d["name"] == "Recall")
    assert recall["autoscaling_config"]["min_replicas"] >= 1
    extraction = next(d for d in application["deployments"] if d["name"] == "Extraction")
    assert extraction["autoscaling_config"]["min_replicas"] >= 1
    assert extraction["max_ongoing_requests"] >= Settings().engine.batch_max_size


def test_replicas_reserve_the_configured_cpus() -> None:
    # Serve's default (1 CPU each) leaves the three deployments unschedulable on a 2-core machine.
    config = yaml.safe_load(CONFIG.read_text())
    [application] = config["applications"]
    for deployment in application["deployments"]:
        assert deployment["ray_actor_options"]["num_cpus"] == Settings().serve.replica_cpus
