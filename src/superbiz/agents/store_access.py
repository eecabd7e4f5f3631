"""Store access: what a turn does in embedded stores runs one thread at a time within one
process (the store lock), and nothing waits on it while a model thinks.

Milvus Lite and SQLite live inside the process (so do the embedder and the caches built
over them: exact index, knowledge map, planner vectors) and are not meant for
several threads at once. A turn therefore holds the store lock from start to end, and
lets go of it only while it waits for a model: ``releasing(model)`` wraps a chat model
so that each call runs with the lock released. The lock is held for a turn's own work
(milliseconds), never for the seconds a model takes, so turns of different sessions
overlap in their model calls. With server stores (PostgreSQL, a Milvus server) there
is nothing to serialise and the lock is a no-op.

The five locks, by what they order and across what:

* ``agents.turn_order``: turns of one session (the protocol; within one process);
* ``storage.replica_turn_order``: turns of one session, across replicas (PostgreSQL);
* ``agents.store_access``: threads using the embedded stores, within one process;
* ``storage.kb_writes``: writes to one knowledge base, across every process sharing it;
* ``storage.db``: bringing one database's schema up to date, across every process opening it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from superbiz.config import Settings
from superbiz.llm.base import ChatModel, StreamEvent, quotes_documents
from superbiz.llm.messages import ChatResponse, Message, ToolSpec


class StoreLock:
    """A lock that the thread holding it can set aside around model calls; re-entrant."""

    def __init__(self, enabled: bool = True) -> None:
        self._lock = threading.Lock() if enabled else None
        self._local = threading.local()

    @classmethod
    def for_settings(cls, settings: Settings) -> StoreLock:
        """Enabled when either store is embedded (SQLite file, Milvus Lite)."""
        sqlite = settings.resolved_database_url.startswith("sqlite")
        return cls(enabled=sqlite or settings.uses_milvus_lite)

    @property
    def enabled(self) -> bool:
        return self._lock is not None

    @property
    def _depth(self) -> int:
        depth: int = getattr(self._local, "depth", 0)
        return depth

    @contextmanager
    def held(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock (again, if this thread already does); ``TimeoutError`` when
        another thread keeps it longer than ``timeout`` seconds."""
        lock = self._lock
        depth = self._depth
        if (
            lock is not None
            and depth == 0
            and not lock.acquire(timeout=-1 if timeout is None else timeout)
        ):
            raise TimeoutError(f"the stores stayed busy for {timeout:g} s")
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if lock is not None and depth == 0:
                lock.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Let go of the lock, if this thread holds it, for the duration of the block."""
        lock = self._lock
        depth = self._depth
        if lock is None or depth == 0:
            yield
            return
        self._local.depth = 0
        lock.release()
        try:
            yield
        finally:
            lock.acquire()
            self._local.depth = depth

    def releasing(self, model: ChatModel) -> ChatModel:
        """``model``, with the lock released while it answers (``model`` itself when the
        lock is a no-op)."""
        return ReleasingModel(model, self) if self.enabled else model


class ReleasingModel:
    """A chat model whose calls run outside the store lock."""

    def __init__(self, inner: ChatModel, lock: StoreLock) -> None:
        self.inner = inner
        self.name = inner.name
        self.quotes_documents = quotes_documents(inner)
        self._lock = lock

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        with self._lock.released():
            return self.inner.complete(messages, tools)

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        """Each event is awaited outside the lock; the caller handles it inside. The lock
        never spans a ``yield``, so an abandoned stream cannot leave it released."""
        with self._lock.released():
            events = iter(self.inner.stream(messages, tools))
        while True:
            with self._lock.released():
                event = next(events, None)
            if event is None:
                return
            yield event
