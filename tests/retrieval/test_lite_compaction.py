"""Milvus Lite's compaction in a writer's store: one output segment copied at a time,
leaving the files Lite's own compaction leaves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fakes.records import chunk_record
from superbiz.retrieval._lite import checks, compaction


def _version(doc: str, count: int, version: int) -> list[Any]:
    """``count`` chunks of ``doc`` as written by its ``version``-th edit."""
    rng = np.random.default_rng(version)
    text = f"{doc} chunk {{}} of edit {version}"
    return [
        chunk_record(
            doc, rng.standard_normal(8), text.format(i), index=i, content_hash=f"v{version}"
        )
        for i in range(count)
    ]


def _edits(store: Any, *, edited: bool) -> dict[str, str]:
    """Six flushes of four documents each, written, edited (fewer chunks, more) and
    deleted (``edited``), else all new; the content hash each live document's chunks must
    carry at the end."""
    expected: dict[str, str] = {}
    for edit in range(6):
        first = edit if edited else 4 * edit
        for number in range(first, first + 4):
            doc = f"d{number}.md"
            store.replace_document(doc, _version(doc, 2 + (number + edit) % 4, edit))
            expected[doc] = f"v{edit}"
        if edited:
            gone = f"d{edit // 2}.md"
            store.delete_documents([gone])
            expected.pop(gone, None)
        store.flush()
    return expected


def _live_rows(store: Any) -> list[tuple[str, str, str]]:
    rows = store._client.query(
        store.collection, filter='id != ""', output_fields=["doc_path", "content_hash", "text"]
    )
    return sorted((r["doc_path"], r["content_hash"], r["text"]) for r in rows)


@pytest.mark.parametrize(("edited", "segment_rows"), [(True, None), (False, 30)])
def test_a_writers_store_compacts_leanly_and_keeps_each_documents_last_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: bool, segment_rows: int | None
) -> None:
    """Documents written, edited and deleted over six flushes: Lite compacts (fewer data
    files than flushes), through ``lean_compact`` in the writer's store, and every
    document holds its last edit's chunks and nothing else, the same rows in the same
    files as in a store left to Lite's own compaction; also where a compaction's rows
    make several segments (``segment_rows``: 100,000 in Lite; here 56 new rows, 30 a
    segment)."""
    import milvus_lite.constants
    import milvus_lite.engine.compaction
    import pyarrow.parquet as pq

    from superbiz.retrieval.vector_store import MilvusChunkStore

    monkeypatch.setattr(compaction, "_verdict", [])
    assert compaction.compaction_check() is None  # with Lite's own segment size
    if segment_rows is not None:
        monkeypatch.setattr(milvus_lite.constants, "MAX_SEGMENT_ROWS", segment_rows)
        monkeypatch.setattr(milvus_lite.engine.compaction, "MAX_SEGMENT_ROWS", segment_rows)
    found = []
    for lean in (True, False):
        monkeypatch.setattr(compaction, "_verdict", [None] if lean else ["off for this store"])
        store = MilvusChunkStore(str(tmp_path / f"{lean}.db"), "chunks")
        try:
            store.ensure_collection(8)
            expected = _edits(store, edited=edited)
            gate = store._local_collection()
            assert gate is not None
            gate.wait_for_index_build()
            manager = gate.collection._compaction_mgr
            assert ("_compact_files" in vars(manager)) is lean
            files = gate.collection._manifest.get_all_data_files()["_default"]
            assert len(files) < 6
            folder = Path(gate.collection._data_dir, "partitions", "_default")
            sizes = [pq.ParquetFile(folder / name).metadata.num_rows for name in files]
            assert segment_rows is None or max(sizes) == segment_rows
            rows = _live_rows(store)
            assert {doc: edit for doc, edit, _ in rows} == expected
            assert all(f" of edit {edit[1:]}" in text for _, edit, text in rows)
            found.append((sorted(files), rows))
        finally:
            store.close()
    assert found[0] == found[1]


def test_a_compaction_that_would_leave_other_rows_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As after a Lite upgrade that changed what a compaction keeps: the check finds other
    rows in the files, says so once, and collections keep Lite's own compaction."""

    def every_version(keys: Any, is_deleted: Any) -> Any:
        import pyarrow as pa

        return pa.array(range(keys.num_rows), type=pa.uint64())

    monkeypatch.setattr(compaction, "surviving_rows", every_version)
    monkeypatch.setattr(compaction, "_verdict", [])
    monkeypatch.setattr(checks, "_installation", lambda: "another-lite")  # not passed yet

    class Manager:
        def __init__(self) -> None:
            self.compacted: list[str] = []

        def _compact_files(self, partition: str) -> None:  # Lite's own
            self.compacted.append(partition)

    class Collection:
        _compaction_mgr = Manager()

    collection = Collection()
    manager = collection._compaction_mgr
    with caplog.at_level("WARNING", logger="superbiz.retrieval._lite"):
        compaction.lean_compaction(collection)
        manager._compact_files("_default")  # the first compaction runs the check
        problem = compaction.compaction_check()
        assert problem is not None and problem.startswith("other files: ")
        assert manager.compacted == ["_default"]
        assert "_compact_files" not in vars(manager)  # Lite's own from now on
    assert [r.getMessage() for r in caplog.records] == [
        f"Milvus Lite compacts as written for another version ({problem}); its own "
        "compaction is used"
    ]


def test_the_check_runs_at_the_first_compaction_not_at_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check compacts two collections (half a second): a one-file upload, which
    flushes once and compacts nothing, does not pay for it; the first compaction runs it,
    in Lite's background thread, and compacts leanly from then on."""
    from superbiz.retrieval.vector_store import MilvusChunkStore

    monkeypatch.setattr(compaction, "_verdict", [])
    store = MilvusChunkStore(str(tmp_path / "milvus.db"), "chunks")
    try:
        store.ensure_collection(8)
        store.replace_document("d.md", _version("d.md", 3, 1))
        store.flush()
        gate = store._local_collection()
        assert gate is not None
        gate.wait_for_index_build()
        manager = gate.collection._compaction_mgr
        assert len(_live_rows(store)) == 3
        assert "_compact_files" in vars(manager)  # set, not yet run
        assert compaction._verdict == []
        expected = _edits(store, edited=True)
        gate.wait_for_index_build()
        assert compaction._verdict == [None]
        assert manager._compact_files.func is compaction.lean_compact
        assert {doc: edit for doc, edit, _ in _live_rows(store)} == {"d.md": "v1", **expected}
    finally:
        store.close()
