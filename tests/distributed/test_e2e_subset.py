"""The e2e suite's own tests, run against the distributed profile (PostgreSQL, a Milvus server,
4 shards and Recall replicas over 2 Ray nodes): add, add_structured, recall, update, delete,
history, session close, export and import, purge and the sweep job.

They are imported, not copied: a change to one of them is a change to both runs. ``engram_app``
resolves to tests/distributed/conftest.py's fixture here.
"""

from __future__ import annotations

import pytest

from tests.e2e.test_lifecycle_e2e import (
    test_session_close_through_the_ray_backend,
    test_the_sweep_job_archives_in_parallel_ray_tasks_and_restore_brings_it_back,
)
from tests.e2e.test_privacy_e2e import (
    test_export_download_and_import_round_trip,
    test_purge_is_immediate_and_the_sweep_finishes_it,
)
from tests.e2e.test_serve_app import (
    client,
    test_add_task_done_recall,
    test_healthz_and_openapi,
    test_structured_update_delete_through_http,
)

pytestmark = pytest.mark.distributed

__all__ = [
    "client",
    "test_add_task_done_recall",
    "test_export_download_and_import_round_trip",
    "test_healthz_and_openapi",
    "test_purge_is_immediate_and_the_sweep_finishes_it",
    "test_session_close_through_the_ray_backend",
    "test_structured_update_delete_through_http",
    "test_the_sweep_job_archives_in_parallel_ray_tasks_and_restore_brings_it_back",
]
