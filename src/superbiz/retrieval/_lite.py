"""The one gate to Milvus Lite's internals: its engine collection, reached in process.

Milvus Lite 3.x is a pure-Python engine that pymilvus reaches over loopback gRPC.
Every use of its internals is here, in ``InProcessLite``; ``MilvusChunkStore`` asks
the gate and, when the gate is unavailable or one of its calls fails, goes through
the public pymilvus client instead, so a change in Lite costs speed, never results:

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
* Lite's flush turns its memtable into a table value by value (``as_py``: 512
  Python floats per vector), which was most of the +200 MB peak of a 6 MB ingest;
  ``columnar_flush`` makes one memtable build the same table with Arrow's ``take``.
* every Lite search walks every row of every segment in Python to find the rows it may
  return (the newest version of each primary key, not deleted): at 2,385 documents
  (10,390 chunks) two thirds of a lookup's time, growing with the chunks. ``LiveRows``
  keeps those rows as one boolean mask per segment, computed once per change of the
  collection (a write, a flush, a compaction), and ``search_dense``/``search_bm25`` run
  Lite's own indexes, filters and merge with it.

Patches go on this store's own objects (its collection's analyzers, memtables,
segments and write entry point), never on Lite's classes: an application that embeds
superbiz and uses Milvus Lite itself is unaffected. When a store opens, ``self_check``
scores a tiny segment both ways (``VectorizedBm25`` and Lite's own BM25) and analyses
sample texts both ways (block cache and Lite's own jieba analysis); if either differs,
for example after a Lite upgrade, the store uses the public client only and says so
once. ``search_check`` builds a small Lite collection with every case the live-row masks
must get right (versions across segments and the memtable, deletes flushed and pending,
a filter, ties) and compares ``search_dense``/``search_bm25`` with Lite's own searches
after each change; if they differ, searches go through Lite's own code (said once).
The checks were written for Lite ``LITE_SERIES`` (pinned in pyproject.toml).
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, KeysView
from itertools import chain
from typing import Any, ClassVar

import numpy as np

log = logging.getLogger(__name__)

try:
    from milvus_lite.index.sparse_inverted import SparseInvertedIndex
except ImportError:  # Lite not installed, or reorganised: nothing to accelerate
    SparseInvertedIndex = None

#: the Milvus Lite minor version the self-check and the patches were written for
LITE_SERIES = "3.2"
#: jieba blocks whose term ids one analyzer remembers (a few MB); emptied when full
ANALYSIS_CACHE_SIZE = 50_000

#: texts the self-check analyses and scores: CJK, Latin, digits, symbols, repeats
CHECK_TEXTS = (
    "## TiKV 如何扩容？是否需要重启，the Region 的 leader 吗",
    "Payment gateway timeout: check the Redis pool (redis-cli info clients); 连接池耗尽时重试。",
    "支付回调超时 支付回调超时 payment-gateway v1.2.3 50% C++ C# a&b 3.14 -- ``` **bold**",
    "Redis 连接池耗尽 redis pool exhausted, 连接池 连接池 重试 retry",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　中文　全角 émigré naïve 🙂 \t\n\n",
    "",
)
CHECK_QUERIES = ("Redis 连接池 耗尽", "支付回调超时 payment", "TiKV 扩容 leader", "无关 words")

#: self-check verdicts by analyzer parameters (None: agreed; else what differed)
_verdicts: dict[str, str | None] = {}
#: the search check's verdict, once per process (None: not run yet)
_search_verdict: list[str | None] = []


class InProcessLite:
    """Milvus Lite's engine collection for one store file, with this store's own
    accelerations installed on it; ``attach`` returns None where the public client
    must be used instead (not a Lite file, another layout, or the self-check failed)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._live: LiveRows | bool | None = None  # decided at the first search

    @property
    def live(self) -> LiveRows | None:
        """The rows searches may return, kept per change (``LiveRows``), or None where
        ``search_check`` failed: Lite's own searches. Checked at the first search, so a
        process that never searches never pays the check."""
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
            for each in _analyzers(collection):
                cache_analysis(each)
        except Exception:  # Lite reorganised: its own analysis still works
            log.debug("Milvus Lite analysis cache unavailable", exc_info=True)
        return gate

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """What Lite's gRPC handler does with ``rows`` once pymilvus has encoded them."""
        columnar_flush(self.collection._memtable)
        self.collection.insert(rows)

    def query(self, expr: str, output_fields: list[str], limit: int) -> list[dict[str, Any]]:
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
        """The hits of one query, each ``{"id", "distance", "entity"}`` as the client's."""
        if metric == "BM25":
            accelerate_bm25(self.collection, field)
        if self.live is not None:
            search = search_bm25 if metric == "BM25" else search_dense
            return search(self.live, data, field, metric, limit, expr, output_fields)
        result = self.collection.search(
            [data],
            top_k=limit,
            metric_type=metric,
            output_fields=output_fields,
            anns_field=field,
            expr=expr,
        )
        return list(result[0])

    def wait_for_index_build(self) -> None:
        wait_for_index_build(self.collection)


