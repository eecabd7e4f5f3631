"""Milvus Lite in process: the vectorised BM25 scorer ranks exactly as Lite's own, and
an ingest leaves nothing for searches to scan row by row."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from milvus_lite.analyzer.sparse import sparse_to_bytes
from milvus_lite.index.sparse_inverted import SparseInvertedIndex

from fakes.records import chunk_record
from superbiz.config import Settings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval._lite.bm25 import VectorizedBm25, accelerate_bm25


def _random_corpus(rng: np.random.Generator, docs: int, vocabulary: int) -> list[dict[int, float]]:
    corpus = []
    for _ in range(docs):
        terms = rng.choice(vocabulary, size=int(rng.integers(0, 12)), replace=False)
        corpus.append({int(t): float(rng.integers(1, 5)) for t in terms})
    return corpus


def _vectorized(lite: Any, corpus: list[dict[int, float]], built_from: str) -> Any:
    """The vectorised scorer of ``corpus``: from Lite's index, or from the rows as a
    segment stores them (packed bytes; dicts where a column holds them)."""
    if built_from == "index":
        return VectorizedBm25.from_index(lite)
    rows = [sparse_to_bytes(v) for v in corpus] if built_from == "packed" else list(corpus)
    return VectorizedBm25.of_rows(rows, k1=lite.k1, b=lite.b)


@pytest.mark.parametrize("built_from", ["index", "packed", "dicts"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorized_bm25_matches_lite_scores_and_order(seed: int, built_from: str) -> None:
    rng = np.random.default_rng(seed)
    corpus = _random_corpus(rng, docs=300, vocabulary=60)
    lite = SparseInvertedIndex(k1=1.2, b=0.6)
    lite.build(corpus)
    fast = _vectorized(lite, corpus, built_from)
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


def test_built_from_stored_rows_it_scores_as_built_from_lites_index() -> None:
    """Bit for bit: the same postings, in row order, and the same contributions, so a
    segment scored from its rows ranks exactly as before (empty rows included)."""
    corpus = _random_corpus(np.random.default_rng(7), docs=500, vocabulary=90)
    lite = SparseInvertedIndex()
    lite.build(corpus)
    expected = VectorizedBm25.from_index(lite)
    for built_from in ("packed", "dicts"):
        fast = _vectorized(lite, corpus, built_from)
        assert (fast.doc_count, fast.avgdl) == (expected.doc_count, expected.avgdl)
        assert np.array_equal(fast._doc_lengths, lite._doc_lengths)
        assert fast._postings.keys() == expected._postings.keys()
        for term, (rows, weights) in expected._postings.items():
            assert np.array_equal(fast._postings[term][0], rows)
            assert np.array_equal(fast._postings[term][1], weights)


@pytest.mark.parametrize("built_from", ["index", "packed", "dicts"])
def test_vectorized_bm25_is_empty_for_an_empty_segment(built_from: str) -> None:
    lite = SparseInvertedIndex()
    lite.build([])
    ids, distances = _vectorized(lite, [], built_from).search([{1: 1.0}], 3)
    assert (ids == -1).all() and np.isinf(distances).all()


def _segments(kb: KnowledgeBase) -> list[Any]:
    local = kb.store._local_collection()
    assert local is not None, "the default store is an in-process Milvus Lite file"
    return list(local.collection._segments_snapshot())


def test_ingest_seals_rows_and_searches_use_the_vectorized_scorer(
    tmp_path: Path, small_kb: Path, use_embedder: Any
) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        Ingestor(kb).ingest([small_kb])
        local = kb.store._local_collection()
        assert local is not None
        assert local.collection._memtable.size() == 0  # flushed: nothing scanned row by row
        assert sum(segment.num_rows for segment in _segments(kb)) > 0

        before = kb.store.search_bm25("Redis connection pool exhausted", 5)
        after = kb.store.search_bm25("Redis connection pool exhausted", 5)
        scorers = [segment.sparse_indexes.get("sparse") for segment in _segments(kb)]
        assert scorers and all(isinstance(s, VectorizedBm25) for s in scorers)
        assert [h.id for h in after] == [h.id for h in before]
        assert after[0].doc_path == "infrastructure/redis-pool.md"
    finally:
        kb.close()


def test_a_lite_file_with_an_older_superbiz_graph_is_told_a_rebuild_shrinks_it(
    tmp_path: Path, small_kb: Path, use_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file made before superbiz chose 8-bit graphs keeps its full-precision ones (they
    work; only a rebuild replaces them): an ingest says what a rebuild gains, a rebuild
    builds the graph as ``LITE_DENSE_INDEX`` and says nothing more."""
    from superbiz.retrieval import milvus_schema

    settings = Settings(data_dir=tmp_path / "data")
    with monkeypatch.context() as older:
        older.setattr(milvus_schema, "LITE_DENSE_INDEX", {"index_type": "AUTOINDEX", "params": {}})
        kb = KnowledgeBase(settings, embedder=use_embedder)
        try:
            assert Ingestor(kb).ingest([small_kb]).notes == []
        finally:
            kb.close()

    def dense_index(kb: KnowledgeBase) -> str:
        client = kb.store._client  # type: ignore[attr-defined]
        return str(client.describe_index(kb.store.collection, "dense")["index_type"])  # type: ignore[attr-defined]

    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        assert dense_index(kb) == "AUTOINDEX"
        (note,) = Ingestor(kb).ingest([small_kb]).notes
        assert "full-precision vectors (AUTOINDEX" in note and "--rebuild" in note
        rebuilt = Ingestor(kb).ingest([small_kb], rebuild=True)
        assert rebuilt.notes == [] and rebuilt.added
        assert dense_index(kb) == "HNSW_SQ"
    finally:
        kb.close()
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        assert kb.store.upgrade is None
        assert Ingestor(kb).ingest([small_kb]).notes == []
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
    """Lite's jieba analyzer with the block cache (installed on a Lite store's own
    analyzers) returns exactly the ids jieba and Lite's filters give for the whole text,
    also on the second and later calls (from the cache); Lite's class is untouched."""
    import jieba
    from milvus_lite.analyzer.factory import create_analyzer
    from milvus_lite.analyzer.hash import term_to_id
    from milvus_lite.analyzer.jieba_analyzer import JiebaAnalyzer

    from superbiz.retrieval._lite.ingest import cache_analysis
    from superbiz.retrieval.records import BM25_ANALYZER, BM25_STOP_WORDS

    own_analyze = JiebaAnalyzer.analyze
    analyzer = create_analyzer(BM25_ANALYZER)
    cache_analysis(analyzer)
    cached = analyzer.analyze
    cache_analysis(analyzer)  # once is enough; a second call changes nothing
    assert analyzer.analyze is cached and "analyze" in vars(analyzer)
    assert JiebaAnalyzer.analyze is own_analyze
    assert "analyze" not in vars(create_analyzer(BM25_ANALYZER))
    stop = set(BM25_STOP_WORDS)
    for text in [*ANALYSED, *ANALYSED, " ".join(ANALYSED)]:
        words = [w.strip().lower() for w in jieba.cut_for_search(text) if w.strip()]
        expected = [term_to_id(w) for w in words if w not in stop]
        assert analyzer.analyze(text) == expected, text


