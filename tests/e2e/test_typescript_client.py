"""The TypeScript client's own suite (``npm test`` in clients/typescript) against the session's
app, redeployed with an admin key and one tenant's key (#29): every operation called, error codes
mapped, and the served OpenAPI document equal to the one the client was generated from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import RunningApp, redeployed_with_keys

pytestmark = pytest.mark.e2e

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
ADMIN = "e2e-ts-admin-0123456789abcdef"
TENANT = "e2e-ts-shop-0123456789abcdef"
KEYS = [
    {"name": "ts-ops", "key": ADMIN, "admin": True},
    {"name": "ts-shop", "key": TENANT, "app_ids": ["ts-shop"], "global_scope": True},
]


def test_the_typescript_client_suite_passes_against_the_app(engram_app: RunningApp) -> None:
    assert (CLIENT / "node_modules" / "typescript").is_dir(), "make install runs npm ci there"
    with redeployed_with_keys(engram_app, KEYS) as app:
        env = {**os.environ, "ENGRAM_URL": app.url, "ENGRAM_ADMIN_KEY": ADMIN, "ENGRAM_APP_KEY": TENANT}
        run = subprocess.run(
            ["npm", "test"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=900, check=False
        )
    report = run.stdout[-12_000:] + run.stderr[-4_000:]
    assert run.returncode == 0, report
    # The live suite skips itself without the variables: here it must have run.
    assert "# SKIP" not in run.stdout and "# fail 0" in run.stdout, report
