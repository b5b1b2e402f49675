"""LangGraph's long-term memory store over Engram (#29): ``EngramStore`` is a ``BaseStore``.

``store = EngramStore(client=EngramClient(url, api_key=...), aclient=AsyncEngramClient(...))``,
then ``graph = builder.compile(store=store)``. One namespace label names the user (the template's
``{user_id}``, first by default); the memories are written at the store's app (the key's app) or
globally. Each item is one memory: screened, redacted and encrypted like any write, found again by
``search(prefix, query=...)`` through recall's ranking. Sync calls need ``client``, async calls
``aclient``. Each operation is written once, as a generator of HTTP calls, and driven by either.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from engram.integrations import langgraph_items as items
from engram.models.api import (
    AddStructuredRequest,
    DeleteRequest,
    RecallFilter,
    RecallRequest,
    RecallScope,
    UpdateRequest,
)
from engram.models.enums import Level, MemType, Ownership
from engram.serve.client import AsyncEngramClient, EngramClient
from engram.serve.client_calls import Call
from engram.serve.operations import Operations

R = TypeVar("R")
Steps = Generator[Call[Any], Any, R]

RECALL_POOL = 100  # recall answers at most 100 memories: searches and listings page within them


@dataclass(frozen=True)
class _Found:
    """One memory that holds a store item, as recall answered it."""

    memory_id: str
    content: str
    tags: Sequence[str]
    created_at: datetime
    updated_at: datetime
    score: float | None

    def item(self) -> SearchItem:
        return SearchItem(
            namespace=items.namespace_of(self.tags),
            key=items.key_of(self.tags) or "",
            value=items.decode_value(self.content),
            created_at=self.created_at,
            updated_at=self.updated_at,
            score=self.score,
        )


class EngramStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are Engram memories, one user per namespace."""

    def __init__(
        self,
        client: EngramClient | None = None,
        *,
        aclient: AsyncEngramClient | None = None,
        template: Sequence[str] = (items.USER,),
        app_id: str | None = None,
        mem_type: MemType = MemType.SEMANTIC,
        min_relevance: float | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        if client is None and aclient is None:
            raise ValueError("EngramStore needs a client (sync calls), an aclient (async calls) or both")
        self._client = client
        self._aclient = aclient
        self.template = items.check_template(template)
        self.app_id = app_id
        self.mem_type = mem_type
        self.min_relevance = min_relevance
        self.timeout_ms = timeout_ms

    # -- the drivers: one for each kind of client -------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order over the sync client."""
        if self._client is None:
            raise RuntimeError("this EngramStore has no sync client: pass client=EngramClient(...)")
        results: list[Result] = []
        for op in ops:
            steps = self._steps(op)
            try:
                call = next(steps)
                while True:
                    call = steps.send(self._client.send(call))
            except StopIteration as done:
                results.append(done.value)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order over the async client."""
        if self._aclient is None:
            raise RuntimeError("this EngramStore has no async client: pass aclient=AsyncEngramClient(...)")
        results: list[Result] = []
        for op in ops:
            steps = self._steps(op)
            try:
                call = next(steps)
                while True:
                    call = steps.send(await self._aclient.send(call))
            except StopIteration as done:
                results.append(done.value)
        return results

    # -- the operations, as the HTTP calls they make ----------------------------------------

    def _steps(self, op: Op) -> Steps[Result]:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        return self._list_namespaces(op)

    def _get(self, op: GetOp) -> Steps[Result]:
        found = yield from self._find(op.namespace, op.key)
        if not found:
            return None
        newest = found[0]
        return Item(
            value=items.decode_value(newest.content),
            key=op.key,
            namespace=op.namespace,
            created_at=newest.created_at,
            updated_at=newest.updated_at,
        )

    def _put(self, op: PutOp) -> Steps[Result]:
        user_id = items.user_of(op.namespace, self.template)
        tags = items.tags_for(op.namespace, op.key)
        found = yield from self._find(op.namespace, op.key)
        # Two puts of a new key that raced both added a memory: the newest stays, the rest go.
        for stale in found[1:] if op.value is not None else found:
            yield Operations.delete.call(DeleteRequest(user_id=user_id, memory_id=stale.memory_id))
        if op.value is None:
            return None
        content = items.encode_value(op.value)
        if found:
            if found[0].content != content:
                yield Operations.update.call(
                    UpdateRequest(user_id=user_id, memory_id=found[0].memory_id, content=content)
                )
            return None
        yield Operations.add_structured.call(
            AddStructuredRequest(
                user_id=user_id,
                app_id=self.app_id,
                level=Level.APP if self.app_id else Level.GLOBAL,
                ownership=Ownership.USER,
                mem_type=self.mem_type,
                content=content,
                custom_tags=tags,
                sync=True,
            )
        )
        return None

    def _search(self, op: SearchOp) -> Steps[Result]:
        user_id = items.user_of(op.namespace_prefix, self.template)
        tag = items.prefix_tag(op.namespace_prefix)
        if op.query:
            found = yield from self._recall(
                user_id, op.query, tag, top_k=RECALL_POOL, min_relevance=self.min_relevance
            )
        else:
            found = yield from self._listed(user_id, tag)
        matching = [item for item in (f.item() for f in found) if items.matches_filter(item.value, op.filter)]
        return matching[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> Steps[Result]:
        user_id = items.user_of_conditions(op.match_conditions or (), self.template)
        found = yield from self._listed(user_id, items.ITEM_TAG)
        namespaces = {items.namespace_of(f.tags) for f in found}
        chosen = sorted(
            {
                ns[: op.max_depth] if op.max_depth is not None else ns
                for ns in namespaces
                if items.namespace_matches(ns, op.match_conditions or ())
            }
        )
        return list(chosen[op.offset : op.offset + op.limit])

    # -- lookups ----------------------------------------------------------------------------

    def _find(self, namespace: tuple[str, ...], key: str) -> Steps[list[_Found]]:
        """The memories holding item ``(namespace, key)``, newest first (one, unless puts raced)."""
        user_id = items.user_of(namespace, self.template)
        found = yield from self._recall(
            user_id, key, items.id_tag(namespace, key), top_k=10, min_relevance=0.0
        )
        return sorted(found, key=lambda f: (f.created_at, f.memory_id), reverse=True)

    def _recall(
        self, user_id: str, query: str, tag: str, *, top_k: int, min_relevance: float | None
    ) -> Steps[list[_Found]]:
        answer = yield Operations.recall.call(
            RecallRequest(
                user_id=user_id,
                query=query,
                scope=RecallScope(app_id=self.app_id),
                filter=RecallFilter(custom_tags=[tag]),
                top_k=top_k,
                min_relevance=min_relevance,
                timeout_ms=self.timeout_ms,
            )
        )
        return [
            _Found(m.memory_id, m.content, m.custom_tags, m.created_at, m.updated_at, m.relevance)
            for m in answer.memories
        ]

    def _listed(self, user_id: str, tag: str) -> Steps[list[_Found]]:
        """The user's items carrying ``tag``, most recently updated first: at most ``RECALL_POOL``
        (an app's key lists a user's memories only through recall; the full list needs an admin key)."""
        found = yield from self._recall(user_id, "*", tag, top_k=RECALL_POOL, min_relevance=0.0)
        return sorted(found, key=lambda f: (f.updated_at, f.memory_id), reverse=True)
