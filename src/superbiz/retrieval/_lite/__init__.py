"""The one gate to Milvus Lite's internals: its engine collection, reached in process.

Milvus Lite 3.x is a pure-Python engine that pymilvus reaches over loopback gRPC.
Every use of its internals is in this package, behind ``InProcessLite`` (the only name
anything outside imports: an import-linter contract protects the modules);
``MilvusChunkStore`` asks the gate and, when the gate is unavailable or one of its calls
fails, goes through the public pymilvus client instead, so a change in Lite costs
speed, never results:

* inserting, querying and searching the engine collection directly skips pymilvus'
  encoding and the gRPC round trip (about a tenth of an ingest's CPU; about 3 ms per
  dense and 12 ms per BM25 search at dev size);
* fresh rows sit in a memtable that every search scans row by row until a flush and
  Lite's background index build seal them (``wait_for_index_build``);
* Lite scores BM25 one posting at a time in Python (about 2.5 ms per query on the
  dev set); each segment's scorer is swapped for ``VectorizedBm25``, the same formula
  over numpy arrays (about 0.2 ms);
* Lite analyses every inserted text with jieba, in Python (2–4 ms per chunk, a fifth
  of an ingest's CPU); ``cache_analysis`` makes one analyzer remember the term ids of
  each block jieba cuts on its own, so a repeated word or phrase is analysed once;
* Lite's insert checks every element of every vector in Python and builds its
  write-ahead batch value by value; ``insert_columns`` takes Lite's own steps with the
  vectors as one float32 array (``insert_check`` compares the batches first);
* Lite's flush turns its memtable into a table value by value (``as_py``: 512
  Python floats per vector), which was most of the +200 MB peak of a 6 MB ingest;
  ``columnar_flush`` makes one memtable build the same table with Arrow's ``take``.
* every Lite search walks every row of every segment in Python to find the rows it may
  return (the newest version of each primary key, not deleted): at 2,385 documents
  (10,390 chunks) two thirds of a lookup's time, growing with the chunks. ``LiveRows``
  keeps those rows as one boolean mask per segment, computed once per change of the
  collection (a write, a flush, a compaction), and ``search_dense``/``search_bm25`` run
  Lite's own indexes, filters and merge with it. Lite's queries walk the same rows, and
  read each returned row value by value; ``query_live`` reads the live rows a column at
  a time (an ingest's comparison of the index with 11,925 documents: 17.5 → 3.5 s).
* Lite's compaction copies the rows it merges (up to 200,000) three times over before
  writing them, the peak of a large ingest; ``lean_compaction`` makes a writer's
  collection copy one output segment at a time (``compaction_check`` compares the
  files it leaves with Lite's own first).

Patches go on this store's own objects (its collection's analyzers, memtables,
segments and write entry point), never on Lite's classes: an application that embeds
superbiz and uses Milvus Lite itself is unaffected. When a store opens, ``self_check``
scores a tiny segment both ways (``VectorizedBm25`` and Lite's own BM25) and analyses
sample texts both ways (block cache and Lite's own jieba analysis); if either differs,
for example after a Lite upgrade, the store uses the public client only and says so
once. ``search_check`` builds a small Lite collection with every case the live-row masks
must get right (versions across segments and the memtable, deletes flushed and pending,
a filter, ties) and compares ``search_dense``/``search_bm25``/``query_live`` with Lite's
own searches and queries after each change; if they differ, searches and queries go
through Lite's own code (said once). A check that passed is not run again by a later
process of the same installation (a marker per check in the user's cache folder).
The checks were written for Lite ``LITE_SERIES`` (pinned in pyproject.toml).

The modules: ``ingest`` (analysis cache, columnar flush), ``insert``
(``insert_columns`` and its check), ``bm25`` (``VectorizedBm25``),
``live_rows`` (``LiveRows``), ``search`` (the live-row searches and query), ``compaction``
(the lean compaction and its check) and ``checks`` (the two self-checks that guard the
rest); this module is the gate that installs them.
"""

from __future__ import annotations

import logging
from typing import Any

