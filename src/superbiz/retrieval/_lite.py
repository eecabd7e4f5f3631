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

Patches go on this store's own objects (its collection's analyzers, memtables and
segments), never on Lite's classes: an application that embeds superbiz and uses
Milvus Lite itself is unaffected. When a store opens, ``self_check`` scores a tiny
segment both ways (``VectorizedBm25`` and Lite's own BM25) and analyses sample texts
both ways (block cache and Lite's own jieba analysis); if either differs, for
example after a Lite upgrade, the store uses the public client only and says so once.
The check was written for Lite ``LITE_SERIES`` (pinned in pyproject.toml).
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

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


class InProcessLite:
    """Milvus Lite's engine collection for one store file, with this store's own
    accelerations installed on it; ``attach`` returns None where the public client
    must be used instead (not a Lite file, another layout, or the self-check failed)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

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