def local_collection(uri: str, collection: str) -> Any | None:
    """Lite's collection object for the file ``uri``, or None when unavailable."""
    try:
        from milvus_lite import server_manager_instance

        entry = server_manager_instance._servers.get(os.path.abspath(uri))
        return entry[1].get_collection(collection) if entry else None
    except Exception:  # Lite's layout changed: the client path still works
        log.debug("Milvus Lite in-process search unavailable", exc_info=True)
        return None


def wait_for_index_build(collection: Any) -> None:
    """Block until Lite's background compaction and index build are done."""
    try:
        collection._wait_for_bg()
    except Exception:  # only speed is at stake: searches work on any segment
        log.debug("waiting for Milvus Lite's index build failed", exc_info=True)


def self_check(analyzer: dict[str, Any] | None) -> str | None:
    """None when this Lite scores and analyses as the accelerations assume, else what
    differed (logged once per process and analyzer). Run once per analyzer: a store
    that opens again reuses the verdict."""
    key = repr(analyzer)
    if key not in _verdicts:
        try:
            problem = _disagreement(analyzer)
        except Exception as exc:  # Lite reorganised: its public path still works
            problem = f"the self-check could not run ({type(exc).__name__}: {exc})"
        _verdicts[key] = problem
        if problem is not None:
            log.warning(
                "Milvus Lite %s differs from what superbiz expects (written for %s.x): %s; "
                "using the pymilvus client only (slower, same results)",
                _lite_version(),
                LITE_SERIES,
                problem,
            )
    return _verdicts[key]


def _lite_version() -> str:
    try:
        from importlib.metadata import version

        return version("milvus-lite")
    except Exception:
        return "(unknown version)"


def _disagreement(params: dict[str, Any] | None) -> str | None:
    if SparseInvertedIndex is None:
        return "no SparseInvertedIndex in milvus_lite.index.sparse_inverted"
    from milvus_lite.analyzer.factory import create_analyzer

    plain, cached = create_analyzer(params), create_analyzer(params)
    cache_analysis(cached)
    for text in (*CHECK_TEXTS, *CHECK_TEXTS, " ".join(CHECK_TEXTS)):  # twice: the cache
        if cached.analyze(text) != plain.analyze(text):
            return f"jieba block cache gives other term ids for {text[:40]!r}"
    corpus = [{int(t): float(n) for t, n in Counter(plain.analyze(t)).items()} for t in CHECK_TEXTS]
    queries = [{int(t): 1.0 for t in plain.analyze(q)} for q in CHECK_QUERIES]
    lite = SparseInvertedIndex()
    lite.build(corpus)
    fast = VectorizedBm25.from_index(lite)
    for valid in (None, np.array([i % 2 == 0 for i in range(len(corpus))])):
        lite_ids, lite_distances = lite.search(queries, len(corpus), valid_mask=valid)
        fast_ids, fast_distances = fast.search(queries, len(corpus), valid_mask=valid)
        if not np.allclose(fast_distances, lite_distances, rtol=1e-6) or not np.array_equal(
            _by_id(fast_ids, fast_distances), _by_id(lite_ids, lite_distances)
        ):
            return "VectorizedBm25 scores a test segment otherwise than Lite's BM25"
    return None