from superbiz.retrieval._lite.bm25 import accelerate_bm25
from superbiz.retrieval._lite.checks import search_check, self_check
from superbiz.retrieval._lite.compaction import lean_compaction
from superbiz.retrieval._lite.database import LiteFile, open_database
from superbiz.retrieval._lite.ingest import analyzers, cache_analysis, columnar_flush
from superbiz.retrieval._lite.insert import as_lists, insert_check, insert_columns
from superbiz.retrieval._lite.live_rows import LiveRows
from superbiz.retrieval._lite.search import (
    collection_search,
    query_live,
    search_bm25,
    search_dense,
)

__all__ = ["InProcessLite", "LiteFile"]

log = logging.getLogger(__name__)


class InProcessLite:
    """Milvus Lite's engine collection for one store file, with this store's own
    accelerations installed on it; ``attach`` returns None where the public client
    must be used instead (not a Lite file, another layout, or the self-check failed)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._live: LiveRows | bool | None = None  # decided at the first search
        self._compaction_set = False  # at the first insert

    @property
    def live(self) -> LiveRows | None:
        """The rows searches may return, kept per change (``LiveRows``), or None where
        ``search_check`` failed: Lite's own searches. Checked at the first search or
        query (about 1 s), so a process that does neither never pays the check."""
        if self._live is None:
            self._live = LiveRows.of(self.collection) if search_check() is None else False
        return self._live if isinstance(self._live, LiveRows) else None

    @classmethod
    def attach(cls, uri: str, name: str, analyzer: dict[str, Any] | None) -> InProcessLite | None:
        collection = local_collection(uri, name)
        if collection is None:
            return None
        problem = self_check(analyzer)
        if problem is not None:
            return None
        gate = cls(collection)
        try:
            for each in analyzers(collection):
                cache_analysis(each)
        except Exception:  # Lite reorganised: its own analysis still works
            log.debug("Milvus Lite analysis cache unavailable", exc_info=True)
        return gate

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """What Lite's gRPC handler does with ``rows`` once pymilvus has encoded them,
        their vectors kept as arrays where ``insert_check`` agrees (``insert_columns``).
        The first insert makes the collection's compactions lean (``lean_compaction``:
        only a writer's flushes compact)."""
        if not self._compaction_set:
            lean_compaction(self.collection)
            self._compaction_set = True
        columnar_flush(self.collection._memtable)
        if insert_check() is not None or insert_columns(self.collection, rows) is None:
            self.collection.insert(as_lists(rows))

    def delete(self, ids: list[str]) -> None:
        """Delete the rows of ``ids``, as Lite's gRPC handler does for a delete by ids."""
        self.collection.delete(ids)

    def flush(self) -> None:
        """Seal the memtable into a segment, as Lite's gRPC handler does for a flush."""
        self.collection.flush()

    def query(
        self, expr: str, output_fields: list[str], limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The rows matching ``expr`` (up to ``limit``; None: all), as Lite's query
        returns them."""
        if self.live is not None:
            return query_live(self.live, expr, output_fields, limit)
        return list(self.collection.query(expr=expr, output_fields=output_fields, limit=limit))

    def search(
        self,
        data: list[float] | str,
        field: str,
        metric: str,
        limit: int,
        expr: str | None,
        output_fields: list[str],
    ) -> list[dict[str, Any]]:
        """The hits of one query, each ``{"id", "distance", "entity"}`` as the client's
        (a stored vector may be a float32 array rather than a list)."""
        if metric == "BM25":
            accelerate_bm25(self.collection, field)
        if self.live is not None:
            search = search_bm25 if metric == "BM25" else search_dense
            return search(
                self.live, data, field, metric, limit, expr, output_fields, vector_arrays=True
            )
        return collection_search(self.collection, data, field, metric, limit, expr, output_fields)

    def wait_for_index_build(self) -> None:
        wait_for_index_build(self.collection)


def local_collection(uri: str, collection: str) -> Any | None:
    """Lite's collection object for the file ``uri``, or None when unavailable."""
    try:
        database = open_database(uri)
        return database.get_collection(collection) if database is not None else None
    except Exception:  # Lite's layout changed: the client path still works
        log.debug("Milvus Lite in-process search unavailable", exc_info=True)
        return None


def wait_for_index_build(collection: Any) -> None:
    """Block until Lite's background compaction and index build are done."""
    try:
        collection._wait_for_bg()
    except Exception:  # only speed is at stake: searches work on any segment
        log.debug("waiting for Milvus Lite's index build failed", exc_info=True)
