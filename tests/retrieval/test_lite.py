"""Milvus Lite in process: the vectorised BM25 scorer ranks exactly as Lite's own, and
an ingest leaves nothing for searches to scan row by row."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from milvus_lite.index.sparse_inverted import SparseInvertedIndex

from superbiz.config import Settings
from superbiz.knowledge.base import KnowledgeBase
from superbiz.knowledge.ingest import Ingestor
from superbiz.retrieval._lite import VectorizedBm25, accelerate_bm25


def _random_corpus(rng: np.random.Generator, docs: int, vocabulary: int) -> list[dict[int, float]]:
    corpus = []
    for _ in range(docs):
        terms = rng.choice(vocabulary, size=int(rng.integers(0, 12)), replace=False)
        corpus.append({int(t): float(rng.integers(1, 5)) for t in terms})
    return corpus


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorized_bm25_matches_lite_scores_and_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    corpus = _random_corpus(rng, docs=300, vocabulary=60)
    lite = SparseInvertedIndex(k1=1.2, b=0.6)
    lite.build(corpus)
    fast = VectorizedBm25.from_index(lite)
    queries = [{int(t): 1.0 for t in rng.choice(70, size=4, replace=False)} for _ in range(40)]
    queries.append({})  # no terms: no hits
    mask = rng.random(300) > 0.3

    for valid in (None, mask):
        lite_ids, lite_dist = lite.search(queries, 15, valid_mask=valid)
        fast_ids, fast_dist = fast.search(queries, 15, valid_mask=valid)
        np.testing.assert_allclose(fast_dist, lite_dist, rtol=1e-6)
        for row in range(len(queries)):
            lite_hits = dict(zip(lite_ids[row].tolist(), lite_dist[row].tolist(), strict=True))
            fast_hits = dict(zip(fast_ids[row].tolist(), fast_dist[row].tolist(), strict=True))
            for hit in lite_hits.keys() & fast_hits.keys():
                assert fast_hits[hit] == pytest.approx(lite_hits[hit])
            # Rows tied at the cut-off score may be cut differently; no other row may.
            boundary = lite_dist[row][-1]
            for hit in lite_hits.keys() ^ fast_hits.keys():
                score = lite_hits.get(hit, fast_hits.get(hit))
                assert score == pytest.approx(boundary)
        assert (fast_ids[-1] == -1).all()


def test_vectorized_bm25_is_empty_for_an_empty_segment() -> None:
    lite = SparseInvertedIndex()
    lite.build([])
    ids, distances = VectorizedBm25.from_index(lite).search([{1: 1.0}], 3)
    assert (ids == -1).all() and np.isinf(distances).all()


def _segments(kb: KnowledgeBase) -> list[Any]:
    local = kb.store._local_collection()
    assert local is not None, "the default store is an in-process Milvus Lite file"
    return list(local._segments_snapshot())


def test_ingest_seals_rows_and_searches_use_the_vectorized_scorer(
    tmp_path: Path, small_kb: Path, use_embedder: Any
) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        Ingestor(kb).ingest([small_kb])
        local = kb.store._local_collection()
        assert local._memtable.size() == 0  # flushed: nothing scanned row by row
        assert sum(segment.num_rows for segment in _segments(kb)) > 0

        before = kb.store.search_bm25("Redis connection pool exhausted", 5)
        after = kb.store.search_bm25("Redis connection pool exhausted", 5)
        scorers = [segment.sparse_indexes.get("sparse") for segment in _segments(kb)]
        assert scorers and all(isinstance(s, VectorizedBm25) for s in scorers)
        assert [h.id for h in after] == [h.id for h in before]
        assert after[0].doc_path == "infrastructure/redis-pool.md"
    finally:
        kb.close()


def test_accelerate_bm25_leaves_an_unknown_collection_alone() -> None:
    accelerate_bm25(object(), "sparse")  # no segments API: nothing to do, no error


ANALYSED = [
    "## TiKV 如何扩容？是否需要重启，the Region 的 leader 吗",
    "Payment gateway timeout: check the Redis pool (redis-cli info clients); 连接池耗尽时重试。",
    "支付回调超时 支付回调超时 payment-gateway v1.2.3 50% C++ C# a&b 3.14 -- ``` **bold**",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　中文　全角 émigré naïve 🙂 \t\n\n",
    "",
]


def test_cached_analysis_gives_lites_own_term_ids() -> None:
    """Lite's jieba analyzer with the block cache (installed by every Lite store) returns
    exactly the ids jieba and Lite's filters give for the whole text, also on the second
    and later calls (from the cache)."""
    import jieba
    from milvus_lite.analyzer.factory import create_analyzer
    from milvus_lite.analyzer.hash import term_to_id
    from milvus_lite.analyzer.jieba_analyzer import JiebaAnalyzer

    from superbiz.retrieval._lite import accelerate_analysis
    from superbiz.retrieval.records import BM25_ANALYZER, BM25_STOP_WORDS

    accelerate_analysis()
    accelerate_analysis()  # once is enough; a second call changes nothing
    assert getattr(JiebaAnalyzer.analyze, "cached_blocks", False)
    analyzer = create_analyzer(BM25_ANALYZER)
    stop = set(BM25_STOP_WORDS)
    for text in [*ANALYSED, *ANALYSED, " ".join(ANALYSED)]:
        words = [w.strip().lower() for w in jieba.cut_for_search(text) if w.strip()]
        expected = [term_to_id(w) for w in words if w not in stop]
        assert analyzer.analyze(text) == expected, text


@pytest.mark.parametrize("replace", [True, False])
def test_columnar_flush_builds_lites_own_table(tmp_path: Path, replace: bool) -> None:
    """Rows inserted in three calls, some replaced and some deleted in between (taken
    from the batches) or all live (the batches themselves): the table a flush writes is
    the one Lite's value-by-value code builds (values, order, schema)."""
    from milvus_lite.storage.memtable import MemTable

    from superbiz.retrieval._lite import _taken_rows
    from superbiz.retrieval.records import ChunkRecord
    from superbiz.retrieval.vector_store import MilvusChunkStore

    def records(doc: str, count: int, version: int) -> list[ChunkRecord]:
        rng = np.random.default_rng(version)
        return [
            ChunkRecord(
                id=f"{doc}#{i}",
                doc_path=doc,
                domain="ops",
                title=f"{doc} v{version}",
                heading="Steps" if i % 2 else "",
                chunk_index=i,
                content_hash=f"h{version}",
                text=f"第 {i} 段 text {version} " * (i + 1),
                search_text=f"redis 连接池 {i} {version}",
                vector=rng.standard_normal(8).astype(np.float32),
            )
            for i in range(count)
        ]

    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    try:
        store.ensure_collection(8)
        store.insert(records("a.md", 5, 1))
        store.insert(records("b.md", 3, 2))
        if replace:
            store.replace_document("a.md", records("a.md", 4, 3))  # one fewer, all replaced
            store.delete_documents(["b.md"])
        store.insert(records("c.md", 2, 4))
        collection = store._local_collection()
        assert collection is not None
        memtable = collection._memtable
        rows = [(batch, row) for batch, row, _ in memtable._pk_index.values()]
        assert len(rows) == (6 if replace else 10)
        assert getattr(MemTable._build_data_table, "columnar", False)
        taken = _taken_rows(memtable, rows)
        assert taken is not None
        assert taken.equals(
            MemTable._build_data_table.by_value(memtable, rows), check_metadata=True
        )
        store.flush()  # the columnar table is what reaches Parquet, and reads back
        a_chunks = store.chunks_of("a.md")
        assert [h.chunk_index for h in a_chunks] == list(range(4 if replace else 5))
        assert a_chunks[0].title == ("a.md v3" if replace else "a.md v1")
        assert len(store.chunks_of("b.md")) == (0 if replace else 3)
    finally:
        store.close()


