"""Engram from inside the Ray cluster, through the Serve app's handle (no HTTP hop):
``python examples/ray_handle.py [APP_NAME]`` on a node of the cluster that runs Engram."""

from __future__ import annotations

import sys

import ray
from ray import serve

from engram import AddStructuredRequest, RecallRequest


def main(app_name: str = "engram") -> list[str]:
    """Store one memory and recall it with the same request models as HTTP."""
    if not ray.is_initialized():
        ray.init(address="auto", namespace="serve")
    handle = serve.get_app_handle(app_name)
    request = AddStructuredRequest(
        user_id="handle-example",
        ownership="USER",
        mem_type="SEMANTIC",
        content="My dentist appointment is on Friday at nine.",
        sync=True,
    )
    handle.add_structured.remote(request).result()
    answer = handle.recall.remote(
        RecallRequest(user_id="handle-example", query="when is the dentist?")
    ).result()
    return [memory.content for memory in answer.memories]


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
