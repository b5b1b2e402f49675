"""Settings: the SPEC's defaults, YAML files, environment overrides and validation (O1)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from engram.models.enums import MemType, Ownership
from engram.models.settings import Settings, load_settings

pytestmark = pytest.mark.unit


def test_defaults_are_the_specs() -> None:
    s = Settings()
    assert s.weights.for_type(Ownership.USER, MemType.SEMANTIC) == 0.80
    assert s.weights.for_type(Ownership.USER, MemType.EPISODIC) == 0.60
    assert s.weights.for_type(Ownership.USER, MemType.PROCEDURAL) == 0.70
    assert s.weights.for_type(Ownership.AGENT, MemType.SEMANTIC) == 0.70
    assert s.weights.for_type(Ownership.AGENT, MemType.EPISODIC) == 0.50
    assert s.weights.for_type(Ownership.AGENT, MemType.PROCEDURAL) == 0.60
    assert (s.weights.time_bound, s.weights.important) == (0.85, 0.90)
    assert s.decay.lambda_per_day == pytest.approx(math.log(8) / 90)
    assert s.decay.lambda_per_day == pytest.approx(0.0231, abs=1e-4)
    assert s.decay.important_alpha == 0.1
    assert (s.capacity.global_limit, s.capacity.app_limit, s.capacity.total_limit) == (500, 200, 2000)
    assert (s.capacity.important_ratio, s.capacity.evict_target_ratio) == (0.2, 0.9)
    assert s.capacity.archive_threshold == 0.10
    assert (s.recall.min_relevance, s.recall.relevance_weight, s.recall.weight_weight) == (0.3, 0.7, 0.3)
    assert (s.recall.overfetch_factor, s.recall.overfetch_min, s.recall.timeout_ms) == (4, 60, 500)
    assert s.evolution.semantic_dedup_threshold == 0.95
    assert (s.lifecycle.purge_archived_after_days, s.lifecycle.purge_deleted_after_days) == (180, 30)
    assert s.limits.max_request_bytes == 1024 * 1024


def test_yaml_file_then_environment_then_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "engram.yaml"
    config.write_text("recall:\n  min_relevance: 0.4\n  relevance_weight: 0.6\ncapacity:\n  app_limit: 50\n")
    s = load_settings(config)
    assert (s.recall.min_relevance, s.recall.relevance_weight, s.capacity.app_limit) == (0.4, 0.6, 50)
    monkeypatch.setenv("ENGRAM_RECALL__MIN_RELEVANCE", "0.45")
    s = load_settings(config)
    assert s.recall.min_relevance == 0.45 and s.capacity.app_limit == 50
    s = load_settings(config, capacity={"app_limit": 7})
    assert s.capacity.app_limit == 7


def test_config_env_var_names_the_yaml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "engram.yaml"
    config.write_text("decay:\n  important_alpha: 0.2\n")
    monkeypatch.setenv("ENGRAM_CONFIG", str(config))
    assert Settings().decay.important_alpha == 0.2


@pytest.mark.parametrize(
    "override",
    [
        {"recall": {"min_relevance": 1.5}},
        {"recall": {"cosine_floor": 0.5, "cosine_ceiling": 0.4}},
        {"capacity": {"app_limit": 0}},
        {"lifecycle": {"sweep_time_utc": "25:00"}},
        {"unknown_section": {}},
    ],
)
def test_invalid_values_are_refused(override: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings(**override)


def test_default_paths_live_under_the_data_dir(tmp_path: Path) -> None:
    storage = Settings(storage={"data_dir": tmp_path}).storage
    assert storage.resolved_database_url() == f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    assert storage.resolved_milvus_uri() == str(tmp_path / "vectors.db")
    assert storage.resolved_master_key_file() == tmp_path / "master.key"


def test_the_shards_grace_must_leave_the_stop_time_for_serve_and_ray() -> None:
    serve = Settings().serve
    assert serve.stop_grace_s + 8 <= serve.stop_timeout_s <= 25, "a stop ends before a supervisor's 30 s"
    with pytest.raises(ValidationError, match=r"must leave 8 s of serve\.stop_timeout_s"):
        Settings(serve={"stop_grace_s": 15, "stop_timeout_s": 20})
    assert Settings(serve={"stop_grace_s": 30, "stop_timeout_s": 60}).serve.stop_timeout_s == 60
