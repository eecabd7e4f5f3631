"""Turns of one session ordered across replicas: PostgreSQL advisory locks.

Two ``PostgresSessionLocks`` (two pools, as two replicas would have) contend for real.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.pool import QueuePool

from conftest import _require_postgres
from superbiz.agents.turn_order import session_locks
from superbiz.config import DatabasePoolSettings, Settings
from superbiz.exceptions import ConfigError, SessionBusyError, StoreError
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.storage.replica_turn_order import LOCK_NAMESPACE, PostgresSessionLocks


@pytest.fixture
def replicas() -> Iterator[tuple[PostgresSessionLocks, PostgresSessionLocks]]:
    url = _require_postgres()
    a, b = PostgresSessionLocks(url, 10.0), PostgresSessionLocks(url, 0.2)
    yield a, b
    a.close()
    b.close()


def test_a_busy_session_is_refused_elsewhere_and_other_sessions_are_not(
    replicas: tuple[PostgresSessionLocks, PostgresSessionLocks],
) -> None:
    a, b = replicas
    with a.hold("alice"):
        with pytest.raises(SessionBusyError, match="'alice' is busy"), b.hold("alice"):
            pass
        with b.hold("bob"):
            pass
    with b.hold("alice"):  # released: free again
        pass


def test_a_waiting_turn_runs_after_the_one_ahead_in_another_replica(
    replicas: tuple[PostgresSessionLocks, PostgresSessionLocks],
) -> None:
    a, _ = replicas
    other = PostgresSessionLocks(_require_postgres(), 30.0)
    order: list[str] = []
    holding, waiting = threading.Event(), threading.Event()

    def second_turn() -> None:
        holding.wait()
        waiting.set()
        with other.hold("carol"):
            order.append("second")

    thread = threading.Thread(target=second_turn)
    thread.start()
    try:
        with a.hold("carol"):
            holding.set()
            waiting.wait()
            order.append("first")
    finally:
        thread.join(30)
        other.close()
    assert order == ["first", "second"]


def test_a_replica_that_dies_mid_turn_releases_its_sessions(
    replicas: tuple[PostgresSessionLocks, PostgresSessionLocks],
) -> None:
    import psycopg

    from conftest import _libpq_url

    a, b = replicas
    session = f"dave-{uuid.uuid4().hex}"
    with a.hold(session):
        with psycopg.connect(_libpq_url(_require_postgres()), autocommit=True) as admin:
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND classid = %s AND objid = (hashtext(%s)::bigint & 4294967295)::oid",
                (LOCK_NAMESPACE, session),
            ).fetchall()
            assert ended == [(True,)]
        with b.hold(session):  # the dead connection's lock is gone
            pass


def test_sqlite_is_refused_and_an_unreachable_database_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="need PostgreSQL"):
        PostgresSessionLocks(f"sqlite:///{tmp_path}/x.db", 1.0)
    locks = PostgresSessionLocks("postgresql+psycopg://postgres@127.0.0.1:1/test", 1.0)
    try:
        with pytest.raises(StoreError, match=r"relational store \(postgresql"), locks.hold("x"):
            pass
    finally:
        locks.close()


def test_turns_beyond_the_lock_pool_wait_in_the_process_then_are_told_why() -> None:
    """``database-pool.session-locks`` bounds the connections turns hold: one more turn
    waits for a free one (no new connection), and past the wait it is a clear 503."""
    locks = PostgresSessionLocks(_require_postgres(), 0.3, max_connections=1)
    try:
        with locks.hold("dave"):
            busy = pytest.raises(StoreError, match=r"database-pool\.session-locks")
            with busy, locks.hold("eve"):
                pass
        with locks.hold("eve"):  # the connection is free again
            pass
    finally:
        locks.close()


def test_the_pools_are_sized_from_settings(
    tmp_path: Path, use_embedder: Any, database_factory: Callable[[str], str]
) -> None:
    pool = DatabasePoolSettings(size=3, overflow=2, session_locks=4)
    # a schema of its own: the shared database's public schema holds whatever other runs
    # (other branches' migrations) left there
    url = database_factory("postgresql")
    settings = Settings(data_dir=tmp_path / "data", database_url=url, database_pool=pool)
    kb = KnowledgeBase(settings, embedder=use_embedder)
    locks = session_locks(settings, kb.engine)
    try:
        assert isinstance(kb.engine.pool, QueuePool) and isinstance(locks, PostgresSessionLocks)
        assert (kb.engine.pool.size(), kb.engine.pool._max_overflow) == (3, 2)
        lock_pool = locks.engine.pool
        assert isinstance(lock_pool, QueuePool)
        assert lock_pool.size() + lock_pool._max_overflow == 4
        # a turn beyond the pool waits for one ahead, which ends within its own timeout
        assert locks.pool_wait_s == settings.service.session_wait_s + settings.llm.turn_timeout_s
        assert pool.most == 9
    finally:
        locks.close()
        kb.close()
