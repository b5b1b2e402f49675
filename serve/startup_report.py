"""Why an application failed to deploy, in words ``engram serve`` prints itself.

``serve.run`` raises only "Failed to update the deployments ['Ingress']"; the reason (a replica's
constructor traceback) sits in Serve's status, which otherwise reaches only Ray's log files.
"""

from __future__ import annotations

from ray.serve.schema import ServeStatus

_BAD_APP = {"DEPLOY_FAILED", "UNHEALTHY"}
_BAD_DEPLOYMENT = {"DEPLOY_FAILED", "UNHEALTHY"}


def deployment_failures(status: ServeStatus, app_names: list[str] | None = None) -> list[str]:
    """One paragraph per failed application and per failed deployment in it (all apps by default)."""
    lines: list[str] = []
    for app_name, app in sorted(status.applications.items()):
        if app_names is not None and app_name not in app_names:
            continue
        failed = {
            name: d for name, d in sorted(app.deployments.items()) if str(d.status.value) in _BAD_DEPLOYMENT
        }
        if str(app.status.value) not in _BAD_APP and not failed:
            continue
        lines.append(f"application {app_name}: {app.status.value}: {app.message.strip() or 'no message'}")
        for name, deployment in failed.items():
            message = deployment.message.strip() or "no message"
            lines.append(f"  deployment {name}: {deployment.status.value}: {message}")
    return lines
