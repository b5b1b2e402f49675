"""The reason a deployment failed, read from Serve's status for ``engram serve`` to print (issue #19)."""

from __future__ import annotations

import pytest
from ray.serve._private.common import DeploymentStatus, DeploymentStatusTrigger, ReplicaState
from ray.serve.schema import (
    ApplicationStatus,
    ApplicationStatusOverview,
    DeploymentStatusOverview,
    ServeStatus,
)

from engram.serve.startup_report import deployment_failures

pytestmark = pytest.mark.unit

TRACEBACK = (
    "The deployment failed to start 3 times in a row. Error:\n"
    "KeyError: \"Deployment(name='Extraction', app='engram') does not exist.\""
)


def _deployment(status: DeploymentStatus, message: str = "") -> DeploymentStatusOverview:
    return DeploymentStatusOverview(
        status=status,
        status_trigger=DeploymentStatusTrigger.CONFIG_UPDATE_STARTED,
        replica_states={ReplicaState.RUNNING: 1},
        message=message,
    )


def _status() -> ServeStatus:
    return ServeStatus(
        applications={
            "engram": ApplicationStatusOverview(
                status=ApplicationStatus.DEPLOY_FAILED,
                message="Failed to update the deployments ['Ingress'].",
                last_deployed_time_s=0.0,
                deployments={
                    "Ingress": _deployment(DeploymentStatus.DEPLOY_FAILED, TRACEBACK),
                    "Extraction": _deployment(DeploymentStatus.HEALTHY),
                },
            ),
            "engram-recall": ApplicationStatusOverview(
                status=ApplicationStatus.RUNNING,
                message="",
                last_deployed_time_s=0.0,
                deployments={"Recall": _deployment(DeploymentStatus.HEALTHY)},
            ),
        }
    )


def test_a_failed_deployment_is_reported_with_its_reason() -> None:
    lines = deployment_failures(_status())
    assert lines[0] == "application engram: DEPLOY_FAILED: Failed to update the deployments ['Ingress']."
    assert lines[1].startswith("  deployment Ingress: DEPLOY_FAILED: The deployment failed to start")
    assert "does not exist" in lines[1]
    # Healthy deployments and healthy applications say nothing.
    assert len(lines) == 2


def test_only_the_named_applications_are_reported() -> None:
    assert deployment_failures(_status(), ["engram-recall"]) == []


def test_a_healthy_serve_reports_nothing() -> None:
    status = _status()
    app = status.applications["engram"]
    app.status = ApplicationStatus.RUNNING
    app.deployments["Ingress"] = _deployment(DeploymentStatus.HEALTHY)
    assert deployment_failures(status) == []
