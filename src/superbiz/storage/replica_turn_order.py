"""Turns of one session ordered across replicas: a PostgreSQL advisory lock per session.

Replicas behind a load balancer may receive two requests of one session at once; both
would read the same history and action memory and record the same turn number. Every
replica already shares the PostgreSQL database, so the lock lives there:
``pg_advisory_lock(namespace, hashtext(session_id))`` on a connection dedicated to the
turn while it runs. PostgreSQL queues the waiters in arrival order; ``lock_timeout``
bounds the wait (``SessionBusyError``, 409). A replica that dies mid-turn loses its
connection and with it the lock, so nothing stays locked after a crash. Two sessions
whose ids hash alike merely take turns. Chosen over Redis by measurement (README,
"Deploy for a team"): one server fewer to run, and no lease to expire under a slow turn.

The five locks, by what they order and across what:

* ``agents.turn_order``: turns of one session (the protocol; within one process);
* ``storage.replica_turn_order``: turns of one session, across replicas (PostgreSQL);
* ``agents.store_access``: threads using the embedded stores, within one process;
* ``storage.kb_writes``: writes to one knowledge base, across every process sharing it;
* ``storage.db``: bringing one database's schema up to date, across every process opening it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from superbiz.exceptions import ConfigError, SessionBusyError, StoreError
from superbiz.storage.db import dedicated_connection, relational_store_error

#: first key of every advisory lock superbiz takes, so that other applications sharing
#: the database (with their own keys) never wait on a session's turn
LOCK_NAMESPACE = 0x5B12
#: PostgreSQL's SQLSTATE for "lock_not_available" (lock_timeout expired)
_LOCK_NOT_AVAILABLE = "55P03"
_LOCK = text("SELECT pg_advisory_lock(:namespace, hashtext(:session_id))")
_UNLOCK = text("SELECT pg_advisory_unlock(:namespace, hashtext(:session_id))")
_TIMEOUT = text("SELECT set_config('lock_timeout', :timeout, false)")


class PostgresSessionLocks:
    """``SessionLocks`` every replica on one PostgreSQL database sees.

    Each held or awaited turn takes one connection from a pool of its own (not the
    stores' pool, so waiting turns never starve the stores), of at most
    ``max_connections`` (``database-pool.session-locks``): more turns wait in the process
    for one, up to ``pool_wait_s`` (default ``wait_s``; the service gives a turn's whole
    timeout, the longest a turn ahead holds one), so a burst of sessions never opens
    more connections than PostgreSQL's ``max_connections`` leaves to each replica.
    """

    def __init__(
        self,
        database_url: str,
        wait_s: float,
        *,
        max_connections: int = 30,
        pool_wait_s: float | None = None,
    ) -> None:
        self.wait_s = wait_s
        self.max_connections = max_connections
        self.pool_wait_s = wait_s if pool_wait_s is None else pool_wait_s
        self.engine: Engine = create_engine(
            database_url,
            pool_size=min(8, max_connections),
            max_overflow=max(0, max_connections - 8),
            pool_timeout=max(self.pool_wait_s, 0.001),
            pool_pre_ping=True,
            isolation_level="AUTOCOMMIT",
        )
        if self.engine.dialect.name != "postgresql":
            self.engine.dispose()
            raise ConfigError(
                f"cross-replica session locks need PostgreSQL, not {self.engine.dialect.name}"
            )

    @contextmanager
    def hold(self, session_id: str) -> Iterator[None]:
        """Held while one turn of ``session_id`` runs in any replica."""
        params = {"namespace": LOCK_NAMESPACE, "session_id": session_id}
        try:
            connection = dedicated_connection(self.engine)
        except PoolTimeout as exc:
            raise StoreError(
                f"all {self.max_connections} session-lock connections to PostgreSQL stayed "
                f"busy for {self.pool_wait_s:g} s (more turns at once than "
                "database-pool.session-locks): try again, or raise it within "
                "PostgreSQL's max_connections"
            ) from exc
        try:
            self._lock(connection, params)
            try:
                yield
            finally:
                self._unlock(connection, params)
        finally:
            connection.close()

    def _lock(self, connection: Connection, params: dict[str, object]) -> None:
        try:
            connection.execute(_TIMEOUT, {"timeout": f"{max(1, round(self.wait_s * 1000))}ms"})
            connection.execute(_LOCK, params)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                raise SessionBusyError(str(params["session_id"]), self.wait_s) from exc
            connection.invalidate()
            raise relational_store_error(self.engine, exc) from exc

    @staticmethod
    def _unlock(connection: Connection, params: dict[str, object]) -> None:
        try:
            connection.execute(_UNLOCK, params)
        except DBAPIError:
            # The connection is gone, and with it the lock: PostgreSQL released it.
            connection.invalidate()

    def close(self) -> None:
        self.engine.dispose()
