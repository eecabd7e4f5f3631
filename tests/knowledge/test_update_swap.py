"""An updated document stays searchable while its new version is embedded and written.

The store is the real one (Milvus Lite, or a Milvus server over gRPC) seen through a
window: at each write of the update it runs the searches a serving replica would run,
so what readers find *during* the update is observed at the moment it happens (between
embedding and swap), not guessed from timing. The database is SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import write_kb
from superbiz.config import Settings, VectorSettings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.records import ChunkRecord
from superbiz.retrieval.vector_store import MilvusChunkStore

OLD_WORD, NEW_WORD = "zebracrossing", "quokkahabitat"
PATHS = [f"ops/runbook-{n}.md" for n in range(3)]


def runbook(n: int, word: str) -> str:
    sections = "\n\n".join(
        f"## Step {i}\n" + f"Check the {word} item {i} carefully. " * 20 for i in range(6)
    )
    return f"# Runbook {n}\n\n{sections}\n"


class Window:
    """The real store; ``seen`` records what a search found at each write."""

    def __init__(self, store: MilvusChunkStore) -> None:
        self.store = store
        self.seen: list[tuple[str, set[str], set[str]]] = []
        self.fail_deletes = False
        self.asked: list[list[str]] = []  # the documents each ``chunk_ids`` named

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def found(self, word: str) -> set[str]:
        return {hit.doc_path for hit in self.store.search_bm25(word, 50)}

    def look(self, moment: str) -> None:
        self.seen.append((moment, self.found(OLD_WORD), self.found(NEW_WORD)))

    def insert(self, chunks: Sequence[ChunkRecord]) -> None:
        self.look("embedded, not yet inserted")
        self.store.insert(chunks)
        self.look("inserted")

    def chunk_ids(self, doc_paths: Sequence[str]) -> dict[str, set[str]]:
        self.asked.append(list(doc_paths))
        return self.store.chunk_ids(doc_paths)

    def delete_chunks(self, ids: Collection[str]) -> None:
        if self.fail_deletes and ids:
            raise OSError("the process was killed before the earlier version was deleted")
        self.store.delete_chunks(ids)


class Embedder:
    """The real embedder, which can be made to fail on the new version's text."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.dimension = real.dimension
        self.name = real.name
        self.fail_on: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.fail_on and any(self.fail_on in text for text in texts):
            raise RuntimeError("the embedder died mid-update")
        return self.real.embed(texts)


@pytest.fixture(params=["embedded", "server"])
def vector(request: pytest.FixtureRequest, tmp_path: Path) -> VectorSettings:
    if request.param == "embedded":
        return VectorSettings(uri=str(tmp_path / "milvus.db"))
    server = request.getfixturevalue("milvus_server")
    return VectorSettings(uri=server.uri, collection=request.getfixturevalue("milvus_collection"))


@pytest.fixture
def watched(
    tmp_path: Path, database_url: str, vector: VectorSettings, use_embedder: Any
) -> Iterator[tuple[KnowledgeBase, Window, Embedder]]:
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url, vector=vector)
    window = Window(MilvusChunkStore(vector.uri, vector.collection))
    embedder = Embedder(use_embedder)
    kb = KnowledgeBase(settings, embedder=embedder, store=window)  # type: ignore[arg-type]
    yield kb, window, embedder
    kb.close()
    window.store.close()


def consistent(kb: KnowledgeBase, word: str, window: Window) -> None:
    """Every row's chunks are in the index, of its version only, and found by ``word``."""
    rows = {doc.path: doc for doc in kb.documents.all()}
    state = kb.store.index_state(list(rows))
    assert state == {p: (d.chunk_count, frozenset([d.content_hash])) for p, d in rows.items()}
    assert window.found(word) == set(PATHS)


