"""cluster/serve_config.yaml stays in step with the application serve/app.py builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engram.models.settings import Settings

pytestmark = pytest.mark.unit

CONFIG = Path(__file__).resolve().parents[2] / "cluster" / "serve_config.yaml"


def test_config_names_both_apps_and_their_deployments() -> None:
    from engram.serve import app as app_module
    from engram.serve.http_app import RECALL_PATH

    config = yaml.safe_load(CONFIG.read_text())
    apps = {a["import_path"]: a for a in config["applications"]}
    assert set(apps) == {"engram.serve.app:app_builder", "engram.serve.app:recall_app_builder"}
    for import_path in apps:
        module_name, attribute = import_path.split(":")
        assert module_name == app_module.__name__ and callable(getattr(app_module, attribute))
    main, recall_app = apps["engram.serve.app:app_builder"], apps["engram.serve.app:recall_app_builder"]
    # Nothing is built when the module is imported: the builders build on demand.
    assert not hasattr(app_module, "app") and not hasattr(app_module, "recall_app")
    assert app_module.app_builder({}).__class__.__name__ == "Application"
    assert main["route_prefix"] == "/" and recall_app["route_prefix"] == RECALL_PATH
    defaults = Settings()
    assert (main["name"], recall_app["name"]) == (
        defaults.serve.app_name,
        app_module.recall_app_name(defaults),
    )
    assert {d["name"] for d in main["deployments"]} == {
        app_module.Ingress.name,
        app_module.ExtractionDeployment.name,
    }
    [recall] = recall_app["deployments"]
    assert recall["name"] == app_module.RecallDeployment.name
    assert config["http_options"]["host"] == "127.0.0.1"
    assert recall["autoscaling_config"]["min_replicas"] >= 1
    extraction = next(d for d in main["deployments"] if d["name"] == "Extraction")
    assert extraction["autoscaling_config"]["min_replicas"] >= 1
    assert extraction["max_ongoing_requests"] >= defaults.engine.batch_max_size


def test_replicas_reserve_the_configured_cpus() -> None:
    # Serve's default (1 CPU each) leaves the three deployments unschedulable on a 2-core machine.
    config = yaml.safe_load(CONFIG.read_text())
    for application in config["applications"]:
        for deployment in application["deployments"]:
            assert deployment["ray_actor_options"]["num_cpus"] == Settings().serve.replica_cpus


def test_the_config_scales_as_the_app_built_from_the_settings() -> None:
    # `serve deploy` of this file and `engram serve` (deploy(settings)) run the same replicas.
    from engram.serve.app import build_app, build_recall_app

    defaults = Settings()
    # Serve keeps a bound deployment's options on the Application (no public accessor).
    main: Any = build_app(defaults)._bound_deployment
    built: dict[str, Any] = {
        "Ingress": main,
        "Extraction": main.init_args[1]._bound_deployment,
        "Recall": build_recall_app(defaults)._bound_deployment,
    }
    config = yaml.safe_load(CONFIG.read_text())
    for application in config["applications"]:
        for deployment in application["deployments"]:
            options = built[deployment["name"]]
            scaling = options._deployment_config.autoscaling_config
            if "autoscaling_config" in deployment:
                written = deployment["autoscaling_config"]
                assert scaling is not None and written == {key: getattr(scaling, key) for key in written}
            else:
                assert scaling is None and options._deployment_config.num_replicas == 1
            assert deployment["max_ongoing_requests"] == options.max_ongoing_requests
    [recall] = next(a for a in config["applications"] if a["import_path"].endswith("recall_app_builder"))[
        "deployments"
    ]
    assert defaults.serve.recall_autoscaling is not None
    assert recall["autoscaling_config"] == defaults.serve.recall_autoscaling.serve_config()
