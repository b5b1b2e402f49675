"""A LangGraph graph whose long-term memory is Engram: ``python examples/langgraph_store.py [URL]``.

Two nodes, no LLM (so it runs offline and in CI): the first stores what the user said as items of
the user's namespace, the second answers a question with the best item a search by meaning finds.
Put a chat model in the nodes and the store stays the same. Needs ``pip install 'engram[integrations]'``.
"""

# No ``from __future__ import annotations``: LangGraph reads the state's annotations at run time,
# and this file is also loaded by path (the tests), outside sys.modules.
import operator
import sys
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from engram import EngramClient
from engram.integrations.langgraph import EngramStore


class Turn(TypedDict):
    user: str
    said: Annotated[list[str], operator.add]
    question: str
    answer: str


def remember(state: Turn, *, store: BaseStore) -> dict[str, Any]:
    """Store each statement as an item of the user's ``facts`` namespace."""
    for i, fact in enumerate(state["said"]):
        store.put((state["user"], "facts"), f"fact-{i}", {"text": fact})
    return {}


def answer(state: Turn, *, store: BaseStore) -> dict[str, Any]:
    """Answer with the item that best matches the question."""
    found = store.search((state["user"], "facts"), query=state["question"], limit=1)
    return {"answer": "From memory: " + found[0].value["text"] if found else "I don't know."}


def build(store: BaseStore) -> Any:
    """The compiled graph, with ``store`` as its long-term memory."""
    graph = StateGraph(Turn)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    graph.add_edge("answer", END)
    return graph.compile(store=store)


def main(
    url: str = "http://127.0.0.1:8000", api_key: str | None = None, user_id: str = "langgraph-user"
) -> str:
    """Run the graph against the Engram at ``url``; its answer."""
    client = EngramClient(url, api_key=api_key, timeout_s=60)
    try:
        result = build(EngramStore(client)).invoke(
            {
                "user": user_id,
                "said": ["I prefer taking a taxi to work.", "My sister lives in Lisbon."],
                "question": "How do I get to work?",
                "answer": "",
            }
        )
        return str(result["answer"])
    finally:
        client.close()


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