def test_an_update_keeps_the_earlier_version_searchable_until_the_new_one_is_in(
    tmp_path: Path, watched: tuple[KnowledgeBase, Window, Embedder]
) -> None:
    kb, window, _ = watched
    root = write_kb(tmp_path / "kb", {path: runbook(n, OLD_WORD) for n, path in enumerate(PATHS)})
    assert len(Ingestor(kb).ingest([root]).added) == 3
    window.seen.clear()

    write_kb(root, {path: runbook(n, NEW_WORD) for n, path in enumerate(PATHS)})
    report = Ingestor(kb).ingest([root])
    assert report.updated == PATHS
    # each title passage kept its words, so its vector: it goes in after the embedded ones
    assert report.vectors_reused == len(PATHS)
    moments = [moment for moment, _, _ in window.seen]
    assert moments == ["embedded, not yet inserted", "inserted"] * 2
    # embedded, the swap not begun: readers find every document, in its earlier version
    assert window.seen[0][1:] == (set(PATHS), set())
    # the new version is in beside the earlier one until the rows say it is the one
    assert [seen[1:] for seen in window.seen[1:]] == [(set(PATHS), set(PATHS))] * 3
    assert window.found(OLD_WORD) == set()
    consistent(kb, NEW_WORD, window)


def test_a_failed_update_leaves_the_earlier_version_whole(
    tmp_path: Path, watched: tuple[KnowledgeBase, Window, Embedder]
) -> None:
    kb, window, embedder = watched
    root = write_kb(tmp_path / "kb", {path: runbook(n, OLD_WORD) for n, path in enumerate(PATHS)})
    Ingestor(kb).ingest([root])
    before = {doc.path: doc.content_hash for doc in kb.documents.all()}

    write_kb(root, {path: runbook(n, NEW_WORD) for n, path in enumerate(PATHS)})
    embedder.fail_on = NEW_WORD  # dies while embedding the new version
    with pytest.raises(RuntimeError, match="died mid-update"):
        Ingestor(kb).ingest([root])
    assert {doc.path: doc.content_hash for doc in kb.documents.all()} == before
    consistent(kb, OLD_WORD, window)
    assert window.found(NEW_WORD) == set()

    embedder.fail_on = None  # the next run writes the update
    assert Ingestor(kb).ingest([root]).updated == PATHS
    consistent(kb, NEW_WORD, window)


def test_a_crash_before_the_earlier_version_is_deleted_is_repaired(
    tmp_path: Path, watched: tuple[KnowledgeBase, Window, Embedder]
) -> None:
    """Killed after the new chunks and rows are in: both versions are found (nothing is
    lost), and the next run deletes the earlier one."""
    kb, window, _ = watched
    root = write_kb(tmp_path / "kb", {path: runbook(n, OLD_WORD) for n, path in enumerate(PATHS)})
    Ingestor(kb).ingest([root])

    write_kb(root, {path: runbook(n, NEW_WORD) for n, path in enumerate(PATHS)})
    window.fail_deletes = True
    with pytest.raises(OSError, match="killed"):
        Ingestor(kb).ingest([root])
    assert window.found(OLD_WORD) == window.found(NEW_WORD) == set(PATHS)

    window.fail_deletes = False
    assert Ingestor(kb).ingest([root]).repaired == PATHS
    assert window.found(OLD_WORD) == set()
    consistent(kb, NEW_WORD, window)


def test_only_stored_documents_are_looked_up_for_earlier_chunks(
    tmp_path: Path, watched: tuple[KnowledgeBase, Window, Embedder]
) -> None:
    """A new document has no chunks to replace: the run's first step dropped any a crash
    left without a row. Asking the index for them anyway scanned it once a group, so a
    bulk ingest slowed as the KB grew."""
    kb, window, _ = watched
    root = write_kb(tmp_path / "kb", {path: runbook(n, OLD_WORD) for n, path in enumerate(PATHS)})
    Ingestor(kb).ingest([root])
    kb.documents.delete([PATHS[2]])  # a crash before its row: its chunks stay, orphaned
    window.asked.clear()

    write_kb(root, {PATHS[0]: runbook(0, NEW_WORD), PATHS[2]: runbook(2, NEW_WORD)})
    report = Ingestor(kb).ingest([root])
    assert (report.updated, report.unchanged, report.added) == ([PATHS[0]], [PATHS[1]], [PATHS[2]])
    assert [path for asked in window.asked for path in asked] == [PATHS[0]]
    assert window.found(OLD_WORD) == {PATHS[1]}
    assert window.found(NEW_WORD) == {PATHS[0], PATHS[2]}
    rows = {doc.path: doc for doc in kb.documents.all()}
    assert kb.store.index_state(PATHS) == {
        path: (doc.chunk_count, frozenset([doc.content_hash])) for path, doc in rows.items()
    }