def test_cached_analysis_cuts_new_ascii_blocks_as_jieba_does() -> None:
    """A new ASCII block is cut without jieba (``block_words``), unless it holds one of
    the dictionary's ASCII words (``C++``, ``c#``, ``AT&T``): on 3,000 random texts of
    letters, digits, jieba's joiners, punctuation, whitespace and those words, the ids are
    those of jieba and Lite's filters."""
    import random

    import jieba
    from milvus_lite.analyzer.factory import create_analyzer
    from milvus_lite.analyzer.hash import term_to_id

    from superbiz.retrieval._lite.ingest import cache_analysis
    from superbiz.retrieval.records import BM25_ANALYZER, BM25_STOP_WORDS

    pieces = [*"aZ09+#&._%-", *"!\"'()*,/:;<=>?@[]^`{|}~", " ", "\t", "\n", "\r\n", "\x0c", "\x1c"]
    pieces += ["C++", "c#", "AT&T", "the", "Redis", "v1.2", "3.14%", "x86_64", "页"]
    pieces += ["é", "Ü", "ß", "ｆ", "Ｃ＋＋", "カ", "한", "🙂", "—", "\u3400", "\u9fe0", "\u00a0"]
    rng = random.Random(5)
    texts = ["".join(rng.choices(pieces, k=rng.randint(1, 12))) for _ in range(3000)]
    analyzer = create_analyzer(BM25_ANALYZER)
    cache_analysis(analyzer)
    stop = set(BM25_STOP_WORDS)
    for text in texts:
        words = [w.strip().lower() for w in jieba.cut_for_search(text) if w.strip()]
        assert analyzer.analyze(text) == [term_to_id(w) for w in words if w not in stop], text