def test_rows_written_in_process_read_back_as_through_the_client(tmp_path: Path) -> None:
    """Lite's rows go straight to its collection; the same rows through pymilvus and
    gRPC (a store whose in-process collection is unavailable) read back the same, and a
    row Lite refuses is a StoreError that names the store."""
    from superbiz.exceptions import StoreError
    from superbiz.retrieval.records import ChunkRecord
    from superbiz.retrieval.vector_store import MilvusChunkStore

    rng = np.random.default_rng(7)
    records = [
        ChunkRecord(
            id=f"a.md#{i}",
            doc_path="a.md",
            domain="ops",
            title="Redis 连接池",
            heading="Steps" if i else "",
            chunk_index=i,
            content_hash="h",
            text=f"第 {i} 段 check the pool",
            search_text=f"redis 连接池 pool {i}",
            vector=rng.standard_normal(8).astype(np.float32),
        )
        for i in range(5)
    ]
    records += [
        dataclasses.replace(r, id=f"b.md#{r.chunk_index}", doc_path="b.md") for r in records[:2]
    ]
    read: list[list[Any]] = []
    for direct in (True, False):
        store = MilvusChunkStore(str(tmp_path / f"{direct}.db"), "chunks")
        try:
            store.ensure_collection(8)
            if not direct:
                store._local = False  # as when Lite's layout is not the expected one
            store.insert(records)
            store.flush()
            hits = store.chunks_of("a.md")
            read.append([(h.id, h.title, h.heading, h.text, h.vector.tobytes()) for h in hits])
            # several documents in one query (one has no chunks), in chunk order each
            both = store.chunks_of_documents(["b.md", "a.md", "missing.md"])
            assert sorted(both) == ["a.md", "b.md"]
            assert [h.id for h in both["a.md"]] == [h.id for h in hits]
            assert [h.id for h in both["b.md"]] == ["b.md#0", "b.md#1"]
            assert [h.id for h in store.search_bm25("连接池 pool", 5)][:1] == ["a.md#0"]
            if direct:
                too_long = dataclasses.replace(records[0], id="x" * 200)
                with pytest.raises(StoreError, match="Milvus at"):
                    store.insert([too_long])
        finally:
            store.close()
    assert read[0] == read[1]
    assert len(read[0]) == 5
