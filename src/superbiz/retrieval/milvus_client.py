"""The pymilvus client as the vector store holds it: gRPC options that keep a quiet
connection open, and every failure a ``StoreError`` that names the server.

Apart from ``vector_store`` so that the store reads as what it stores and searches, and
this as how it reaches Milvus (reconnecting, reloading a released collection).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from superbiz.exceptions import StoreError

#: gRPC channel options for Milvus Lite, the in-process server: no keepalive pings. The
#: client's default (a ping every 10 s, idle too) breaks the server's ping policy while a
#: turn waits for a slow model: after about two minutes it answers GOAWAY
#: ENHANCE_YOUR_CALM "too_many_pings", which gRPC prints to the terminal. A loopback
#: connection in the same process has nothing to keep alive.
LITE_GRPC_OPTIONS: dict[str, Any] = {
    "grpc.keepalive_time_ms": 2**31 - 1,  # gRPC's "never"
    "grpc.keepalive_permit_without_calls": 0,
}
#: gRPC channel options for a Milvus server: no keepalive pings while no call is under
#: way, and one per ten minutes during a call. The client's default (a ping every 10 s,
#: idle too) is more than a gRPC server's default ping policy allows (one per five
#: minutes without data): ``milvus-lite server`` answered GOAWAY "too_many_pings" after
#: 30 s of an ingest's embedding, printed on the terminal. A connection that died while
#: idle is found at the next call, which opens a new one (``_GuardedClient``).
SERVER_GRPC_OPTIONS: dict[str, Any] = {
    "grpc.keepalive_time_ms": 600_000,
    "grpc.keepalive_permit_without_calls": 0,
}


def milvus_client_class() -> Any:
    """pymilvus' ``MilvusClient``, imported with the level the application gave the
    ``pymilvus`` logger kept: pymilvus sets that logger to WARNING with a handler of its
    own when it is first imported, which is after the CLI set it to ERROR (the store
    imports it lazily), so "failed to get mvccTs …" printed on every query of a
    ``milvus-lite server`` (hundreds of lines in ``eval scale --profile server``)."""
    chosen = logging.getLogger("pymilvus").level
    from pymilvus import MilvusClient

    if chosen:
        logging.getLogger("pymilvus").setLevel(chosen)
    return MilvusClient


#: Milvus' ErrCollectionNotLoaded: a restarted server may hold the collection released
_NOT_LOADED = 101


class GuardedClient:
    """The pymilvus client with every failure turned into a ``StoreError`` that names the
    server, so that a Milvus server that is down answers 503 with the store named (see
    ``superbiz.api.errors``) and the first call after it is back works: a lost connection
    is dropped and the next call opens a new one (pymilvus' own recovery gives up on the
    channel of a restarted server), and a collection found released is loaded again."""

    def __init__(self, connect: Callable[[], Any], uri: str) -> None:
        self._connect = connect
        self._uri = uri
        self._client: Any = connect()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            from pymilvus.client.types import Status
            from pymilvus.exceptions import MilvusException

            try:
                if self._client is None:
                    self._client = self._connect()
                try:
                    return getattr(self._client, name)(*args, **kwargs)
                except MilvusException as exc:
                    if exc.code != _NOT_LOADED or not args:
                        raise
                    self._client.load_collection(args[0])
                    return getattr(self._client, name)(*args, **kwargs)
            except MilvusException as exc:
                if exc.code == Status.CONNECT_FAILED and self._client is not None:
                    self._client, lost = None, self._client
                    lost.close()
                raise StoreError(f"vector store (Milvus at {self._uri}): {exc.message}") from exc

        return call
