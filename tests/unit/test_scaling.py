"""Replica counts from Settings: Serve autoscaling when configured, else the fixed count (#12)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from engram.models.settings import STOP_RESERVE_S, AutoscalingSettings, Settings
from engram.serve.app import build_app, build_recall_app
from engram.serve.extraction import extraction_options
from engram.serve.scaling import REPLICA_STOP, replica_options

pytestmark = pytest.mark.unit


def _config(app: Any) -> Any:
    return app._bound_deployment._deployment_config


def test_autoscaling_replaces_the_fixed_count() -> None:
    scaling = AutoscalingSettings(min_replicas=1, max_replicas=3, target_ongoing_requests=5)
    assert replica_options(scaling, 2) == {"autoscaling_config": scaling.serve_config(), **REPLICA_STOP}
    assert replica_options(None, 2) == {"num_replicas": 2, **REPLICA_STOP}
    assert replica_options(None) == REPLICA_STOP
    assert set(scaling.serve_config()) == {
        "min_replicas",
        "max_replicas",
        "target_ongoing_requests",
        "upscale_delay_s",
        "downscale_delay_s",
        "look_back_period_s",
    }


def test_bounds_out_of_order_are_refused() -> None:
    with pytest.raises(ValidationError, match="below min_replicas"):
        AutoscalingSettings(min_replicas=3, max_replicas=2)
    with pytest.raises(ValidationError):
        Settings(serve={"recall_autoscaling": {"min_replicas": 0, "max_replicas": 2}})
    with pytest.raises(ValidationError):  # not above Serve's 10 s metrics interval
        AutoscalingSettings(look_back_period_s=10)


def test_the_recall_app_scales_as_the_settings_say() -> None:
    settings = Settings(
        serve={
            "recall_autoscaling": {
                "min_replicas": 1,
                "max_replicas": 3,
                "target_ongoing_requests": 6,
                "upscale_delay_s": 2,
                "downscale_delay_s": 9,
                "look_back_period_s": 14,
            }
        }
    )
    scaling = _config(build_recall_app(settings)).autoscaling_config
    assert (scaling.min_replicas, scaling.max_replicas, scaling.target_ongoing_requests) == (1, 3, 6)
    assert (scaling.upscale_delay_s, scaling.downscale_delay_s, scaling.look_back_period_s) == (2, 9, 14)
    fixed = _config(build_recall_app(Settings(serve={"recall_autoscaling": None, "recall_replicas": 2})))
    assert fixed.autoscaling_config is None and fixed.num_replicas == 2


def test_extraction_and_ingress_scale_as_the_settings_say() -> None:
    settings = Settings(
        serve={
            "extraction_autoscaling": {"min_replicas": 2, "max_replicas": 5, "target_ongoing_requests": 40},
            "ingress_autoscaling": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 50},
        }
    )
    ingress = build_app(settings)
    bound: Any = ingress._bound_deployment
    extraction = _config(bound.init_args[1]).autoscaling_config
    assert (extraction.min_replicas, extraction.max_replicas, extraction.target_ongoing_requests) == (
        2,
        5,
        40,
    )
    assert _config(ingress).autoscaling_config.max_replicas == 2
    fixed = extraction_options(Settings(serve={"extraction_autoscaling": None, "extraction_replicas": 3}))
    assert fixed["num_replicas"] == 3 and "autoscaling_config" not in fixed
    # The default ingress is one fixed replica: its rate limits are per replica.
    assert _config(build_app(Settings())).autoscaling_config is None


def test_every_replica_stops_within_what_the_stop_leaves_serve() -> None:
    # Serve's own defaults (20 s) could outlast serve.stop_timeout_s: every deployment says less.
    settings = Settings()
    ingress = build_app(settings)
    bound: Any = ingress._bound_deployment
    configs = [_config(ingress), _config(bound.init_args[1]), _config(build_recall_app(settings))]
    for config in configs:
        wait = config.graceful_shutdown_timeout_s + config.graceful_shutdown_wait_loop_s
        assert wait < STOP_RESERVE_S / 2, config
