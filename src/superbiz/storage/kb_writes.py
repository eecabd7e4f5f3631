"""One writer of a knowledge base at a time, across every process that shares it.

An ingest first drops index entries that have no document row (what a crash between
the two stores leaves behind). Run beside another writer, that step would drop the
chunks the other one had just inserted and not yet recorded, and the other's document
would be stored with no searchable text until the next ingest repaired it. So every
write (``superbiz ingest``, an upload, a delete) holds this lock:

* on PostgreSQL, a session-level advisory lock on a connection held while writing: the
  replicas and a ``superbiz ingest`` beside them queue in arrival order, and a process
  that dies releases the lock with its connection;
* on SQLite, ``flock`` on a file beside the database, which the kernel releases with
  the process.

It is re-entrant within a thread (an upload ingests while it holds the lock); other
threads of the process wait for it too.

The five locks, by what they order and across what:

* ``agents.turn_order``: turns of one session (the protocol; within one process);
* ``storage.replica_turn_order``: turns of one session, across replicas (PostgreSQL);
* ``agents.store_access``: threads using the embedded stores, within one process;
* ``storage.kb_writes``: writes to one knowledge base, across every process sharing it;
* ``storage.db``: bringing one database's schema up to date, across every process opening it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from sqlalchemy import Engine

from superbiz.storage.db import process_lock
from superbiz.storage.replica_turn_order import LOCK_NAMESPACE

#: first key of the knowledge base's advisory lock (sessions' locks use ``LOCK_NAMESPACE``);
#: the second is the schema's hash, so knowledge bases in other schemas never wait
WRITE_NAMESPACE = LOCK_NAMESPACE + 1


class KnowledgeWriteLock:
    """``held()`` while this process writes to the knowledge base of ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._local = threading.RLock()
        self._depth = 0  # changed only by the thread holding ``_local``
        self._outer: ExitStack | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._local:
            if self._depth == 0:
                self._outer = self._acquire()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._outer is not None:
                    self._outer.close()
                    self._outer = None

    def _acquire(self) -> ExitStack:
        stack = ExitStack()
        stack.enter_context(process_lock(self.engine, WRITE_NAMESPACE, ".write-lock"))
        return stack
