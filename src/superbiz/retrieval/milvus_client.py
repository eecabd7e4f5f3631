"""The pymilvus client as the vector store holds it: gRPC options that keep a quiet
connection open, and every failure a ``StoreError`` that names the server.

Apart from ``vector_store`` so that the store reads as what it stores and searches, and
this as how it reaches Milvus (reconnecting, reloading a released collection).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from superbiz.exceptions import StoreError, first_line

log = logging.getLogger(__name__)

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


def quiet_lite_logs() -> None:
    """Quiet what Milvus Lite and its client log that is no news to a user."""
    # Milvus Lite serves gRPC in-process and logs every call its pymilvus makes that it
    # does not implement (harmless probes) as an error.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    # Lite logs its own traceback before pymilvus raises; the store's error says it.
    logging.getLogger("milvus_lite.server_manager").setLevel(logging.CRITICAL)
    # Lite has no iterator sessions; pymilvus warns and uses its own timestamp.
    logging.getLogger("pymilvus.client.iterator.query_iterator").setLevel(logging.ERROR)


def open_error(uri: str, exc: Exception, *, lite: bool) -> StoreError:
    """What a store that could not open ``uri`` says (``exc``: what pymilvus raised)."""
    if lite:
        return StoreError(
            f"cannot open Milvus Lite at {uri}: another process is probably using it "
            "(Milvus Lite allows one process per file; stop the other one, or set "
            f"vector.uri to a Milvus server); Milvus Lite said: {first_line(exc)}"
        )
    return StoreError(f"vector store: cannot open Milvus at {uri}: {exc}")


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

    def __init__(self, connect: Callable[[], Any], uri: str, *, lazy: bool = False) -> None:
        """``lazy``: connect at the first call (a Lite file read in process may need
        none: pymilvus is not even imported), else now."""
        self._connect = connect
        self._uri = uri
        self._connecting = threading.Lock()
        self._client: Any = None if lazy else connect()

    def close(self) -> None:
        """Close the connection, if one is open."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _connected(self) -> Any:
        with self._connecting:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            from pymilvus.client.types import Status
            from pymilvus.exceptions import MilvusException

            client = None
            try:
                client = self._connected()
                try:
                    return getattr(client, name)(*args, **kwargs)
                except MilvusException as exc:
                    if exc.code != _NOT_LOADED or not args:
                        raise
                    client.load_collection(args[0])
                    return getattr(client, name)(*args, **kwargs)
            except MilvusException as exc:
                if exc.code == Status.CONNECT_FAILED and client is not None:
                    if self._client is client:
                        self._client = None
                    client.close()
                raise StoreError(f"vector store (Milvus at {self._uri}): {exc.message}") from exc

        return call


def takes_templates(client: GuardedClient, collection: str, uri: str) -> bool:
    """Whether the Milvus server behind ``client`` takes filter templates: Milvus ≥ 2.5
    does, Lite 3.x and its ``milvus-lite server`` do not (``unexpected character '{'``)."""
    quiet = logging.getLogger("pymilvus.decorators")
    level, quiet.level = quiet.level, logging.CRITICAL  # an expected refusal
    try:
        client.query(
            collection,
            filter="doc_path == {path}",
            filter_params={"path": ""},
            output_fields=["id"],
            limit=1,
        )
        return True
    except StoreError as exc:
        log.info("Milvus at %s has no filter templates (%s): literals", uri, exc)
        return False
    finally:
        quiet.level = level


def query_all(
    client: GuardedClient, collection: str, args: dict[str, Any], output: list[str], batch: int
) -> Iterator[dict[str, Any]]:
    """Every row matching the filter ``args`` (``Filter.client_args``), read ``batch`` rows
    at a time: one query returns at most 16,384 rows, and a large document has more
    chunks than that."""
    args = dict(args)
    if "filter_params" in args:  # the iterator hands its options to each query call
        args["expr_params"] = args.pop("filter_params")
    batches = client.query_iterator(collection, batch_size=batch, output_fields=output, **args)
    try:
        while rows := batches.next():
            yield from rows
    finally:
        batches.close()


def wait_for_indexes(client: GuardedClient, collection: str, timeout_s: float = 60.0) -> None:
    """Wait until a server has indexed every flushed row of ``collection``: a search right
    after an ingest sees it indexed, and a server stopped then holds no half-written
    index."""
    deadline = time.monotonic() + timeout_s
    for name in client.list_indexes(collection):
        while time.monotonic() < deadline:
            state = client.describe_index(collection, name)
            if not state or not state.get("pending_index_rows"):
                break
            time.sleep(0.05)
