"""Chunks and their vectors in Milvus (Lite by default, a server or Zilliz by URI).

One collection holds every chunk: a dense vector (``L2`` on unit vectors, so Milvus
returns the squared distance) and, where the server supports it, a BM25 sparse vector
computed by Milvus from the chunk text with the jieba analyzer.

Every call goes through the pymilvus client, except on a Milvus Lite file, where
``_lite.InProcessLite`` (the one gate to Lite's internals) inserts, queries and
searches Lite's engine collection in this process; when the gate is unavailable or a
call through it fails, the client does the same work (slower, same results). A Lite
file's layout is read in process too (``_lite.LiteFile``), so the client, and pymilvus
with it, is only opened by the first call that needs it.
The client's guard (``milvus_client``), the collection's layout (``milvus_schema``) and
the filter expressions (``milvus_filters``) are modules of their own.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import nullcontext
from functools import partial
from typing import Any, TypeVar

import numpy as np

from superbiz._text import segmenter
from superbiz.exceptions import IndexMismatchError, StoreError, first_line
from superbiz.retrieval._lite import InProcessLite, LiteFile
from superbiz.retrieval.milvus_client import (
    LITE_GRPC_OPTIONS,
    SERVER_GRPC_OPTIONS,
    GuardedClient,
    milvus_client_class,
    open_error,
    query_all,
    quiet_lite_logs,
    takes_templates,
    wait_for_indexes,
)
from superbiz.retrieval.milvus_filters import Filter, search_filter
from superbiz.retrieval.milvus_schema import (
    HIT_FIELDS,
    KEY_BYTES,
    chunk_collection,
    chunk_hit,
    chunk_row,
    collection_layout,
    graph_upgrade,
    kept_whole,
    key_too_long,
)
from superbiz.retrieval.records import (
    BM25_ANALYZER,
    DENSE_METRIC,
    ChunkHit,
    ChunkRecord,
    ChunkWords,
)
from superbiz.retrieval.store import Outside
from superbiz.retrieval.visibility import Visibility

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_QUERY_BATCH = 200
#: rows per batch when reading many chunks back (Milvus caps one query at 16,384)
QUERY_BATCH = 4096

#: rows per insert call: bounds the request size and memory of a large document
INSERT_BATCH = 512


class MilvusChunkStore:
    """The ``ChunkStore`` of production: one Milvus collection (see the module docstring)."""

    def __init__(self, uri: str, collection: str, token: str | None = None) -> None:
        self.uri = uri
        self.collection = collection
        local = self._is_lite = "://" not in uri
        if local:
            quiet_lite_logs()
            # Lite's BM25 analyser cuts text with the same jieba: quiet it and give it this
            # user's dictionary cache before Lite loads it (it printed "Building prefix
            # dict …" twice on every command of a fresh install, once as "DEBUG jieba:").
            segmenter()
        #: a Lite file read in process; the client connects at the first call needing it
        self._file = LiteFile.open(uri) if local else None
        try:
            self._client = GuardedClient(
                partial(self._connect, token), uri, lazy=self._file is not None
            )
        except Exception as exc:  # pymilvus raises several unrelated types here
            raise open_error(uri, exc, lite=local) from exc
        self.batch_size = QUERY_BATCH
        self._filter_templates: bool | None = None  # see _templates
        self.has_bm25 = False
        #: whether chunks keep their document's access list (collections built before
        #: superbiz filtered by it do not: see ``search_filter``)
        self.has_access = False
        self.dimension: int | None = None
        self.outdated = False  # built by an older superbiz: another schema or analyzer
        #: what a rebuild would gain (``ChunkStore.upgrade``)
        self.upgrade: str | None = None
        self._local: InProcessLite | bool | None = None  # see _local_collection
        self._analyzer: dict[str, Any] | None = BM25_ANALYZER  # what the self-check uses
        self._key_sizes = KEY_BYTES  # what ``refuses`` checks a document's keys against
        fields = self._fields()
        if fields is not None:
            layout = collection_layout(fields)
            self.dimension, self.has_bm25 = layout.dimension, layout.has_bm25
            self.has_access, self.outdated = layout.has_access, layout.outdated
            self._key_sizes = layout.key_sizes
            if local:
                self.upgrade = graph_upgrade(self._dense_index_type())

    def _connect(self, token: str | None) -> Any:
        """A pymilvus client of this store's Milvus (a Lite file opened here served to it
        first). ``dedicated``: no pooled gRPC channel that a Lite server reopened since, or
        a restarted server, has dropped (``GuardedClient``)."""
        self._hand_file_to_client()
        options = LITE_GRPC_OPTIONS if self._is_lite else SERVER_GRPC_OPTIONS
        return milvus_client_class()(
            uri=self.uri, token=token or "", dedicated=True, grpc_options=options
        )

    def _hand_file_to_client(self) -> None:
        """Serve the Lite file opened here to pymilvus (``LiteFile.serve``); where that fails
        pymilvus opens it anew, and the gate attaches to that database."""
        if self._file is not None and not self._file.serve():
            self._local = None
        self._file = None

    # -- schema ---------------------------------------------------------------
    def _fields(self) -> dict[str, dict[str, Any]] | None:
        """The collection's fields' parameters by name, loaded; None: no collection.
        Read in process from a Lite file; where that fails, through the client."""
        if self._file is not None:
            try:
                return self._file.fields(self.collection)
            except Exception:  # Lite reorganised: its client reads the same file
                log.debug("Milvus Lite's layout not read in process", exc_info=True)
                self._hand_file_to_client()
        if not self._client.has_collection(self.collection):
            return None
        fields = self._client.describe_collection(self.collection)["fields"]
        self._client.load_collection(self.collection)
        return {field["name"]: field.get("params", {}) for field in fields}

    def _dense_index_type(self) -> str | None:
        """The dense field's index type, None where Milvus does not say (advice only)."""
        if self._file is not None:
            return self._file.index_type(self.collection, "dense")
        try:
            described = self._client.describe_index(self.collection, "dense")
        except Exception:  # pymilvus raises several unrelated types here
            return None
        found = described.get("index_type") if isinstance(described, dict) else None
        return found if isinstance(found, str) else None

    def ensure_collection(self, dimension: int) -> None:
        """Create the collection for ``dimension``-d vectors, or check the existing one."""
        if self.dimension is not None:
            if self.outdated:
                raise IndexMismatchError(
                    "the vector index was built by an older superbiz (another schema or BM25 "
                    "analyzer); re-ingest with `superbiz ingest PATH --rebuild`"
                )
            if self.dimension != dimension:
                raise IndexMismatchError(
                    f"the vector index holds {self.dimension}-d vectors but the embedder "
                    f"makes {dimension}-d ones; re-ingest with `superbiz ingest PATH --rebuild`"
                )
            return
        # BM25 with stop words, else BM25 without them, else dense only (Milvus < 2.5).
        for analyzer in (BM25_ANALYZER, {"tokenizer": "jieba"}, None):
            try:
                self._create(dimension, analyzer)
                break
            except Exception as exc:
                if self._client.has_collection(self.collection):
                    self._client.drop_collection(self.collection)
                if analyzer is None:
                    raise StoreError(f"cannot create the collection on {self.uri}: {exc}") from exc
                log.warning(
                    "Milvus at %s rejected the BM25 analyzer %s (%s)", self.uri, analyzer, exc
                )
        if not self.has_bm25:
            log.warning("Milvus at %s has no BM25 full-text search; dense search only", self.uri)
        self.dimension = dimension

    def _create(self, dimension: int, analyzer: dict[str, Any] | None) -> None:
        schema, index = chunk_collection(self._client, dimension, analyzer, lite=self._is_lite)
        self._client.create_collection(self.collection, schema=schema, consistency_level="Strong")
        # Not ``create_collection(index_params=...)``: pymilvus then polls each index's
        # state after sleeping 0.5 s first, 1.5 s for three indexes on an empty
        # collection. Rows are indexed as they come; ``flush`` waits for that.
        self._client.create_index(self.collection, index, sync=False)
        self._client.load_collection(self.collection)
        self.has_bm25 = analyzer is not None
        self.has_access = True
        self._analyzer = analyzer
        self.outdated = False
        self.upgrade = None
        self._key_sizes = KEY_BYTES

    def drop(self) -> None:
        if self._client.has_collection(self.collection):
            self._client.drop_collection(self.collection)
        self._local = None
        self.dimension = None
        self.has_bm25 = False
        self.has_access = False

    # -- writes ---------------------------------------------------------------
    def replace_document(self, doc_path: str, chunks: Sequence[ChunkRecord]) -> None:
        """Delete every chunk of ``doc_path``, then insert ``chunks``."""
        self.delete_documents([doc_path])
        self.insert(chunks)

    def insert(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert ``chunks`` ``INSERT_BATCH`` rows per call.

        On Milvus Lite the rows go straight to the in-process collection: what its gRPC
        handler would do with them once pymilvus had encoded them (about a tenth of an
        ingest's CPU: pymilvus checks every string character by character)."""
        for start in range(0, len(chunks), INSERT_BATCH):
            batch = chunks[start : start + INSERT_BATCH]
            rows = [chunk_row(c, access=self.has_access) for c in batch]
            self._insert_rows(rows)

    def _insert_rows(self, rows: list[dict[str, Any]]) -> None:
        self._in_process(
            lambda local: local.insert(rows), lambda: self._client.insert(self.collection, rows)
        )

    def _in_process(self, direct: Callable[[InProcessLite], _T], public: Callable[[], _T]) -> _T:
        """``direct`` through the gate to Lite where there is one, else ``public``
        through the client. When ``direct`` fails, ``public`` does the same work: if
        it succeeds, Lite's internals have changed and the gate closes (said once); if
        it fails too, its error (a ``StoreError`` naming the store) is the answer."""
        local = self._local_collection()
        if local is None:
            return self._named_errors(public)
        try:
            return direct(local)
        except Exception as exc:
            failure = exc
        result = self._named_errors(public)
        log.warning(
            "Milvus Lite's in-process path failed where its client did not (%s); "
            "using the client only for %s",
            first_line(failure),
            self.uri,
        )
        self._local = False
        return result

    def flush(self, waiting: Outside = nullcontext) -> None:
        """Seal what was written into indexed segments (the wait for the index build runs
        inside ``waiting``: an upload lets go of the store lock there).

        Milvus Lite keeps fresh rows in a memtable that every search scans row by row
        (a BM25 search at dev size took about 190 ms instead of about 5 ms until the
        next process reopened the file); flushing and waiting for Lite's background
        index build makes the first search after an ingest as fast as any other.
        """
        if self.dimension is None:
            return
        self._in_process(lambda local: local.flush(), lambda: self._client.flush(self.collection))
        with waiting():
            self._in_process(
                lambda local: local.wait_for_index_build(),
                partial(wait_for_indexes, self._client, self.collection),
            )

    def delete_documents(self, doc_paths: Sequence[str]) -> None:
        """On Milvus Lite, a few documents' chunks by their ids, read in process: Lite's delete
        by filter walks every row in Python (0.5–1.4 s at 50,000 documents, against 0.02)."""
        if not doc_paths or self.dimension is None:
            return
        if len(doc_paths) <= _QUERY_BATCH and self._local_collection() is not None:
            self.delete_chunks({i for ids in self.chunk_ids(doc_paths).values() for i in ids})
            return
        self._client.delete(
            self.collection,
            **self._filter(Filter("doc_path in {paths}", {"paths": list(doc_paths)})),
        )

    def delete_chunks(self, ids: Collection[str]) -> None:
        """Delete by primary key, ``_QUERY_BATCH`` ids per call."""
        if not ids or self.dimension is None:
            return
        doomed = sorted(ids)
        for start in range(0, len(doomed), _QUERY_BATCH):
            ids = doomed[start : start + _QUERY_BATCH]
            delete = partial(self._client.delete, self.collection, ids=ids)
            self._in_process(partial(InProcessLite.delete, ids=ids), delete)

    # -- reads ----------------------------------------------------------------
    def chunk_ids(self, doc_paths: Sequence[str]) -> dict[str, set[str]]:
        if self.dimension is None:
            return {}
        found: dict[str, set[str]] = defaultdict(set)
        for row in self._rows_of_documents(doc_paths, ["id", "doc_path"]):
            found[row["doc_path"]].add(row["id"])
        return dict(found)

    def index_state(self, doc_paths: Sequence[str] | None) -> dict[str, tuple[int, frozenset[str]]]:
        """doc_path → (chunk count, content hashes seen) for ``doc_paths`` that have chunks
        (None: every document, in one read): what reconciliation compares with the
        relational store."""
        if self.dimension is None:
            return {}
        counts: dict[str, int] = defaultdict(int)
        hashes: dict[str, set[str]] = defaultdict(set)
        fields = ["doc_path", "content_hash"]
        rows = (
            self._rows(Filter('doc_path != ""', {}), fields)
            if doc_paths is None
            else self._rows_of_documents(doc_paths, fields)
        )
        for row in rows:
            counts[row["doc_path"]] += 1
            hashes[row["doc_path"]].add(row["content_hash"])
        return {path: (counts[path], frozenset(hashes[path])) for path in counts}

    def chunks_of(self, doc_path: str) -> list[ChunkHit]:
        return self.chunks_of_documents([doc_path]).get(doc_path, [])

    def chunks_of_documents(
        self, doc_paths: Sequence[str], *, vectors: bool = True
    ) -> dict[str, list[ChunkHit]]:
        """One query for all of ``doc_paths``: in-process on Milvus Lite (2.3 ms for one
        document, 4.1 ms for five, against 10.8 ms each through the client's batched
        iterator), read in batches through the client elsewhere or when one comes back full.
        ``vectors=False`` leaves the vectors out (a tenth of the memory)."""
        if not doc_paths:
            return {}
        query = Filter("doc_path in {paths}", {"paths": list(doc_paths)})
        output = ["id", *HIT_FIELDS, "dense"] if vectors else ["id", *HIT_FIELDS]
        found: dict[str, list[ChunkHit]] = {}
        for row in self._rows(query, output):
            hit = chunk_hit(row, score=float("nan"))
            found.setdefault(hit.doc_path, []).append(hit)
        return {path: sorted(hits, key=lambda h: h.chunk_index) for path, hits in found.items()}

    def refuses(self, doc_path: str, domain: str) -> str | None:
        keys = {"doc_path": doc_path, "domain": domain}
        return key_too_long(self._key_sizes, keys, in_bytes=not self._is_lite)

    def vectors_by_words(self, doc_paths: Sequence[str]) -> dict[ChunkWords, np.ndarray]:
        if self.dimension is None or self.outdated:
            return {}
        fields = ["search_text", "heading", "text", "dense"]
        return {
            ChunkWords(r["search_text"], r["heading"], r["text"]): np.asarray(r["dense"], "<f4")
            for r in self._rows_of_documents(doc_paths, fields)
            if kept_whole(r)
        }

    def _rows_of_documents(
        self, doc_paths: Sequence[str], output: list[str]
    ) -> Iterator[dict[str, Any]]:
        """``_rows`` of ``doc_paths``' chunks, ``_QUERY_BATCH`` documents a query (a filter
        naming them all grows with the KB)."""
        for start in range(0, len(doc_paths), _QUERY_BATCH):
            paths = list(doc_paths[start : start + _QUERY_BATCH])
            yield from self._rows(Filter("doc_path in {paths}", {"paths": paths}), output)

    def _rows(self, query: Filter, output: list[str]) -> list[dict[str, Any]]:
        """Every row matching ``query``: one query in process on Milvus Lite, however many
        rows (the reconciliation of 2,385 documents at the start of an ingest: 0.7 s of
        CPU against 1.6 s through the client's batched iterator; the level calibration's
        8,443 chunks of 2,000 documents with their vectors: 0.2 s against 2.4), read in
        batches through the client elsewhere."""
        return self._in_process(
            lambda local: local.query(query.rendered(), output),
            lambda: list(self._query_all(query, output)),
        )

    def _filter(self, query: Filter) -> dict[str, Any]:
        return query.client_args(templates=self._templates())

    def _templates(self) -> bool:
        """Whether this Milvus takes filter templates, probed once (``takes_templates``)."""
        if self._filter_templates is None:
            self._filter_templates = not self._is_lite and takes_templates(
                self._client, self.collection, self.uri
            )
        return self._filter_templates

    def _query_all(self, query: Filter, output: list[str]) -> Iterator[dict[str, Any]]:
        args = self._filter(query)
        return query_all(self._client, self.collection, args, output, self.batch_size)

    def search_dense(
        self,
        vector: np.ndarray,
        limit: int,
        domain: str | None = None,
        visibility: Visibility | None = None,
    ) -> list[ChunkHit]:
        if self.dimension is None:
            return []
        data = np.asarray(vector, dtype=np.float32).tolist()
        where = search_filter(domain, visibility, has_access=self.has_access)
        return self._search(data, "dense", DENSE_METRIC, limit, where, HIT_FIELDS)

    def search_bm25(
        self,
        text: str,
        limit: int,
        domain: str | None = None,
        visibility: Visibility | None = None,
    ) -> list[ChunkHit]:
        """BM25 hits best first; Milvus Lite returns the scores negated, so the raw
        value's magnitude is the BM25 score either way."""
        if self.dimension is None or not self.has_bm25 or not text.strip():
            return []
        where = search_filter(domain, visibility, has_access=self.has_access)
        return self._search(text, "sparse", "BM25", limit, where, [*HIT_FIELDS, "dense"])

    def _search(
        self,
        data: list[float] | str,
        field: str,
        metric: str,
        limit: int,
        where: Filter | None,
        output: list[str],
    ) -> list[ChunkHit]:

        def public() -> list[dict[str, Any]]:
            result = self._client.search(
                self.collection,
                data=[data],
                anns_field=field,
                limit=limit,
                **(self._filter(where) if where else {}),
                output_fields=output,
                search_params={"metric_type": metric},
            )
            return list(result[0])

        hits = self._in_process(
            lambda local: local.search(
                data, field, metric, limit, where.rendered() if where else None, output
            ),
            public,
        )
        return [chunk_hit(h["entity"], h["id"], float(h["distance"])) for h in hits]

    def _named_errors(self, call: Callable[[], _T]) -> _T:
        """pymilvus raises many types: each becomes a ``StoreError`` naming the store
        (one the client wrapper raised has named it already)."""
        try:
            return call()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"the vector store ({self.uri}) failed: {first_line(exc)}") from exc

    def _local_collection(self) -> InProcessLite | None:
        """The gate to Milvus Lite's in-process collection when this store is a Lite
        file and the gate opens (see ``_lite``), else None: the client does the work."""
        if not self._is_lite or self.dimension is None:
            return None
        if self._local is None:
            gate = InProcessLite.attach(
                self.uri, self.collection, self._analyzer if self.has_bm25 else None
            )
            self._local = gate if gate is not None else False
        return self._local if isinstance(self._local, InProcessLite) else None

    def close(self) -> None:
        self._client.close()