def _by_id(ids: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """Each query's (id, rounded distance) pairs in id order: ties may come in any order."""
    rows = []
    for row_ids, row_distances in zip(ids.tolist(), distances.tolist(), strict=True):
        rows.append(sorted(zip(row_ids, np.round(row_distances, 5).tolist(), strict=True)))
    return np.asarray(rows, dtype=np.float64)


def _analyzers(collection: Any) -> list[Any]:
    """The analyzers ``collection`` runs at ingest (its BM25 function) and at query time."""
    found = list(collection._bm25_analyzers.values())
    chain = collection._ingestion_chain
    for operator in chain.operators if chain is not None else []:
        analyzer = getattr(getattr(operator, "_expr", None), "_analyzer", None)
        if analyzer is not None:
            found.append(analyzer)
    return found


def cache_analysis(analyzer: Any) -> None:
    """Make one Lite jieba analyzer analyse a text a block at a time through a cache of
    each block's term ids.

    jieba cuts a text at its regular expression ``re_han_default`` (runs of CJK,
    Latin letters, digits and ``+#&._%-``, and what lies between them) and segments
    each block on its own; Lite's analyzer then strips, lowercases, drops stop words
    and hashes token by token. So a text's ids are its blocks' ids in order, and a
    block seen before costs a dictionary lookup. Other analyzers are left alone.
    """
    if type(analyzer).__name__ != "JiebaAnalyzer" or "analyze" in vars(analyzer):
        return
    import jieba

    split = jieba.re_han_default.split
    analyze_text: Callable[[str], list[int]] = analyzer.analyze  # Lite's own, bound
    cache: dict[str, list[int]] = {}

    def analyze(text: str) -> list[int]:
        ids: list[int] = []
        for block in split(text):
            if not block:
                continue
            found = cache.get(block)
            if found is None:
                if len(cache) >= ANALYSIS_CACHE_SIZE:
                    cache.clear()
                found = cache[block] = analyze_text(block)
            ids += found
        return ids

    analyzer.analyze = analyze


def columnar_flush(memtable: Any) -> None:
    """Make one Lite memtable build its flushed table column by column in Arrow.

    ``MemTable._build_data_table(rows)`` gathers the live ``(batch, row)`` pairs in
    their order into a table of the data schema. The record batches already hold
    those columns with those types, so Arrow's ``take`` over them gives the same
    table without a Python object per value. Anything unexpected (another layout,
    another schema) falls back to Lite's own code.
    """
    if "_build_data_table" in vars(memtable):
        return
    build_by_value = memtable._build_data_table  # Lite's own, bound

    def build(rows: list[tuple[int, int]]) -> Any:
        try:
            table = _taken_rows(memtable, rows)
        except Exception:  # Lite reorganised: its own way still works
            log.debug("Milvus Lite columnar flush unavailable", exc_info=True)
            table = None
        return build_by_value(rows) if table is None else table

    memtable._build_data_table = build


def _taken_rows(memtable: Any, rows: list[tuple[int, int]]) -> Any | None:
    """The data-schema table of ``rows`` taken from ``memtable``'s batches, or None."""
    import pyarrow as pa  # type: ignore[import-untyped]

    schema = memtable._data_schema
    if not rows:
        return None
    batches, starts, total = [], {}, 0
    for index in sorted({batch for batch, _ in rows}):
        batch = memtable._insert_batches[index].select(schema.names)
        starts[index] = total
        total += batch.num_rows
        batches.append(batch)
    if any(batch.schema.types != schema.types for batch in batches):
        return None
    positions = np.fromiter((starts[batch] + row for batch, row in rows), np.int64, len(rows))
    table = pa.Table.from_batches(batches)
    if len(positions) != total or np.any(positions != np.arange(total)):
        table = table.take(pa.array(positions))  # some rows replaced or deleted: a copy
    # else every row of the batches, in order: the batches' own buffers, no copy
    return pa.Table.from_arrays(table.columns, schema=schema)


def accelerate_bm25(collection: Any, field: str) -> None:
    """Give every segment of ``collection`` a vectorised scorer for ``field``.

    Lite builds a segment's scorer lazily at its first search and again after a
    compaction, so this runs before each search; it costs a loop over the segments.
    """
    if SparseInvertedIndex is None:
        return
    try:
        for segment in collection._segments_snapshot():
            index = segment.sparse_indexes.get(field)
            if type(index) is SparseInvertedIndex:
                segment.sparse_indexes[field] = VectorizedBm25.from_index(index)
    except Exception:
        log.debug("Milvus Lite BM25 acceleration unavailable", exc_info=True)


class _Writes:
    """One collection's writes begun and done: Lite's ``_apply``, the entry point of
    every insert and delete, counted on this collection only."""

    def __init__(self, collection: Any) -> None:
        self._lock = threading.Lock()
        self._begun = self._done = 0
        apply = collection._apply  # Lite's own, bound

        def counted(op: Any) -> Any:
            with self._lock:
                self._begun += 1
            try:
                return apply(op)
            finally:
                with self._lock:
                    self._done += 1

        collection._apply = counted

    def settled(self) -> int | None:
        """The writes done, or None while one is under way."""
        with self._lock:
            return self._done if self._begun == self._done else None


class LiveRows:
    """The rows of one Lite collection a search may return, kept until it changes.

    Lite decides in every search, row by row in Python, which rows count: the newest
    version of each primary key across segments and memtable, not shadowed by a later
    delete (flushed, or pending in the memtable). Those rows change only when the
    collection does, so a ``_View`` holds them as read-only masks per segment, built with
    set operations over Lite's own per-segment key maps, and is reused until a write
    (counted at Lite's ``_apply``), a flush or a compaction (other segments, another
    memtable, another tombstone count). ``views`` counts the views built."""

    _of: ClassVar[weakref.WeakKeyDictionary[Any, LiveRows]] = weakref.WeakKeyDictionary()
    _of_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._writes = _Writes(collection)
        self._view: _View | None = None
        self.views = 0

    @classmethod
    def of(cls, collection: Any) -> LiveRows:
        """The one ``LiveRows`` of ``collection`` (stores of one file share it)."""
        with cls._of_lock:
            live = cls._of.get(collection)
            if live is None:
                live = cls._of[collection] = cls(collection)
            return live

    def view(self) -> _View:
        collection = self.collection
        done = self._writes.settled()
        view = self._view
        if view is not None and done == view.done:
            with collection._maintenance_lock:
                segments = tuple(collection._segment_cache.values())
                tombstones = len(collection._delta_index)
            if view.holds(collection._memtable, segments, tombstones):
                return view
        view = _View(collection, done)
        self.views += 1
        if done is not None and self._writes.settled() == done:  # no write ran meanwhile
            self._view = view
        return view


class _View:
    """One state of a collection: its segments, the rows of each that dense and BM25
    searches may return (they judge a pending delete's partition differently, as Lite's
    two searches do), and its memtable's live rows."""

    def __init__(self, collection: Any, done: int | None) -> None:
        self.done = done
        self.collection = collection
        self.segments, delta = collection._read_snapshot()
        self.tombstones = len(delta)
        self.memtable = collection._memtable
        versions = {pk: pos[2] for pk, pos in self.memtable.pk_index_snapshot()}
        self._pending: dict[Any, tuple[int, str]] = self.memtable.delete_index_snapshot()
        self._deleted: dict[Any, int] = delta.snapshot
        if all(len(seg.pk_to_row) == len(seg.pks) for seg in self.segments):
            self._newest = _newest_shared(self.segments, versions)
            masks = [self._by_key(seg) for seg in self.segments]
        else:  # a key twice in one segment: Lite's own row-by-row judgement
            self._newest = _newest_by_row(self.segments, versions)
            masks = [self._by_row(seg) for seg in self.segments]
        for pair in masks:
            for mask in pair:
                mask.flags.writeable = False  # shared by every search of this view
        self.dense = [dense for dense, _ in masks]
        self.sparse = [sparse for _, sparse in masks]
        self._memtable_dense: dict[str, tuple[Any, ...]] = {}
        self._memtable_records: list[tuple[Any, int, dict[str, Any]]] | None = None
        self._memtable_sparse: dict[str, list[dict[int, float]]] = {}

    def holds(self, memtable: Any, segments: tuple[Any, ...], tombstones: int) -> bool:
        """Whether the collection is still in this view's state (its writes counted)."""
        return (
            memtable is self.memtable
            and tombstones == self.tombstones
            and len(segments) == len(self.segments)
            and all(a is b for a, b in zip(segments, self.segments, strict=True))
        )

    def _by_key(self, seg: Any) -> tuple[np.ndarray, np.ndarray]:
        """A segment's masks from the keys it shares with the newest versions, the
        tombstones and the pending deletes (set intersections: no loop over its rows)."""
        from milvus_lite.constants import ALL_PARTITIONS

        keys, rows, seqs = seg.pk_to_row.keys(), seg.pk_to_row, seg.seqs
        sparse = np.ones(len(seg.pks), dtype=bool)
        for pk in self._newest.keys() & keys:
            sparse[rows[pk]] = int(seqs[rows[pk]]) >= self._newest[pk]
        for pk in self._deleted.keys() & keys:
            if self._deleted[pk] > int(seqs[rows[pk]]):
                sparse[rows[pk]] = False
        dense = sparse.copy()
        for pk in self._pending.keys() & keys:
            seq, partition = self._pending[pk]
            if seq > int(seqs[rows[pk]]):
                dense[rows[pk]] = False  # a dense search: a delete of any partition
                if partition in (ALL_PARTITIONS, seg.partition):
                    sparse[rows[pk]] = False
        return dense, sparse

    def _by_row(self, seg: Any) -> tuple[np.ndarray, np.ndarray]:
        from milvus_lite.constants import ALL_PARTITIONS

        dense = np.zeros(len(seg.pks), dtype=bool)
        sparse = np.zeros(len(seg.pks), dtype=bool)
        for row, (pk, seq) in enumerate(zip(seg.pks, seg.seqs.tolist(), strict=True)):
            if self._newest.get(pk) != seq or self._deleted.get(pk, -1) > seq:
                continue
            pending = self._pending.get(pk)
            if pending is None or pending[0] <= seq:
                dense[row] = sparse[row] = True
            else:  # a dense search: a delete of any partition
                sparse[row] = pending[1] not in (ALL_PARTITIONS, seg.partition)
        return dense, sparse

    def _live_version(self, pk: Any, seq: int) -> bool:
        """A memtable row is its key's newest version and no flushed delete shadows it."""
        return self._newest.get(pk, seq) <= seq and self._deleted.get(pk, -1) <= seq

    def memtable_dense(self, field: str) -> tuple[Any, ...]:
        """The memtable's rows for a dense search of ``field`` (Lite's search snapshot,
        with its table for filters) and which of them are live."""
        found = self._memtable_dense.get(field)
        if found is None:
            pks, seqs, vectors, refs, table = self.memtable.to_search_snapshot(
                vector_field=field, partition_names=None, include_table=True
            )
            live = np.array(
                [
                    self._live_version(pk, seq)
                    and not (pk in self._pending and self._pending[pk][0] > seq)
                    for pk, seq in zip(pks, seqs.tolist(), strict=True)
                ],
                dtype=bool,
            )
            found = self._memtable_dense[field] = (pks, vectors, refs, table, live)
        return found

    def memtable_records(self) -> list[tuple[Any, int, dict[str, Any]]]:
        """The memtable's live rows as records (a BM25 search scores them itself)."""
        if self._memtable_records is None:
            self._memtable_records = [
                (pk, seq, record)
                for pk, seq, record in self.memtable.active_record_snapshots()
                if self._live_version(pk, seq)
            ]
        return self._memtable_records

    def memtable_sparse(self, field: str) -> list[dict[int, float]]:
        found = self._memtable_sparse.get(field)
        if found is None:
            from milvus_lite.analyzer.sparse import bytes_to_sparse

            raws = [record.get(field) for _, _, record in self.memtable_records()]
            found = self._memtable_sparse[field] = [
                bytes_to_sparse(raw) if isinstance(raw, bytes) else (raw or {}) for raw in raws
            ]
        return found


def _newest_shared(segments: tuple[Any, ...], versions: dict[Any, int]) -> dict[Any, int]:
    """The newest seq of each key found in more than one source (the segments, then the
    memtable's ``versions``); a key of one source is its own newest version."""
    keys: list[KeysView[Any]] = [seg.pk_to_row.keys() for seg in segments]
    keys.append(versions.keys())
    if len(set().union(*keys)) == sum(len(k) for k in keys):
        return {}
    newest: dict[Any, int] = {}
    for pk, count in Counter(chain.from_iterable(keys)).items():
        if count > 1:
            seqs = [int(seg.seqs[seg.pk_to_row[pk]]) for seg in segments if pk in seg.pk_to_row]
            newest[pk] = max([*seqs, versions.get(pk, -1)])
    return newest


def _newest_by_row(segments: Iterable[Any], versions: dict[Any, int]) -> dict[Any, int]:
    """The newest seq of every key, row by row (as Lite does in each search)."""
    newest: dict[Any, int] = {}
    for seg in segments:
        for pk, seq in zip(seg.pks, seg.seqs.tolist(), strict=True):
            if newest.get(pk, -1) < seq:
                newest[pk] = seq
    for pk, seq in versions.items():
        newest[pk] = max(seq, newest.get(pk, -1))
    return newest


def search_dense(
    live: LiveRows,
    vector: list[float] | str,
    field: str,
    metric: str,
    limit: int,
    expr: str | None,
    output_fields: list[str],
) -> list[dict[str, Any]]:
    """Lite's dense search (``Collection.search`` over ``execute_search_with_index``) for
    one query vector, with the live rows of ``live``'s current view: each segment's index
    (or brute force) with the filter and the live mask, the memtable by brute force, the
    hits merged by (distance, source, row) and projected as Lite projects them."""
    from milvus_lite.engine.collection import _internal_distance_to_milvus_distance
    from milvus_lite.index.brute_force import BruteForceIndex
    from milvus_lite.search.filter import evaluate_mask
    from milvus_lite.search.indexed_filter import evaluate_segment_filter

    collection = live.collection
    collection._require_loaded()
    metric = collection.resolve_search_metric(field, metric)
    view = live.view()
    query = np.asarray([vector], dtype=np.float32)
    compiled = collection._compile_filter(expr) if expr else None
    plan = collection._indexed_filter_plan(compiled)
    candidates: list[tuple[float, int, int]] = []
    sources: list[Any] = []  # the segments with rows, then the memtable
    for seg, alive in zip(view.segments, view.dense, strict=True):
        if seg.num_rows == 0:
            continue
        sources.append(seg)
        vectors, valid = seg.vector_data(field)
        mask = alive if compiled is None else alive & evaluate_segment_filter(seg, compiled, plan)
        mask = mask if valid is None else mask & valid
        if mask.any():
            index = seg.indexes.get(field)
            if index is None:
                index = BruteForceIndex.build(vectors, metric)
            found = index.search(query, limit, valid_mask=None if mask.all() else mask)
            candidates += _ranked(found, len(sources) - 1)
    pks, vectors, refs, table, alive = view.memtable_dense(field)
    if pks:
        sources.append(None)
        mask = alive if compiled is None else alive & evaluate_mask(compiled, table)
        if mask.any():
            index = BruteForceIndex.build(vectors, metric)
            found = index.search(query, limit, valid_mask=None if mask.all() else mask)
            candidates += _ranked(found, len(sources) - 1)
    candidates.sort()
    entity = _Projection(collection, output_fields)
    hits = []
    for distance, source, row in candidates[:limit]:
        seg = sources[source]
        if seg is None:  # the memtable's row, as Lite materialises it
            record = view.memtable.materialize_row(*refs[row])
            key = record.get(collection._pk_name, pks[row])
            hits.append({"id": key, "distance": distance, "entity": entity.of_record(record)})
        else:
            hits.append(
                {"id": seg.pks[row], "distance": distance, "entity": entity.of_row(seg, row)}
            )
    for hit in hits:
        hit["distance"] = _internal_distance_to_milvus_distance(hit["distance"], metric)
    return hits


def _ranked(found: tuple[np.ndarray, np.ndarray], source: int) -> list[tuple[float, int, int]]:
    """One source's hits (one query) as (distance, source, row), up to the padding."""
    ids, distances = found
    out = []
    for row, distance in zip(ids[0].tolist(), distances[0].tolist(), strict=True):
        if row < 0:
            break
        out.append((float(distance), source, row))
    return out


def search_bm25(
    live: LiveRows,
    text: list[float] | str,
    field: str,
    metric: str,
    limit: int,
    expr: str | None,
    output_fields: list[str],
) -> list[dict[str, Any]]:
    """Lite's BM25 search (``Collection._search_sparse``) for one query text, with the
    live rows of ``live``'s current view: each segment's cached scorer with the live
    mask and the filter, the memtable scored on its own, one hit per key (its newest
    version), ordered by distance as Lite's stable sort orders them."""
    from milvus_lite.engine.collection import _internal_distance_to_milvus_distance
    from milvus_lite.index.sparse_factory import (
        _search_prepared_sparse_index,
        create_sparse_index,
        sparse_index_matches,
    )
    from milvus_lite.search.filter.eval.python_backend import _eval_row
    from milvus_lite.search.indexed_filter import evaluate_segment_filter

    collection = live.collection
    collection._require_loaded()
    metric = collection.resolve_search_metric(field, metric)
    view = live.view()
    spec = collection._index_specs.get(field)
    params = spec.build_params if spec else {}
    queries = collection._prepare_sparse_queries([text], field)
    compiled = collection._compile_filter(expr) if expr else None
    plan = collection._indexed_filter_plan(compiled)
    # (distance, key, (segment, row) or (record, seq))
    candidates: list[tuple[float, Any, tuple[Any, Any]]] = []
    for seg, alive in zip(view.segments, view.sparse, strict=True):
        if seg.table is None or len(seg.table) == 0:
            continue
        scorer = seg.sparse_indexes.get(field)
        if not sparse_index_matches(scorer, metric, params):
            scorer = seg.sparse_indexes[field] = _segment_scorer(seg, field, metric, params)
        mask = alive if compiled is None else alive & evaluate_segment_filter(seg, compiled, plan)
        if not mask.any():
            continue
        ids, distances = _search_prepared_sparse_index(scorer, queries, limit, valid_mask=mask)
        for row, distance in zip(ids[0].tolist(), distances[0].tolist(), strict=True):
            if row < 0:
                break
            candidates.append((float(distance), seg.pks[row], (seg, row)))
    records = view.memtable_records()
    if records:
        valid = np.ones(len(records), dtype=bool)
        if compiled is not None:
            for i, (_, _, record) in enumerate(records):
                valid[i] = bool(_eval_row(compiled.ast, record))
        scorer = create_sparse_index(metric, params)
        scorer.build(view.memtable_sparse(field), valid_mask=valid)
        ids, distances = _search_prepared_sparse_index(scorer, queries, limit)
        for row, distance in zip(ids[0].tolist(), distances[0].tolist(), strict=True):
            if row < 0:
                break
            pk, seq, record = records[row]
            candidates.append((float(distance), pk, (record, seq)))
    newest: dict[Any, tuple[int, tuple[float, Any, tuple[Any, Any]]]] = {}
    for candidate in candidates:
        where, at = candidate[2]
        seq = int(at) if isinstance(where, dict) else int(where.seqs[at])
        if candidate[1] not in newest or seq > newest[candidate[1]][0]:
            newest[candidate[1]] = (seq, candidate)
    kept = sorted((candidate for _, candidate in newest.values()), key=lambda c: c[0])
    entity = _Projection(collection, output_fields)
    return [
        {
            "id": pk,
            "distance": _internal_distance_to_milvus_distance(distance, metric),
            "entity": entity.of_record(where)
            if isinstance(where, dict)
            else entity.of_row(where, at),
        }
        for distance, pk, (where, at) in kept[:limit]
    ]


def _segment_scorer(seg: Any, field: str, metric: str, params: dict[str, Any]) -> Any:
    """The sparse scorer Lite builds for a segment at its first search."""
    from milvus_lite.analyzer.sparse import bytes_to_sparse
    from milvus_lite.index.sparse_factory import create_sparse_index

    vectors = [
        bytes_to_sparse(raw) if isinstance(raw, bytes) else (raw or {})
        for raw in seg.table.column(field).to_pylist()
    ]
    scorer = create_sparse_index(metric, params)
    scorer.build(vectors)
    if type(scorer) is SparseInvertedIndex:
        scorer = VectorizedBm25.from_index(scorer)
    return scorer


class _Projection:
    """A hit's entity as Lite's search projects it (``project_record``). A collection
    without dynamic fields projects only the requested schema fields, so only those
    are read from a segment's row, a dense vector from the segment's own array (Lite
    reads every column value by value: 512 Python floats per vector)."""

    def __init__(self, collection: Any, output_fields: list[str]) -> None:
        from milvus_lite.engine.projection import build_projection_plan
        from milvus_lite.schema.types import DataType

        self._schema = collection._schema
        self._plan = build_projection_plan(output_fields, self._schema, api_kind="search")
        self._fields = self._plan.engine_fields if not self._schema.enable_dynamic_field else None
        self._vectors = {f.name for f in self._schema.fields if f.dtype == DataType.FLOAT_VECTOR}

    def of_record(self, record: dict[str, Any]) -> dict[str, Any]:
        from milvus_lite.engine.projection import project_record

        return dict(project_record(record, self._schema, self._plan))

    def of_row(self, seg: Any, row: int) -> dict[str, Any]:
        table = seg.table
        names = self._fields if self._fields is not None else table.column_names
        record = {}
        for name in names:
            if name in ("_seq", "_partition") or name not in table.column_names:
                continue
            if name in self._vectors:
                vectors, valid = seg.vector_data(name)
                if valid is None:  # float32 values as Python floats, as ``as_py`` gives
                    record[name] = vectors[row].tolist()
                    continue
            record[name] = table.column(name)[row].as_py()
        return self.of_record(record)


def search_check() -> str | None:
    """None when ``search_dense``/``search_bm25`` return what Lite's own searches return
    on a small collection through every case the live-row masks must get right, else
    what differed (logged once per process; searches then go through Lite's own code)."""
    if not _search_verdict:
        try:
            problem = _search_disagreement()
        except Exception as exc:  # Lite reorganised: its own searches still work
            problem = f"the search check could not run ({type(exc).__name__}: {exc})"
        _search_verdict.append(problem)
        if problem is not None:
            log.warning(
                "Milvus Lite %s searches otherwise than superbiz's live-row search expects "
                "(written for %s.x): %s; using Lite's own searches (slower, same results)",
                _lite_version(),
                LITE_SERIES,
                problem,
            )
    return _search_verdict[0]


def _search_disagreement() -> str | None:
    from milvus_lite.engine.collection import Collection
    from milvus_lite.schema.types import (
        CollectionSchema,
        DataType,
        FieldSchema,
        Function,
        FunctionType,
    )

    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            FieldSchema("domain", DataType.VARCHAR, max_length=64),
            FieldSchema(
                "text",
                DataType.VARCHAR,
                max_length=512,
                enable_analyzer=True,
                analyzer_params={"tokenizer": "jieba"},
            ),
            FieldSchema("dense", DataType.FLOAT_VECTOR, dim=4),
            FieldSchema("sparse", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
        ],
        functions=[Function("bm25", FunctionType.BM25, ["text"], ["sparse"])],
    )
    rng = np.random.default_rng(36)
    probes = rng.standard_normal((4, 4)).astype(np.float32)

    def rows(first: int, last: int, version: int) -> list[dict[str, Any]]:
        # every fifth row repeats a probe: equal distances across segments (ties)
        return [
            {
                "id": f"r{i}",
                "domain": "ab"[i % 2],
                "text": f"{CHECK_TEXTS[i % 4]} {i} v{version}",
                "dense": (probes[i % 4] if i % 5 == 0 else rng.standard_normal(4)).tolist(),
            }
            for i in range(first, last)
        ]

    with tempfile.TemporaryDirectory(prefix="superbiz-lite-check-") as folder:
        collection = Collection("check", folder, schema)
        try:
            collection.create_index("dense", {"index_type": "AUTOINDEX", "metric_type": "L2"})
            collection.create_index("domain", {"index_type": "INVERTED"})
            collection.create_index(
                "sparse", {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25"}
            )
            collection.load()
            live = LiveRows(collection)
            steps: list[Callable[[], object]] = [
                lambda: collection.insert(rows(0, 30, 0)),
                collection.flush,
                lambda: collection.insert(rows(20, 45, 1)),  # newer versions, memtable
                lambda: collection.delete(["r3", "r22", "r40"]),  # pending deletes
                collection.flush,
                lambda: collection.insert(rows(40, 55, 2)),
                lambda: collection.delete(["r5", "r44", "r50"]),
            ]
            for number, step in enumerate(steps):
                step()
                # Lite compacts and indexes in the background after a flush: both searches
                # must see the same segments and indexes (a segment searched by brute force
                # by one and by HNSW by the other gives other float roundings)
                collection._wait_for_bg()
                problem = _searches_differ(collection, live, probes, number)
                if problem is not None:
                    return problem
        finally:
            collection.close()
    return None


def _searches_differ(collection: Any, live: LiveRows, probes: np.ndarray, step: int) -> str | None:
    """What differs between Lite's searches and the live-row ones after ``step``."""
    for limit in (3, 60):
        for expr in (None, 'domain == "a"'):
            for probe in probes[:2]:
                args = (probe.tolist(), "dense", "L2", limit, expr, ["domain", "text"])
                if search_dense(live, *args) != _lite_search(collection, *args):
                    return f"a dense search differs after step {step} ({limit}, {expr})"
            for query in CHECK_QUERIES[:2]:
                args = (query, "sparse", "BM25", limit, expr, ["domain", "text", "dense"])
                expected = _lite_search(collection, *args)
                if search_bm25(live, *args) != expected:
                    return f"a BM25 search differs after step {step} ({limit}, {expr})"
    return None


def _lite_search(
    collection: Any,
    data: list[float] | str,
    field: str,
    metric: str,
    limit: int,
    expr: str | None,
    output_fields: list[str],
) -> list[dict[str, Any]]:
    result = collection.search(
        [data],
        top_k=limit,
        metric_type=metric,
        output_fields=output_fields,
        anns_field=field,
        expr=expr,
    )
    return list(result[0])


if SparseInvertedIndex is not None:

    class VectorizedBm25(SparseInvertedIndex):  # type: ignore[misc]  # Lite is untyped
        """Lite's BM25 (its k1, b, IDF and length normalisation), one numpy pass per term.

        Each posting's contribution ``idf · tf·(k1+1) / (tf + k1·(1−b+b·dl/avgdl))``
        depends only on the segment, so it is computed once; a query sums those
        arrays into a score per row. Ties keep row order, as a stable sort does.
        """

        _postings: dict[int, tuple[np.ndarray, np.ndarray]]

        @classmethod
        def from_index(cls, index: Any) -> VectorizedBm25:
            fast = cls(k1=index.k1, b=index.b)
            fast.doc_count = index.doc_count
            fast.avgdl = index.avgdl
            fast._doc_lengths = index._doc_lengths
            fast._posting_lists = index._posting_lists
            fast._df = index._df
            fast._postings = fast._contributions()
            return fast

        def _contributions(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
            n, k1, b = self.doc_count, self.k1, self.b
            avgdl = self.avgdl if self.avgdl > 0 else 1.0
            lengths = np.asarray(self._doc_lengths, dtype=np.float64)
            postings = {}
            for term, entries in self._posting_lists.items():
                rows = np.fromiter((e[0] for e in entries), np.int64, len(entries))
                tf = np.fromiter((e[1] for e in entries), np.float64, len(entries))
                df = self._df[term]
                idf = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
                norm = tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths[rows] / avgdl))
                postings[term] = (rows, idf * norm)
            return postings

        def search(
            self,
            query_sparse_vectors: list[dict[int, float]],
            top_k: int,
            valid_mask: np.ndarray | None = None,
        ) -> tuple[np.ndarray, np.ndarray]:
            nq = len(query_sparse_vectors)
            ids = np.full((nq, top_k), -1, dtype=np.int64)
            distances = np.full((nq, top_k), np.inf, dtype=np.float32)
            rows = len(self._doc_lengths)
            for qi, query in enumerate(query_sparse_vectors):
                scores = np.zeros(rows)
                touched = np.zeros(rows, dtype=bool)
                for term, weight in query.items():
                    posting = self._postings.get(term)
                    if posting is not None:
                        scores[posting[0]] += posting[1] * weight
                        touched[posting[0]] = True
                if valid_mask is not None:
                    touched &= valid_mask
                candidates = np.flatnonzero(touched)
                best = candidates[np.argsort(-scores[candidates], kind="stable")[:top_k]]
                ids[qi, : len(best)] = best
                distances[qi, : len(best)] = -scores[best]
            return ids, distances

else:  # pragma: no cover - only without Lite
    VectorizedBm25 = None  # type: ignore[assignment,misc]
