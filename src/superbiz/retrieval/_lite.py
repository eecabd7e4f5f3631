"""Milvus Lite in this process: its collection object and a vectorised BM25 scorer.

Milvus Lite 3.x is a pure-Python engine that pymilvus reaches over loopback gRPC.
What it does slowly at query time is worked around here, and only here, behind
fallbacks so that a change in Lite's internals costs speed, never results:

* fresh rows sit in a memtable that every search scans row by row until a flush and
  Lite's background index build seal them (``wait_for_index_build``);
* searching the in-process collection directly skips the gRPC round trip
  (about 3 ms per dense and 12 ms per BM25 search at dev size);
* Lite scores BM25 one posting at a time in Python (about 2.5 ms per query on the
  dev set); each segment's scorer is swapped for ``VectorizedBm25``, the same formula
  over numpy arrays (about 0.2 ms), with identical rankings (tested);
* Lite analyses every inserted text with jieba, in Python (2–4 ms per chunk, a fifth
  of an ingest's CPU); ``accelerate_analysis`` remembers the term ids of each block
  jieba cuts on its own, so a repeated word or phrase is analysed once (identical
  ids, tested);
* Lite's flush turns its memtable into a table value by value (``as_py``: 512
  Python floats per vector), which was most of the +200 MB peak of a 6 MB ingest;
  ``accelerate_flush`` builds the same table with Arrow's ``take`` over the
  memtable's own record batches (an identical table, tested).
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

try:
    from milvus_lite.index.sparse_inverted import SparseInvertedIndex
except ImportError:  # Lite not installed, or reorganised: nothing to accelerate
    SparseInvertedIndex = None

try:
    from milvus_lite.analyzer.jieba_analyzer import JiebaAnalyzer
except ImportError:  # no Lite, or no jieba
    JiebaAnalyzer = None

try:
    from milvus_lite.storage.memtable import MemTable
except ImportError:
    MemTable = None

#: jieba blocks whose term ids one analyzer remembers (a few MB); emptied when full
ANALYSIS_CACHE_SIZE = 50_000


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


def accelerate_analysis() -> None:
    """Make Lite's jieba analyzer (for this process, every instance) analyse a text one
    block at a time through a cache of each block's term ids.

    jieba cuts a text at its regular expression ``re_han_default`` (runs of CJK,
    Latin letters, digits and ``+#&._%-``, and what lies between them) and segments
    each block on its own; Lite's analyzer then strips, lowercases, drops stop words
    and hashes token by token. So a text's ids are its blocks' ids in order, and a
    block seen before costs a dictionary lookup.
    """
    if JiebaAnalyzer is None or getattr(JiebaAnalyzer.analyze, "cached_blocks", False):
        return
    try:
        import jieba

        split = jieba.re_han_default.split
    except Exception:  # jieba reorganised: Lite's own analysis still works
        log.debug("jieba block cache unavailable", exc_info=True)
        return
    analyze_text = JiebaAnalyzer.analyze

    def analyze(self: Any, text: str) -> list[int]:
        cache: dict[str, list[int]] = self.__dict__.setdefault("_superbiz_blocks", {})
        ids: list[int] = []
        for block in split(text):
            if not block:
                continue
            found = cache.get(block)
            if found is None:
                if len(cache) >= ANALYSIS_CACHE_SIZE:
                    cache.clear()
                found = cache[block] = analyze_text(self, block)
            ids += found
        return ids

    analyze.cached_blocks = True  # type: ignore[attr-defined]
    JiebaAnalyzer.analyze = analyze


def accelerate_flush() -> None:
    """Make Lite's memtable build its flushed table column by column in Arrow.

    ``MemTable._build_data_table(rows)`` gathers the live ``(batch, row)`` pairs in
    their order into a table of the data schema. The record batches already hold
    those columns with those types, so Arrow's ``take`` over them gives the same
    table without a Python object per value. Anything unexpected (another layout,
    another schema) falls back to Lite's own code.
    """
    if MemTable is None or getattr(MemTable._build_data_table, "columnar", False):
        return
    build_by_value = MemTable._build_data_table

    def build(self: Any, rows: list[tuple[int, int]]) -> Any:
        try:
            table = _taken_rows(self, rows)
        except Exception:  # Lite reorganised: its own way still works
            log.debug("Milvus Lite columnar flush unavailable", exc_info=True)
            table = None
        return build_by_value(self, rows) if table is None else table

    build.columnar = True  # type: ignore[attr-defined]
    build.by_value = build_by_value  # type: ignore[attr-defined]
    MemTable._build_data_table = build


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
