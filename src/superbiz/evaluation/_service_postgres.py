"""The PostgreSQL connections a service benchmark opens: the most seen in
``pg_stat_activity`` while it runs, against ``max_connections``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

#: connections to this database, not counting the sampler's own; narrowed to the
#: deployment's when its URL names an ``application_name`` (replicas share the URL)
_CONNECTIONS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (current_setting('application_name') = ''
       OR application_name = current_setting('application_name'))
"""


class ConnectionPeak:
    """The most PostgreSQL connections seen while the benchmark runs (a context manager):
    ``pg_stat_activity`` read every ``interval_s`` on one connection of its own."""

    def __init__(self, database_url: str, interval_s: float = 0.05) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self.engine = create_engine(database_url, poolclass=NullPool)
        self.interval_s = interval_s
        self.peak = 0
        self.samples = 0
        self.max_connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="pg-connections", daemon=True)

    def __enter__(self) -> ConnectionPeak:
        from sqlalchemy import text

        self._connection = self.engine.connect()
        shown = self._connection.execute(text("SHOW max_connections")).scalar()
        self.max_connections = int(shown or 0)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._connection.close()
        self.engine.dispose()

    def _sample(self) -> None:
        from sqlalchemy import text

        query = text(_CONNECTIONS)
        while not self._stop.is_set():
            count = int(self._connection.execute(query).scalar() or 0)
            self._connection.rollback()  # a fresh snapshot of the activity view each time
            self.peak = max(self.peak, count)
            self.samples += 1
            self._stop.wait(self.interval_s)

    def as_dict(self) -> dict[str, int]:
        return {
            "peak_connections": self.peak,
            "max_connections": self.max_connections,
            "samples": self.samples,
        }


@contextlib.contextmanager
def connection_peak(database_url: str) -> Iterator[ConnectionPeak | None]:
    """A ``ConnectionPeak`` on PostgreSQL; ``None`` on any other database."""
    if not database_url.startswith("postgresql"):
        yield None
        return
    with ConnectionPeak(database_url) as peak:
        yield peak
