"""The extraction deployment's resources and vLLM engine arguments come from Settings (#18)."""

from __future__ import annotations

from typing import Any

import pytest

from engram.actors.engines import factory
from engram.models.settings import Settings
from engram.serve.extraction import extraction_options

pytestmark = pytest.mark.unit


def _vllm(**engine: Any) -> Settings:
    return Settings(engine={"name": "vllm", "model": "Qwen/Qwen2.5-7B-Instruct", **engine})


@pytest.mark.parametrize("name", ["rules", "local"])
def test_other_engines_ask_for_no_gpu(name: str) -> None:
    options = extraction_options(Settings(engine={"name": name}))
    assert options["ray_actor_options"] == {"num_cpus": Settings().serve.replica_cpus}
    assert "placement_group_bundles" not in options
    assert options["max_ongoing_requests"] == 4 * Settings().engine.batch_max_size


def test_vllm_asks_for_one_gpu_per_replica_by_default() -> None:
    options = extraction_options(_vllm())
    assert options["ray_actor_options"]["num_gpus"] == 1
    assert "accelerator_type" not in options["ray_actor_options"]
    # Replicas scale within serve.extraction_autoscaling (a fixed count only when that is null).
    scaling = Settings().serve.extraction_autoscaling
    assert scaling is not None and options["autoscaling_config"] == scaling.serve_config()
    assert "num_replicas" not in options


def test_vllm_gpu_share_and_accelerator_type_come_from_settings() -> None:
    options = extraction_options(_vllm(num_gpus=0.5, accelerator_type="H100"))
    assert options["ray_actor_options"]["num_gpus"] == 0.5
    assert options["ray_actor_options"]["accelerator_type"] == "H100"


def test_tensor_parallel_replicas_reserve_one_bundle_per_gpu_on_one_node() -> None:
    settings = _vllm(vllm={"tensor_parallel_size": 4})
    options = extraction_options(settings)
    cpus = settings.serve.replica_cpus
    assert options["placement_group_bundles"] == [{"CPU": cpus, "GPU": 1.0}] + [{"GPU": 1.0}] * 3
    assert options["placement_group_strategy"] == "STRICT_PACK"
    assert "num_gpus" not in options["ray_actor_options"]
    assert settings.engine.vllm.engine_args()["distributed_executor_backend"] == "ray"


def test_engine_arguments_pass_through_to_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    built: dict[str, Any] = {}

    def build_engine(name: str, **options: Any) -> Any:
        built.update(name=name, **options)
        return object()

    # vllm itself needs a CUDA GPU; what the factory hands its constructor is what is tested here.
    monkeypatch.setattr(factory, "build_engine", build_engine)
    settings = _vllm(
        vllm={
            "max_model_len": 8192,
            "gpu_memory_utilization": 0.8,
            "dtype": "bfloat16",
            "quantization": "awq",
            "max_num_seqs": 64,
        }
    )
    factory.engine_from_settings(settings.engine)
    assert built == {
        "name": "vllm",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "tensor_parallel_size": 1,
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.8,
        "dtype": "bfloat16",
        "quantization": "awq",
        "max_num_seqs": 64,
    }


def test_unset_engine_arguments_are_left_to_vllm() -> None:
    assert _vllm().engine.vllm.engine_args() == {
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.9,
        "dtype": "auto",
    }


def test_batches_larger_than_vllm_decodes_at_once_are_refused() -> None:
    with pytest.raises(ValueError, match="max_num_seqs"):
        _vllm(batch_max_size=32, vllm={"max_num_seqs": 16})
    assert _vllm(batch_max_size=16, vllm={"max_num_seqs": 16}).engine.batch_max_size == 16


def test_the_built_app_carries_the_gpu_request() -> None:
    from engram.serve.app import build_app

    app = build_app(_vllm(accelerator_type="A10G"))
    extraction = app._bound_deployment.init_args[1]._bound_deployment
    assert extraction.ray_actor_options["num_gpus"] == 1
    assert extraction.ray_actor_options["accelerator_type"] == "A10G"
    plain = build_app(Settings())._bound_deployment.init_args[1]._bound_deployment
    assert "num_gpus" not in plain.ray_actor_options
