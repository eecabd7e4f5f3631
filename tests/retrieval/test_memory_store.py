"""The ChunkStore contract, checked on InMemoryChunkStore and on MilvusChunkStore (Lite)
alike: squared-L2 dense scores, BM25 over analysed tokens, domain filters,
per-document writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fakes.records import chunk_record
from superbiz.exceptions import IndexMismatchError
from superbiz.retrieval.memory_store import InMemoryChunkStore, bm25_tokens
from superbiz.retrieval.records import DENSE_METRIC, ChunkRecord
from superbiz.retrieval.relevance import similarity_from_score
from superbiz.retrieval.store import ChunkStore
from superbiz.retrieval.vector_store import MilvusChunkStore


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def record(doc: str, index: int, text: str, vector: np.ndarray, domain: str = "ops") -> ChunkRecord:
    return chunk_record(doc, vector, text, index=index, domain=domain, content_hash=f"h{index}")


@pytest.fixture(params=["memory", "milvus-lite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ChunkStore]:
    store: ChunkStore
    if request.param == "memory":
        store = InMemoryChunkStore()
    else:
        store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    store.ensure_collection(3)
    store.replace_document(
        "ops/redis.md",
        [
            record("ops/redis.md", 1, "Redis connection pool exhausted", unit(1, 0, 0)),
            record("ops/redis.md", 0, "Check the maxTotal setting", unit(1, 1, 0)),
        ],
    )
    store.replace_document(
        "api/limit.md",
        [record("api/limit.md", 0, "Rate limit quota per tenant", unit(0, 1, 0), "api")],
    )
    store.flush()
    yield store
    store.close()


def test_dense_scores_are_squared_l2_so_the_cosine_is_exact(store: ChunkStore) -> None:
    query = unit(1, 0.2, 0)
    hits = store.search_dense(query, 10)
    assert [h.id for h in hits] == ["ops/redis.md#1", "ops/redis.md#0", "api/limit.md#0"]
    vectors = {
        c.id: c.vector for doc in ("ops/redis.md", "api/limit.md") for c in store.chunks_of(doc)
    }
    for hit in hits:
        cosine = float(np.dot(query, vectors[hit.id]))
        assert similarity_from_score(hit.score, DENSE_METRIC) == pytest.approx(cosine, abs=1e-6)


def test_searches_honour_limit_and_domain(store: ChunkStore) -> None:
    assert len(store.search_dense(unit(1, 0, 0), 1)) == 1
    assert {h.domain for h in store.search_dense(unit(1, 0, 0), 10, "api")} == {"api"}
    assert store.search_bm25("redis quota", 10, "api")[0].doc_path == "api/limit.md"
    assert store.search_dense(unit(1, 0, 0), 10, "payment") == []


def test_bm25_ranks_by_matched_terms_and_ignores_stop_words(store: ChunkStore) -> None:
    hits = store.search_bm25("the redis connection pool", 10)
    assert [h.id for h in hits] == ["ops/redis.md#1"]
    assert abs(hits[0].score) > 0 and hits[0].vector is not None  # Lite negates BM25
    assert store.search_bm25("the of and", 10) == []
    assert store.search_bm25("   ", 10) == []


def test_bm25_tokens_follow_the_milvus_analyzer() -> None:
    assert bm25_tokens("The Redis 连接池耗尽了!") == ["redis", "连接池", "耗尽"]


def test_replace_delete_and_index_state(store: ChunkStore) -> None:
    assert store.index_state(["ops/redis.md", "missing.md"]) == {
        "ops/redis.md": (2, frozenset({"h0", "h1"}))
    }
    assert [c.chunk_index for c in store.chunks_of("ops/redis.md")] == [0, 1]
    store.replace_document("ops/redis.md", [record("ops/redis.md", 0, "Replaced", unit(0, 0, 1))])
    store.flush()
    assert [c.text for c in store.chunks_of("ops/redis.md")] == ["Replaced"]
    assert store.search_bm25("exhausted", 10) == []
    assert store.index_state(None) == {
        "ops/redis.md": (1, frozenset({"h0"})),
        "api/limit.md": (1, frozenset({"h0"})),
    }
    store.delete_documents(["ops/redis.md"])
    store.flush()
    assert store.chunks_of("ops/redis.md") == []
    store.delete_documents(["api/limit.md"])
    store.flush()
    assert store.search_dense(unit(0, 1, 0), 10) == []


@pytest.mark.parametrize("many", [False, True])
def test_deleting_documents_takes_their_chunks_written_or_waiting_and_no_others(
    store: ChunkStore, many: bool
) -> None:
    """A few documents (an upload's delete: on Lite by id, read in process) or more than a
    query names (by filter): flushed chunks and chunks still in memory go, nothing else."""
    others = [f"bulk/{n}.md" for n in range(250 if many else 3)]
    for n, path in enumerate(others):
        store.replace_document(path, [record(path, 0, f"bulk page {n}", unit(1, 0, n % 3))])
    store.flush()
    store.replace_document("ops/new.md", [record("ops/new.md", 0, "Waiting", unit(0, 0, 1))])
    store.delete_documents([*others[1:], "ops/redis.md", "ops/new.md", "nowhere.md"])
    store.flush()

    assert set(store.index_state(None)) == {others[0], "api/limit.md"}
    assert store.chunks_of("ops/new.md") == [] and store.search_bm25("redis", 10) == []


def test_a_few_documents_are_deleted_from_lite_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lite's delete by filter walks every row in Python (0.5–1.4 s a call at 50,000
    documents): a few documents' chunks go by their ids instead, in process."""
    from superbiz.retrieval._lite import InProcessLite

    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    store.ensure_collection(3)
    store.replace_document("ops/redis.md", [record("ops/redis.md", 0, "Redis", unit(1, 0, 0))])
    deletes: list[list[str]] = []
    gate_delete = InProcessLite.delete

    def delete(gate: InProcessLite, ids: list[str]) -> None:
        deletes.append(ids)
        gate_delete(gate, ids)

    monkeypatch.setattr(InProcessLite, "delete", delete)
    store._client.delete = lambda *a, **kw: pytest.fail("deleted through the client")  # type: ignore[method-assign]
    try:
        store.delete_documents(["ops/redis.md"])
        assert deletes == [["ops/redis.md#0"]]
        assert store.index_state(None) == {}
    finally:
        store.close()


def test_dimension_is_checked_and_drop_resets(store: ChunkStore) -> None:
    with pytest.raises(IndexMismatchError):
        store.ensure_collection(4)
    store.drop()
    assert store.dimension is None and store.search_dense(unit(1, 0, 0), 10) == []
    store.ensure_collection(4)
    assert store.dimension == 4


def test_a_new_version_goes_in_beside_the_old_and_the_old_goes_by_id(store: ChunkStore) -> None:
    """How an update swaps versions: insert the new chunks, then delete the old ids."""
    old = store.chunk_ids(["ops/redis.md", "api/limit.md", "none.md"])
    assert old == {
        "ops/redis.md": {"ops/redis.md#0", "ops/redis.md#1"},
        "api/limit.md": {"api/limit.md#0"},
    }
    new = record("ops/redis.md", 0, "Raise the pool size", unit(1, 0, 1))
    store.insert([dataclasses.replace(new, id="ops/redis.md#v2-0", content_hash="v2")])
    assert len(store.chunks_of("ops/redis.md")) == 3  # both versions are found meanwhile
    store.delete_chunks(old["ops/redis.md"])
    assert [hit.id for hit in store.chunks_of("ops/redis.md")] == ["ops/redis.md#v2-0"]
    assert [hit.id for hit in store.chunks_of("api/limit.md")] == ["api/limit.md#0"]
