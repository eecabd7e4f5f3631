"""A Milvus Lite file's database opened in this process, its gRPC server started only when
the public client needs one.

pymilvus opens a ``.db`` file by starting Lite's gRPC server over it
(``milvus_lite.server_manager_instance``) and connecting to that: importing the client
and the server's protocol buffers (pymilvus, pandas) took 0.45 s of every command, which
then read and searched the file through this gate anyway. ``open_database`` opens the
database without them; ``serve_database`` starts the server over that very database and
registers it where pymilvus looks, as pymilvus' own start would have, the first time a
write or a fallback needs the client. Where either step fails (Lite reorganised, or
another process holds the file), nothing is registered and the client opens the file as
before, with its own error.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

log = logging.getLogger(__name__)

#: databases opened here and not yet served, by absolute path
_OPENED: dict[str, Any] = {}
_LOCK = threading.Lock()


def open_database(uri: str) -> Any | None:
    """Lite's database for the file ``uri``: the one a server in this process holds, else
    one opened here (kept for the process); None where Lite cannot open it so."""
    path = os.path.abspath(uri)
    try:
        from milvus_lite import server_manager_instance
        from milvus_lite.db import MilvusLite

        with _LOCK:
            served = server_manager_instance._servers.get(path)
            if served is not None:
                return served[1]
            if path not in _OPENED:
                _OPENED[path] = MilvusLite(path)
            return _OPENED[path]
    except Exception:  # locked by another process, or Lite reorganised: the client says
        log.debug("Milvus Lite file %s not opened in process", uri, exc_info=True)
        return None


def serve_database(uri: str) -> bool:
    """Start Lite's gRPC server over the database ``open_database`` opened for ``uri``
    and register it as pymilvus' start would (nothing to do when none is open here).
    False where that failed: the database was closed, pymilvus opens the file itself,
    and what was read from the closed one must be read again."""
    path = os.path.abspath(uri)
    with _LOCK:
        database = _OPENED.pop(path, None)
        if database is None:
            return True
        try:
            from milvus_lite import server_manager_instance
            from milvus_lite.adapter.grpc.server import DEFAULT_MAX_WORKERS, _build_server

            server = _build_server(database, DEFAULT_MAX_WORKERS)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            with server_manager_instance._lock:
                server_manager_instance._servers[path] = (server, database, port)
            return True
        except Exception:
            log.debug("Milvus Lite server not started over %s", uri, exc_info=True)
            database.close()
            return False


@atexit.register
def _close_all() -> None:
    """Close what was opened and never served (a served one is closed by Lite's own
    manager at exit), so that the next process finds the file as Lite leaves it."""
    with _LOCK:
        opened = list(_OPENED.values())
        _OPENED.clear()
    for database in opened:
        try:
            database.close()
        except Exception:  # at exit: nothing left to tell
            log.debug("closing a Milvus Lite file failed", exc_info=True)


class LiteFile:
    """A Lite file's database as the store reads it before any client is open: whether
    it holds a collection, the collection's fields and dense index, the collection
    loaded for searching (what pymilvus' ``has_collection``, ``describe_collection``,
    ``describe_index`` and ``load_collection`` ask the server for)."""

    def __init__(self, uri: str, database: Any) -> None:
        self.uri = uri
        self._database = database

    @classmethod
    def open(cls, uri: str) -> LiteFile | None:
        database = open_database(uri)
        return cls(uri, database) if database is not None else None

    def fields(self, collection: str) -> dict[str, dict[str, Any]] | None:
        """Each field's parameters (``dim``, ``max_length``) by name, with the collection
        loaded; None where the file has no such collection."""
        if not self._database.has_collection(collection):
            return None
        found = self._database.get_collection(collection)
        if found.load_state != "loaded":
            found.load()
        described = found.describe()["schema"]["fields"]
        return {
            field["name"]: {key: field[key] for key in ("dim", "max_length") if field.get(key)}
            for field in described
        }

    def index_type(self, collection: str, field: str) -> str | None:
        """The type of ``field``'s index (``HNSW_SQ``), None where Lite does not say."""
        try:
            info = self._database.get_collection(collection).get_index_info(field)
        except Exception:  # advice only (``graph_upgrade``)
            return None
        found = info.get("index_type") if isinstance(info, dict) else None
        return found if isinstance(found, str) else None

    def serve(self) -> bool:
        """``serve_database`` for this file."""
        return serve_database(self.uri)
