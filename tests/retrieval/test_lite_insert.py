"""Milvus Lite's insert for rows whose vector is a float32 array: Lite's own steps, the
vector column made in Arrow, what lands the same as through Lite's own insert."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fakes.records import chunk_record
from superbiz.retrieval._lite import insert


def _rows(count: int, dim: int = 8) -> list[Any]:
    rng = np.random.default_rng(count)
    texts = ["支付回调超时 payment timeout", "Redis 连接池耗尽 redis pool", "", "TiKV 扩容"]
    return [
        chunk_record(f"d{i % 3}.md", rng.standard_normal(dim), texts[i % 4], index=i)
        for i in range(count)
    ]


def _stored(store: Any) -> list[tuple[Any, ...]]:
    fields = ["doc_path", "chunk_index", "text", "search_text", "dense"]
    rows = store._client.query(store.collection, filter='id != ""', output_fields=fields)
    return sorted(
        (r["doc_path"], r["chunk_index"], r["text"], r["search_text"], tuple(r["dense"]))
        for r in rows
    )


def test_a_stores_rows_land_as_through_lites_own_insert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same chunks written to two Lite stores, one through ``insert_columns`` and one
    through Lite's own insert: the same rows, vectors, BM25 hits and dense hits, before
    and after the flush."""
    from superbiz.retrieval.vector_store import MilvusChunkStore

    monkeypatch.setattr(insert, "_verdict", [])
    assert insert.insert_check() is None
    chunks = _rows(40)
    found = []
    for columns in (True, False):
        monkeypatch.setattr(insert, "_verdict", [None] if columns else ["off for this store"])
        calls: list[int] = []
        monkeypatch.setattr(
            insert,
            "_wal_batch",
            lambda *args, own=insert._wal_batch, calls=calls: calls.append(1) or own(*args),
        )
        store = MilvusChunkStore(str(tmp_path / f"{columns}.db"), "chunks")
        try:
            store.ensure_collection(8)
            store.insert(chunks)
            assert bool(calls) is columns
            before = _stored(store)
            store.flush()
            after = _stored(store)
            lexical = store.search_bm25("redis pool", 5)
            dense = store.search_dense(chunks[7].vector, 3)
            found.append((before, after, [(h.id, h.score) for h in [*lexical, *dense]]))
        finally:
            store.close()
    assert found[0] == found[1]
    assert len(found[0][1]) == 40
    assert np.allclose(found[0][1][0][4], chunks[0].vector.astype(np.float32))


def test_a_bad_row_is_refused_by_lites_rules_and_nothing_lands(tmp_path: Path) -> None:
    """Every field but the vector is validated by Lite's own ``validate_record``: a key
    longer than its field refuses the whole batch before anything is written."""
    from milvus_lite.exceptions import SchemaValidationError

    collection = _collection(tmp_path)
    try:
        rows = [_row("r0"), _row("r" * 100)]
        with pytest.raises(SchemaValidationError, match="max_length"):
            insert.insert_columns(collection, rows)
        assert collection._next_seq == 1 and not collection._memtable._insert_batches
        assert insert.insert_columns(collection, [_row("r0")]) == ["r0"]
    finally:
        collection.close()


@pytest.mark.parametrize(
    "vector",
    [
        [0.5, 1.0, 2.0],  # a list: Lite's own insert checks each value
        np.array([0.5, 1.0], dtype=np.float32),  # too short
        np.array([0.5, 1.0, 2.0]),  # float64
        np.array(["0.5", "1", "2"]),
    ],
)
def test_a_vector_not_of_the_fields_shape_is_left_to_lites_own_insert(
    tmp_path: Path, vector: Any
) -> None:
    collection = _collection(tmp_path)
    try:
        assert insert.insert_columns(collection, [_row("r0", vector)]) is None
        assert collection._next_seq == 1 and not collection._memtable._insert_batches
    finally:
        collection.close()


def test_a_check_that_finds_another_batch_keeps_lites_insert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As after a Lite upgrade that lays its batches out otherwise: the check says so once,
    and a store's rows still land, through Lite's own insert."""
    from superbiz.retrieval._lite import checks
    from superbiz.retrieval.vector_store import MilvusChunkStore

    own = insert._wal_batch
    monkeypatch.setattr(insert, "_verdict", [])
    monkeypatch.setattr(checks, "_installation", lambda: "another-lite")  # not passed yet
    monkeypatch.setattr(
        insert, "_wal_batch", lambda c, r, v, m, p, first: own(c, r, v, m, p, first + 1)
    )
    store = MilvusChunkStore(str(tmp_path / "kb.db"), "chunks")
    try:
        store.ensure_collection(8)
        with caplog.at_level("WARNING", logger="superbiz.retrieval._lite"):
            store.insert(_rows(11)[:5])
            store.insert(_rows(11)[5:])
        assert len(_stored(store)) == 11
    finally:
        store.close()
    assert [r.getMessage() for r in caplog.records] == [
        "Milvus Lite inserts as written for another version (another write-ahead batch "
        "for the same rows); its own insert is used"
    ]


def _collection(folder: Path) -> Any:
    from milvus_lite.engine.collection import Collection
    from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema

    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=16),
            FieldSchema("dense", DataType.FLOAT_VECTOR, dim=3),
        ]
    )
    return Collection("c", str(folder / "c"), schema)


def _row(key: str, vector: Any = None) -> dict[str, Any]:
    dense = np.array([0.5, 1.0, 2.0], dtype=np.float32) if vector is None else vector
    return {"id": key, "dense": dense}