@pytest.mark.parametrize("replace", [True, False])
def test_columnar_flush_builds_lites_own_table(tmp_path: Path, replace: bool) -> None:
    """Rows inserted in three calls, some replaced and some deleted in between (taken
    from the batches) or all live (the batches themselves): the table a flush writes is
    the one Lite's value-by-value code builds (values, order, schema)."""
    from milvus_lite.storage.memtable import MemTable

    from superbiz.retrieval._lite.ingest import _taken_rows
    from superbiz.retrieval.records import ChunkRecord
    from superbiz.retrieval.vector_store import MilvusChunkStore

    def records(doc: str, count: int, version: int) -> list[ChunkRecord]:
        rng = np.random.default_rng(version)
        return [
            chunk_record(
                doc,
                rng.standard_normal(8),
                f"第 {i} 段 text {version} " * (i + 1),
                index=i,
                title=f"{doc} v{version}",
                heading="Steps" if i % 2 else "",
                content_hash=f"h{version}",
                search_text=f"redis 连接池 {i} {version}",
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
        local = store._local_collection()
        assert local is not None
        memtable = local.collection._memtable
        rows = [(batch, row) for batch, row, _ in memtable._pk_index.values()]
        assert len(rows) == (6 if replace else 10)
        assert "_build_data_table" in vars(memtable)  # this store's memtable only
        assert "_build_data_table" in vars(MemTable)  # Lite's class keeps its own
        taken = _taken_rows(memtable, rows)
        assert taken is not None
        assert taken.equals(MemTable._build_data_table(memtable, rows), check_metadata=True)
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
    from superbiz.retrieval.vector_store import MilvusChunkStore

    rng = np.random.default_rng(7)
    records = [
        chunk_record(
            "a.md",
            rng.standard_normal(8),
            f"第 {i} 段 check the pool",
            index=i,
            title="Redis 连接池",
            heading="Steps" if i else "",
            search_text=f"redis 连接池 pool {i}",
        )
        for i in range(5)
    ]
    records += [
        dataclasses.replace(r, id=f"b.md#{r.chunk_index}", doc_path="b.md") for r in records[:2]
    ]
    read: list[list[Any]] = []
    states: list[dict[str, tuple[int, frozenset[str]]]] = []
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
            states.append(store.index_state(["a.md", "b.md", "missing.md"]))
            assert [h.id for h in store.search_bm25("连接池 pool", 5)][:1] == ["a.md#0"]
            if direct:
                too_long = dataclasses.replace(records[0], id="x" * 200)
                with pytest.raises(StoreError, match="Milvus at"):
                    store.insert([too_long])
        finally:
            store.close()
    assert read[0] == read[1]
    assert len(read[0]) == 5
    # what reconciliation compares: the same in process and through the client
    assert states[0] == states[1] == {"a.md": (5, frozenset("h")), "b.md": (2, frozenset("h"))}


def _chunks(doc: str, count: int) -> list[Any]:
    rng = np.random.default_rng(3)
    texts = ["Redis 连接池耗尽 pool exhausted", "支付回调超时 payment callback", "TiKV 扩容 leader"]
    return [
        chunk_record(
            doc,
            rng.standard_normal(8),
            texts[i % 3] + f" {i}",
            index=i,
            search_text=(texts[i % 3] + " ") * (1 + i % 4) + f"{i}",
        )
        for i in range(count)
    ]


def _bm25_hits(path: Path) -> tuple[Any, list[tuple[str, float]]]:
    from superbiz.retrieval.vector_store import MilvusChunkStore

    store = MilvusChunkStore(str(path), "chunks")
    try:
        store.ensure_collection(8)
        store.insert(_chunks("a.md", 12))
        store.flush()
        hits = [(h.id, h.score) for h in store.search_bm25("Redis 连接池 payment", 8)]
        return store._local_collection(), hits
    finally:
        store.close()


def test_a_vectorised_scorer_that_disagrees_with_lite_closes_the_gate_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As after a Lite upgrade that changed its BM25: the check when a store opens finds
    the vectorised scorer scoring otherwise, says so once, and stores use the pymilvus
    client with Lite's own scorer: the same hits as Lite ever gave."""
    from superbiz.retrieval._lite import checks
    from superbiz.retrieval.records import BM25_ANALYZER

    monkeypatch.setattr(checks, "_verdicts", {})
    gate, expected = _bm25_hits(tmp_path / "agreeing.db")
    assert gate is not None  # the check passed: in process, vectorised

    contributions = VectorizedBm25._contributions

    def skewed(self: Any, *postings: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        scored = contributions(self, *postings)
        return {t: (rows, w * (1.0 + rows)) for t, (rows, w) in scored.items()}

    monkeypatch.setattr(VectorizedBm25, "_contributions", skewed)
    monkeypatch.setattr(checks, "_verdicts", {})
    monkeypatch.setattr(checks, "_installation", lambda: "skewed-lite")  # its pass not kept
    with caplog.at_level("WARNING", logger="superbiz.retrieval._lite"):
        gates_and_hits = [_bm25_hits(tmp_path / f"disagreeing-{i}.db") for i in range(2)]
    for gate, hits in gates_and_hits:
        assert gate is None  # the public client only
        assert [h[0] for h in hits] == [h[0] for h in expected]
        assert [h[1] for h in hits] == pytest.approx([h[1] for h in expected])
    warnings = [r for r in caplog.records if r.name == "superbiz.retrieval._lite"]
    assert len(warnings) == 1 and "VectorizedBm25" in warnings[0].getMessage()
    assert "VectorizedBm25" in (checks.self_check(BM25_ANALYZER) or "")
    # the skew is real: scored by it, the hits would come in another order
    lite = SparseInvertedIndex()
    lite.build([{1: 1.0}, {1: 2.0}, {1: 1.0, 2: 3.0}])
    assert not np.array_equal(lite.search([{1: 1.0}], 3)[0], fast_search_ids(lite))


def fast_search_ids(lite: Any) -> np.ndarray:
    ids, _ = VectorizedBm25.from_index(lite).search([{1: 1.0}], 3)
    return ids


def test_a_failing_call_through_the_gate_is_done_by_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lite's internals changed under a running store: the search is answered through the
    client all the same, and the store stops using the gate."""
    from superbiz.retrieval._lite import InProcessLite
    from superbiz.retrieval.vector_store import MilvusChunkStore

    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    try:
        store.ensure_collection(8)
        store.insert(_chunks("a.md", 6))
        store.flush()
        expected = [h.id for h in store.search_bm25("Redis 连接池", 4)]
        assert store._local_collection() is not None

        def moved(*_: Any, **__: Any) -> Any:
            raise AttributeError("'Collection' object has no attribute '_segments_snapshot'")

        monkeypatch.setattr(InProcessLite, "search", moved)
        assert [h.id for h in store.search_bm25("Redis 连接池", 4)] == expected
        assert store._local_collection() is None
        assert [h.id for h in store.search_bm25("Redis 连接池", 4)] == expected
    finally:
        store.close()


def _both_searches(store: Any, gate: Any, domain: str | None) -> list[Any]:
    """Dense and BM25 hits through the live-row searches and through Lite's own."""
    from superbiz.retrieval._lite.search import collection_search, search_bm25, search_dense

    where = f'domain == "{domain}"' if domain else None
    out = []
    probe = np.random.default_rng(5).standard_normal(8).astype(np.float32).tolist()
    for limit in (4, 40):
        dense = (probe, "dense", "L2", limit, where, ["doc_path", "domain", "text"])
        bm25 = ("Redis 连接池 payment", "sparse", "BM25", limit, where, ["doc_path", "dense"])
        out.append((search_dense(gate.live, *dense), collection_search(gate.collection, *dense)))
        out.append((search_bm25(gate.live, *bm25), collection_search(gate.collection, *bm25)))
    return out


def _assert_same_hits(ours: list[dict[str, Any]], lites: list[dict[str, Any]]) -> None:
    """The same hits in the same order, their distances equal to float rounding: through a
    filter ours are brute force over the segment's rows where Lite walks its HNSW graph,
    and the two compute a distance in other orders (``_lite.search``)."""
    assert [(h["id"], h["entity"]) for h in ours] == [(h["id"], h["entity"]) for h in lites]
    assert [h["distance"] for h in ours] == pytest.approx(
        [h["distance"] for h in lites], rel=1e-5, abs=1e-5
    )


def _both_queries(gate: Any) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Rows queried through the live rows and through Lite's own query."""
    from superbiz.retrieval._lite.search import query_live

    out = []
    for expr in (None, 'doc_path in ["b.md", "a.md"]', 'domain == "db"', 'doc_path == "c.md"'):
        for fields in (["doc_path", "content_hash"], ["id", "text", "dense"]):
            for limit in (3, 100):
                ours = query_live(gate.live, expr, fields, limit)
                lites = gate.collection.query(expr=expr, output_fields=fields, limit=limit)
                out.append((ours, lites))
    return out


def test_live_row_searches_return_lites_hits_and_build_once_per_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents replaced (their chunk ids deleted and written again), deleted, left in
    Lite's memtable or flushed, searched and queried with and without a filter: the
    searches and queries over the kept live rows return exactly Lite's own hits and rows,
    and the rows are worked out once per change of the collection, not once per call.
    Over Lite's full-precision graph: over an 8-bit one Lite's own search reports the
    8-bit vectors' distances, ours the rows' own (the quantised graph's test below)."""
    from superbiz.retrieval import milvus_schema
    from superbiz.retrieval.vector_store import MilvusChunkStore

    monkeypatch.setattr(milvus_schema, "LITE_DENSE_INDEX", {"index_type": "AUTOINDEX"})
    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    try:
        store.ensure_collection(8)
        # b.md's vectors apart from a.md's (``_chunks`` draws the same ones for every
        # document): a tie cut at the limit may fall either way between brute force and HNSW
        other = [
            dataclasses.replace(c, domain="db", vector=c.vector + 0.25) for c in _chunks("b.md", 7)
        ]
        steps: list[Any] = [
            lambda: store.insert(_chunks("a.md", 12) + other),
            store.flush,
            lambda: store.replace_document("a.md", _chunks("a.md", 9)),  # in the memtable
            lambda: store.delete_documents(["b.md"]),
            store.flush,
            lambda: store.replace_document("b.md", other[:3]),
        ]
        gate = None
        for step in steps:
            step()
            gate = gate or store._local_collection()
            assert gate is not None and gate.live is not None
            views = gate.live.views
            for domain in (None, "ops", "db"):
                for ours, lites in _both_searches(store, gate, domain):
                    _assert_same_hits(ours, lites)
            queried = _both_queries(gate)
            assert all(ours == lites for ours, lites in queried)
            assert any(lites for _, lites in queried)
            assert gate.live.views == views + 1  # one view for the searches and queries
        assert gate is not None
        every = store.search_dense(np.ones(8, dtype=np.float32), 40)
        assert sorted(h.doc_path for h in every) == ["a.md"] * 9 + ["b.md"] * 3  # newest only
    finally:
        store.close()


def test_a_live_row_query_that_disagrees_with_lite_closes_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query over the live rows that loses one row (as after a Lite upgrade) is found by
    the check before any store uses it."""
    from superbiz.retrieval._lite import checks

    query_live = checks.query_live

    def loses_the_last(*args: Any) -> list[dict[str, Any]]:
        return query_live(*args)[:-1]

    monkeypatch.setattr(checks, "query_live", loses_the_last)
    monkeypatch.setattr(checks, "_search_verdict", [])
    monkeypatch.setattr(checks, "_installation", lambda: "another-lite")  # not passed yet
    problem = checks.search_check()
    assert problem is not None and problem.startswith("a query differs after step 0")


def test_a_live_row_search_that_disagrees_with_lite_leaves_searches_to_lite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As after a Lite upgrade that changed which rows count: the check when a store
    opens finds the live-row searches returning other hits, says so once, and searches
    go through Lite's own code (the same hits as Lite gives)."""
    from superbiz.retrieval._lite import checks, live_rows
    from superbiz.retrieval.vector_store import MilvusChunkStore

    by_key = live_rows._View._by_key

    def forgets_deletes(self: Any, seg: Any) -> tuple[np.ndarray, np.ndarray]:
        self._deleted = {}
        return by_key(self, seg)

    monkeypatch.setattr(live_rows._View, "_by_key", forgets_deletes)
    monkeypatch.setattr(checks, "_search_verdict", [])
    monkeypatch.setattr(checks, "_installation", lambda: "another-lite")  # not passed yet
    results = []
    with caplog.at_level("WARNING", logger="superbiz.retrieval._lite"):
        for name in ("one", "two"):
            store = MilvusChunkStore(str(tmp_path / f"{name}.db"), "chunks")
            try:
                store.ensure_collection(8)
                store.insert(_chunks("a.md", 12))
                store.flush()
                store.replace_document("a.md", _chunks("a.md", 5))
                store.flush()
                gate = store._local_collection()
                assert gate is not None and gate.live is None  # Lite's own searches
                results.append([h.id for h in store.search_bm25("Redis 连接池 payment", 20)])
            finally:
                store.close()
    # the deleted chunks a.md#5… stay out, as Lite leaves them out
    assert results[0] == results[1] == ["a.md#3", "a.md#0", "a.md#1", "a.md#4"]
    warnings = [r for r in caplog.records if r.name == "superbiz.retrieval._lite"]
    assert len(warnings) == 1 and "live-row" in warnings[0].getMessage()


def test_vectorized_bm25_cuts_ties_at_the_k_th_score_as_its_whole_ranking_does() -> None:
    """Only the rows reaching the k-th score are sorted; among rows tied at it the first
    rows still win, as in the whole ranking (and in Lite's stable sort)."""
    rng = np.random.default_rng(7)
    corpus = [{int(t): 1.0} for t in rng.integers(0, 3, size=200)]  # three scores, many ties
    lite = SparseInvertedIndex(k1=1.2, b=0.0)
    lite.build(corpus)
    fast = VectorizedBm25.from_index(lite)
    queries = [{0: 1.0, 1: 0.5}, {2: 1.0}, {0: 1.0, 1: 1.0, 2: 1.0}]
    whole_ids, whole_distances = fast.search(queries, len(corpus))
    for k in (1, 15, 70, 199):
        ids, distances = fast.search(queries, k)
        assert (ids == whole_ids[:, :k]).all()
        assert (distances == whole_distances[:, :k]).all()


@pytest.mark.parametrize("segments", [1, 3])
def test_a_dense_search_is_exact_whatever_the_chunks_ids(tmp_path: Path, segments: int) -> None:
    """A lookup searched a segment's HNSW graph (through an id selector when scoped to a
    domain), which misses neighbours, and which ones depended on the graph, so on the
    chunks' ids: a new reader version (every id new, no text changed) moved 94 of dev's 476
    lookups. Over up to ``EXACT_ROWS`` rows, in one segment or several, it is brute force:
    the hits are the exact nearest rows, of the domain or of all, for any ids."""
    from superbiz.retrieval.vector_store import MilvusChunkStore

    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((3000, 32)).astype(np.float32)
    domains = ["ops" if i % 4 == 0 else "db" for i in range(len(vectors))]
    probes = rng.standard_normal((20, 32)).astype(np.float32)
    for salt in ("v8", "v9"):
        store = MilvusChunkStore(str(tmp_path / f"{salt}.db"), "chunks")
        try:
            store.ensure_collection(32)
            records = _one_chunk_documents(vectors, salt, domains)
            for part in np.array_split(np.arange(len(records)), segments):
                store.insert([records[i] for i in part])
                store.flush()
            gate = store._local_collection()
            assert gate is not None
            flushed = _segments_of(gate)
            assert len(flushed) == segments and all(seg.indexes for seg in flushed)
            for domain in ("ops", None):
                rows = np.flatnonzero([domain in (None, d) for d in domains])
                for probe in probes:
                    hits = store.search_dense(probe, 15, domain=domain)
                    nearest = rows[np.argsort(((vectors[rows] - probe) ** 2).sum(axis=1))[:15]]
                    assert [h.doc_path for h in hits] == [f"d{i}.md" for i in nearest]
        finally:
            store.close()


def _one_chunk_documents(vectors: np.ndarray, salt: str, domains: list[str]) -> list[Any]:
    """Document ``d<i>.md`` in ``domains[i]``: one chunk, ``vectors[i]``."""
    return [
        chunk_record(
            f"d{i}.md",
            vector,
            f"chunk {i}",
            domain=domains[i],
            title=f"d{i}",
            content_hash=salt,
            chunk_id=f"{salt}:{i}",
        )
        for i, vector in enumerate(vectors)
    ]


def test_a_lite_files_graph_holds_a_byte_per_dimension_and_finds_the_nearest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lite keeps every vector in its tables; its default graph (``AUTOINDEX``: faiss
    ``IndexHNSWFlat``) kept a second float copy, 421 of a 50,000-document KB's 2,418 MB.
    A Lite file's graph holds 8-bit vectors (``HNSW_SQ``), and a search that walks it (past
    ``EXACT_ROWS``; here every search) still finds the nearest rows."""
    import faiss

    from superbiz.retrieval._lite import search
    from superbiz.retrieval.vector_store import MilvusChunkStore

    rng = np.random.default_rng(36)
    vectors = rng.standard_normal((3000, 256)).astype(np.float32)
    probes = vectors[:40] + 0.3 * rng.standard_normal((40, 256)).astype(np.float32)
    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    try:
        store.ensure_collection(256)
        assert store._client.describe_index("chunks", "dense")["index_type"] == "HNSW_SQ"
        store.insert(_one_chunk_documents(vectors, "v", ["ops"] * len(vectors)))
        store.flush()
        gate = store._local_collection()
        assert gate is not None
        (segment,) = _segments_of(gate)
        graph = segment.indexes["dense"]
        assert graph.index_type == "HNSW_SQ"
        assert faiss.serialize_index(graph._index).nbytes < vectors.nbytes / 2
        monkeypatch.setattr(search, "EXACT_ROWS", 0)
        assert search.exact_segments([(len(vectors), True)]) == [False]
        found = 0
        for probe in probes:
            hits = store.search_dense(probe, 10)
            squared = ((vectors - probe) ** 2).sum(axis=1)
            exact = np.argsort(squared)[:10]
            found += len({h.doc_path for h in hits} & {f"d{i}.md" for i in exact})
            # each hit's distance is its float vector's, not its 8-bit vector's
            rows = [int(h.doc_path[1:-3]) for h in hits]
            assert [h.score for h in hits] == pytest.approx(squared[rows].tolist(), rel=1e-4)
            assert [h.score for h in hits] == sorted(h.score for h in hits)
        assert found >= 0.9 * 10 * len(probes)
    finally:
        store.close()


@pytest.mark.parametrize("kept", [0.95, 0.5, 0.01])
def test_a_filtered_graph_search_hands_faiss_a_bitmap_and_finds_lites_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: float
) -> None:
    """A search through a filter past ``EXACT_ROWS`` (a restricted reader, a large
    domain) walks each graph among the rows the filter admits. Lite hands faiss their row
    numbers, put in a hash set on every search (1.7 ms of a 33,314-row segment's search,
    0.27 unfiltered); the gate hands it the mask as a bitmap, and the hits are Lite's."""
    import faiss

    from superbiz.retrieval._lite import search
    from superbiz.retrieval.vector_store import MilvusChunkStore
    from superbiz.retrieval.visibility import Visibility

    rng = np.random.default_rng(35)
    vectors = rng.standard_normal((2000, 64)).astype(np.float32)
    domains = ["ops" if rng.random() < kept else "hr" for _ in vectors]
    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    try:
        store.ensure_collection(64)
        store.insert(_one_chunk_documents(vectors, "v", domains))
        store.flush()
        reader = Visibility(frozenset(), frozenset({"hr"}), frozenset(), False)
        store.search_dense(vectors[0], 10, None, reader)  # the gate's checks, on the budget
        monkeypatch.setattr(search, "EXACT_ROWS", 0)
        bitmaps = []
        selector = faiss.IDSelectorBitmap
        monkeypatch.setattr(faiss, "IDSelectorBitmap", lambda *a: bitmaps.append(a) or selector(*a))
        ours = [store.search_dense(probe, 10, None, reader) for probe in vectors[:20] + 0.2]
        assert len(bitmaps) == 20
        monkeypatch.setattr(search, "graph_search", lambda index, q, k, a: index.search(q, k, a))
        lites = [store.search_dense(probe, 10, None, reader) for probe in vectors[:20] + 0.2]
    finally:
        store.close()
    assert [[h.id for h in hits] for hits in ours] == [[h.id for h in hits] for hits in lites]
    assert all(h.domain == "ops" for hits in ours for h in hits)
    assert [h.score for hits in ours for h in hits] == pytest.approx(
        [h.score for hits in lites for h in hits], rel=1e-5
    )


def test_the_search_check_compares_the_bitmap_with_lites_own_filtered_graph_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bitmap packed in the other bit order admits other rows: the check says so."""
    from superbiz.retrieval._lite import checks, graphs

    assert checks._graph_disagreement() is None
    packbits = np.packbits
    monkeypatch.setattr(
        graphs.np, "packbits", lambda mask, bitorder="little": packbits(mask, bitorder="big")
    )
    assert "a filtered graph search differs" in (checks._graph_disagreement() or "")


@pytest.mark.parametrize(
    ("segments", "exact"),
    [
        ([(4_000, True), (6_000, True)], [True, True]),  # the budget reached exactly
        ([(2_062, True), (8_219, True)], [False, False]),  # past it: every graph walked
        ([(12_000, True), (3_000, True), (8_000, True)], [False, False, False]),
        ([(11_000, True), (500, False), (9_000, True)], [False, True, False]),
        ([(10_001, True)], [False]),
        ([], []),
    ],
)
def test_a_dense_search_is_exact_up_to_the_budget_and_walks_the_graphs_past_it(
    segments: list[tuple[int, bool]], exact: list[bool]
) -> None:
    """Each segment of up to ``EXACT_ROWS`` rows was read exactly, so a knowledge base
    Lite had split into three segments of 8,000 read 24,000 rows by brute force on every
    lookup, from memory (at 11,925 documents p50 10.6 ms); then the smallest segments up
    to the budget (9.4 ms); now a search over more rows than the budget walks every graph
    (7.5 → 5.9 ms, recall the same). A segment without a graph is read exactly whatever
    its size."""
    from superbiz.retrieval._lite.search import EXACT_ROWS, exact_segments

    assert EXACT_ROWS == 10_000
    assert exact_segments(segments) == exact


def _segments_of(gate: Any) -> list[Any]:
    return list(gate.live.view().segments)


@pytest.mark.parametrize("kept", [1.0, 0.9, 0.1, 0.0005])
def test_the_exact_search_finds_lites_brute_force_neighbours_under_any_filter(
    kept: float,
) -> None:
    """All rows, most of them (read in place, the rest set to infinity) and a few (copied
    out): the rows and distances of Lite's own brute force, to float rounding."""
    from milvus_lite.index.brute_force import BruteForceIndex

    from superbiz.retrieval._lite.search import nearest, squared_norms

    rng = np.random.default_rng(36)
    vectors = rng.standard_normal((3000, 64)).astype(np.float32)
    query = rng.standard_normal((1, 64)).astype(np.float32)
    admitted = None if kept == 1.0 else rng.random(3000) < kept
    ids, distances = nearest(vectors, query, "L2", 15, admitted, squared_norms(vectors))
    lite_ids, lite_distances = BruteForceIndex.build(vectors, "L2").search(
        query, 15, valid_mask=admitted
    )
    assert ids.tolist() == lite_ids.tolist()
    finite = np.isfinite(lite_distances)
    assert np.allclose(distances[finite], lite_distances[finite], rtol=1e-4, atol=1e-4)
    assert np.isinf(distances[~finite]).all()


def test_a_segments_squared_norms_are_worked_out_once_while_it_lives() -> None:
    from superbiz.retrieval._lite import search

    vectors = np.arange(12, dtype=np.float32).reshape(4, 3)
    first = search.squared_norms(vectors)
    assert first.tolist() == [5.0, 50.0, 149.0, 302.0]
    assert search.squared_norms(vectors) is first
    assert search.squared_norms(vectors.copy()) is not first  # another array, its own
    key = id(vectors)
    del vectors
    assert key not in search._NORMS._kept  # let go with its array


def test_a_passed_search_check_is_kept_for_the_next_process_of_the_same_lite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It took 0.5 s of every ``superbiz ask``: a pass is kept per installation (Lite's
    files, the gate's source), never from a folder others could write, never with
    keeping off, and a check that finds a difference keeps nothing."""
    from superbiz.retrieval._lite import checks

    monkeypatch.setenv("SUPERBIZ_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(checks, "_search_verdict", [])
    assert checks.search_check() is None
    [marker] = (tmp_path / "cache").glob("lite-search-check-*.passed")

    def runs() -> str:
        return "the check ran"

    monkeypatch.setattr(checks, "_search_disagreement", runs)
    monkeypatch.setattr(checks, "_search_verdict", [])
    assert checks.search_check() is None  # the next process: passed before
    (tmp_path / "cache").chmod(0o777)
    monkeypatch.setattr(checks, "_search_verdict", [])
    assert checks.search_check() == "the check ran"  # a marker anyone could have left
    (tmp_path / "cache").chmod(0o700)
    monkeypatch.setattr(checks, "_installation", lambda: "another-lite")
    monkeypatch.setattr(checks, "_search_verdict", [])
    assert checks.search_check() == "the check ran"  # an upgraded Lite is checked
    assert list((tmp_path / "cache").glob("*another-lite*")) == []  # and keeps no pass
    monkeypatch.setenv("SUPERBIZ_MODEL_CACHE", "")
    monkeypatch.setattr(checks, "_search_verdict", [])
    assert checks.search_check() == "the check ran"
    assert marker.is_file()


def test_the_self_checks_pass_is_kept_per_analyzer_and_installation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its Lite analysis loaded jieba's dictionary, 0.8 s of an ingest that found every
    file unchanged: a pass is kept as the search check's is, one per analyzer."""
    from superbiz.retrieval._lite import checks
    from superbiz.retrieval.records import BM25_ANALYZER

    monkeypatch.setenv("SUPERBIZ_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(checks, "_verdicts", {})
    assert checks.self_check(BM25_ANALYZER) is None
    [marker] = (tmp_path / "cache").glob("lite-self-*-check-*.passed")

    def runs(analyzer: dict[str, Any] | None) -> str:
        return f"the check ran for {analyzer}"

    monkeypatch.setattr(checks, "_disagreement", runs)
    monkeypatch.setattr(checks, "_verdicts", {})
    assert checks.self_check(BM25_ANALYZER) is None  # the next process: passed before
    other = {**BM25_ANALYZER, "filter": ["lowercase"]}
    assert checks.self_check(other) == f"the check ran for {other}"  # another analyzer
    monkeypatch.setattr(checks, "_installation", lambda: "another-jieba")
    monkeypatch.setattr(checks, "_verdicts", {})
    assert checks.self_check(BM25_ANALYZER) is not None  # an upgraded jieba is checked
    assert list((tmp_path / "cache").glob("*another-jieba*")) == []  # and keeps no pass
    assert marker.is_file()


def test_the_insert_and_compaction_checks_passes_are_kept_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ingest process ran both (the insert check's Lite analysis loaded jieba's
    dictionary, 0.55 s of an English knowledge base's ingest); a pass is kept as the
    search check's is."""
    from superbiz.retrieval._lite import checks, compaction, insert

    monkeypatch.setenv("SUPERBIZ_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(insert, "_verdict", [])
    monkeypatch.setattr(compaction, "_verdict", [])
    assert insert.insert_check() is None and compaction.compaction_check() is None
    assert len(list((tmp_path / "cache").glob("lite-*-check-*.passed"))) == 2
    ran: list[str] = []

    def runs() -> str:
        ran.append("the check")
        return "the check ran"

    for name in ("insert", "compaction"):  # the next process
        assert checks.verdict_once([], runs, "%s", kept=name) is None
    assert ran == []
    assert checks.verdict_once([], runs, "%s", kept="failing") == "the check ran"
    assert not list((tmp_path / "cache").glob("lite-failing-check-*"))


def test_what_a_projection_reads_of_a_table_is_kept_while_the_table_lives() -> None:
    """A search reads a few rows of each segment: the columns it reads are worked out
    once per table, and forgotten with it (segments come and go with every compaction
    of a serving process)."""
    import gc
    from functools import partial

    import pyarrow as pa

    from superbiz.retrieval._lite.projection import WhileAlive

    kept: WhileAlive[list[str]] = WhileAlive()
    made: list[str] = []

    def names(table: pa.Table) -> list[str]:
        made.append("x")
        return list(table.column_names)

    first = pa.table({"a": [1], "b": [2]})
    assert kept.get(first, partial(names, first)) == ["a", "b"]
    assert kept.get(first, partial(names, first)) == ["a", "b"] and len(made) == 1
    second = pa.table({"c": [3]})
    assert kept.get(second, partial(names, second)) == ["c"] and len(made) == 2
    del first
    gc.collect()
    assert len(kept._kept) == 1  # the first table's entry went with it
