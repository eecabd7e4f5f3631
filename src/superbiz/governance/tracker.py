"""Session action memory: which domains and documents a session already retrieved.

Two backends behind one protocol: ``SqlSessionTracker`` (default; a CLI session
survives between commands, several processes share it) and ``InMemorySessionTracker``
for library use.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from typing import Protocol, cast

from sqlalchemy import Engine, Table, bindparam, delete, select

from superbiz.storage.db import upsert_insert
from superbiz.storage.models import SessionRetrievalRow, utcnow


class SessionTracker(Protocol):
    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Mark several ``(domain, doc_path)`` pairs at once."""
        ...

    def retrieved_domains(self, session_id: str) -> list[str]:
        """Domains in the order the session first retrieved them."""
        ...

    def retrieved_docs(self, session_id: str) -> dict[str, str]:
        """doc_path → domain, in retrieval order."""
        ...

    def forget(self, session_id: str, doc_paths: Collection[str]) -> None:
        """Unmark documents (what a failed turn retrieved)."""
        ...

    def clear_session(self, session_id: str) -> None: ...


class InMemorySessionTracker:
    """Thread-safe, one process; ``session → {doc_path: domain}`` in insertion order."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> None:
        with self._lock:
            docs = self._sessions.setdefault(session_id, {})
            for domain, doc_path in items:
                docs.setdefault(doc_path, domain)

    def retrieved_domains(self, session_id: str) -> list[str]:
        return list(dict.fromkeys(self._sessions.get(session_id, {}).values()))

    def retrieved_docs(self, session_id: str) -> dict[str, str]:
        return dict(self._sessions.get(session_id, {}))

    def forget(self, session_id: str, doc_paths: Collection[str]) -> None:
        with self._lock:
            docs = self._sessions.get(session_id, {})
            for doc_path in doc_paths:
                docs.pop(doc_path, None)

    def clear_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)


_TABLE = cast(Table, SessionRetrievalRow.__table__)  # the ORM types it as a FromClause


class SqlSessionTracker:
    """Action memory in the relational store (table ``session_retrievals``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Built once with bound parameters: SQLAlchemy then reuses the compiled SQL,
        # where a statement with the rows inlined compiled anew on every call (a
        # lookup spent 1.3 ms instead of 0.2 ms on action memory).
        self._mark = upsert_insert(engine, _TABLE).on_conflict_do_nothing()
        self._docs = (
            select(_TABLE.c.doc_path, _TABLE.c.domain)
            .where(_TABLE.c.session_id == bindparam("session_id"))
            .order_by(_TABLE.c.retrieved_at, _TABLE.c.doc_path)
        )

    def mark_many(self, session_id: str, items: Iterable[tuple[str, str]]) -> None:
        rows = [
            {"session_id": session_id, "doc_path": doc, "domain": domain, "retrieved_at": utcnow()}
            for domain, doc in dict((doc, (domain, doc)) for domain, doc in items).values()
        ]
        if not rows:
            return
        with self.engine.begin() as connection:  # Core, not the ORM: it is on the hot path
            connection.execute(self._mark, rows)

    def retrieved_domains(self, session_id: str) -> list[str]:
        return list(dict.fromkeys(self.retrieved_docs(session_id).values()))

    def retrieved_docs(self, session_id: str) -> dict[str, str]:
        with self.engine.connect() as connection:
            rows = connection.execute(self._docs, {"session_id": session_id})
            return {doc: domain for doc, domain in rows}

    def forget(self, session_id: str, doc_paths: Collection[str]) -> None:
        if not doc_paths:
            return
        with self.engine.begin() as connection:
            connection.execute(
                delete(_TABLE).where(
                    _TABLE.c.session_id == session_id, _TABLE.c.doc_path.in_(list(doc_paths))
                )
            )

    def clear_session(self, session_id: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(delete(_TABLE).where(_TABLE.c.session_id == session_id))


def make_tracker(backend: str, engine: Engine) -> SessionTracker:
    """The configured action-memory backend (``advanced.session.backend``)."""
    return InMemorySessionTracker() if backend == "memory" else SqlSessionTracker(engine)
