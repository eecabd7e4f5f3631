"""Turn order: one turn of a session at a time, within one process (across replicas through
``storage.replica_turn_order``); a second request waits its turn, for a bounded time.

Turns of different sessions run concurrently, but two turns of one session must not:
both would read the same history and action memory and record the same turn number.
``SessionLocks`` is what the runtime holds a turn (or a clear) under; ``LocalSessionLocks``
serialises them inside one process, first come first served. Several replicas need an
implementation every replica sees (e.g. a PostgreSQL advisory lock) behind the same
``hold``.

The five locks, by what they order and across what:

* ``agents.turn_order``: turns of one session (the protocol; within one process);
* ``storage.replica_turn_order``: turns of one session, across replicas (PostgreSQL);
* ``agents.store_access``: threads using the embedded stores, within one process;
* ``storage.kb_writes``: writes to one knowledge base, across every process sharing it;
* ``storage.db``: bringing one database's schema up to date, across every process opening it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import Engine

from superbiz.config import Settings
from superbiz.exceptions import SessionBusyError

__all__ = ["LocalSessionLocks", "SessionBusyError", "SessionLocks", "session_locks"]


class SessionLocks(Protocol):
    def hold(self, session_id: str) -> AbstractContextManager[None]:
        """Held while one turn of ``session_id`` runs; raises ``SessionBusyError`` when the
        turn ahead keeps it longer than the configured wait."""
        ...

    def close(self) -> None: ...


def session_locks(settings: Settings, engine: Engine) -> SessionLocks:
    """Locks every replica sees (PostgreSQL advisory locks) when the relational store is
    PostgreSQL, else this process's own: the embedded default needs no server."""
    wait_s = settings.service.session_wait_s
    if engine.dialect.name == "postgresql":
        from superbiz.storage.replica_turn_order import PostgresSessionLocks

        return PostgresSessionLocks(
            settings.resolved_database_url,
            wait_s,
            max_connections=settings.database_pool.session_locks,
            # a turn beyond the pool waits for one ahead to end, which takes at most this
            pool_wait_s=wait_s + settings.llm.turn_timeout_s,
        )
    return LocalSessionLocks(wait_s)


@dataclass(slots=True)
class _Queue:
    """A busy session: whoever holds it, then the waiters in arrival order."""

    waiters: deque[threading.Event] = field(default_factory=deque)


class LocalSessionLocks:
    """Per-session locks of one process, handed over in arrival order.

    A session has an entry only while a turn holds it or waits for it, so the table
    stays as small as the number of busy sessions.
    """

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._guard = threading.Lock()
        self._busy: dict[str, _Queue] = {}

    @contextmanager
    def hold(self, session_id: str) -> Iterator[None]:
        with self._guard:
            queue = self._busy.get(session_id)
            if queue is None:
                self._busy[session_id] = queue = _Queue()
                granted = None
            else:
                granted = threading.Event()
                queue.waiters.append(granted)
        if granted is not None and not granted.wait(self.wait_s):
            with self._guard:
                if not granted.is_set():  # not handed over while giving up: leave the line
                    queue.waiters.remove(granted)
                    raise SessionBusyError(session_id, self.wait_s)
        try:
            yield
        finally:
            with self._guard:
                if queue.waiters:
                    queue.waiters.popleft().set()
                else:
                    del self._busy[session_id]

    def close(self) -> None:
        """Nothing to release: the locks live in this process."""

    def queued(self, session_id: str) -> int:
        """How many turns of ``session_id`` hold the lock or wait for it."""
        with self._guard:
            queue = self._busy.get(session_id)
            return 0 if queue is None else 1 + len(queue.waiters)
