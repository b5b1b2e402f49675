"""The Python client against a running Engram: ``python examples/python_client.py [URL]``."""

from __future__ import annotations

import sys

from engram import AddStructuredRequest, EngramClient, RecallRequest


def main(url: str = "http://127.0.0.1:8000", api_key: str | None = None) -> list[str]:
    """Store one memory at once (sync), recall it; returns the recalled contents."""
    client = EngramClient(url, api_key=api_key, timeout_s=60)
    try:
        client.add_structured(
            AddStructuredRequest(
                user_id="example-user",
                ownership="USER",
                mem_type="SEMANTIC",
                content="I prefer taking a taxi to work.",
                sync=True,
            )
        )
        answer = client.recall(RecallRequest(user_id="example-user", query="how do I get to work?"))
        return [memory.content for memory in answer.memories]
    finally:
        client.close()


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
