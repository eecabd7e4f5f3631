"""An update embeds only the passages whose words changed: the others keep their vectors.

Real USE, real Milvus Lite (and the in-memory store), SQLite and PostgreSQL: a runbook of
several sections is ingested, one section is edited, and the second ingest must embed the
changed passages alone while every stored vector stays the one embedding its passage now
would give.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import write_kb
from fakes.embedders import CountingEmbedder
from fakes.records import chunk_record
from superbiz.config import IngestSettings, Settings
from superbiz.knowledge.documents.chunking import embedding_text
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.records import ChunkWords

PATH = "ops/disk-full.md"
# each section a passage of its own (two would not fit the 800 characters of one)
SECTIONS = {
    "Symptoms": "Pods are evicted with DiskPressure and the kubelet logs image GC failures. " * 8,
    "Diagnosis": "Run df -h on the node and list the largest directories under /var/lib. " * 8,
    "Fix": "Prune unused images with crictl rmi --prune, then cordon and drain the node. " * 8,
}


def runbook(sections: dict[str, str], description: str = "When a node's disk fills up") -> str:
    body = "\n\n".join(f"## {heading}\n\n{text}" for heading, text in sections.items())
    return f"---\ntitle: Disk full\ndescription: {description}\n---\n# Disk full\n\n{body}\n"


@pytest.fixture(params=["lite", "memory"])
def counted(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    database_url: str,
    use_embedder: Any,
) -> Iterator[tuple[KnowledgeBase, CountingEmbedder]]:
    embedder = CountingEmbedder(use_embedder)
    store = InMemoryChunkStore() if request.param == "memory" else None
    kb = KnowledgeBase(make_settings(tmp_path, database_url), embedder=embedder, store=store)  # type: ignore[arg-type]
    yield kb, embedder
    kb.close()


def stored_vectors_are_fresh(kb: KnowledgeBase, embedder: Any) -> None:
    """Every stored vector is what embedding its passage gives now."""
    doc = kb.documents.get(PATH)
    assert doc is not None
    chunks = kb.store.chunks_of(PATH)
    assert len(chunks) == doc.chunk_count
    headline = f"{doc.title}\n{doc.metadata['when_to_retrieve']}"
    texts = [embedding_text(headline, c.heading, c.text) for c in chunks]
    stored = np.stack([c.vector for c in chunks if c.vector is not None])
    assert np.allclose(stored, embedder.embed(texts), atol=1e-5)


def test_an_edited_section_is_the_only_passage_embedded_again(
    tmp_path: Path, counted: tuple[KnowledgeBase, CountingEmbedder]
) -> None:
    kb, embedder = counted
    root = write_kb(tmp_path / "kb", {PATH: runbook(SECTIONS)})
    first = Ingestor(kb).ingest([root])
    assert first.added == [PATH] and first.vectors_reused == 0
    passages = kb.documents.get(PATH).chunk_count  # type: ignore[union-attr]
    assert passages == 3

    write_kb(
        root,
        {PATH: runbook({**SECTIONS, "Fix": "Expand the volume, then restart the kubelet. " * 8})},
    )
    embedder.texts = 0
    report = Ingestor(kb).ingest([root])
    assert report.updated == [PATH]
    assert report.vectors_reused == passages - 1
    assert "passages kept their vectors" in report.summary()
    # the edited passage and nothing else: the map's entry is the document's, unchanged
    assert embedder.texts == 1
    stored_vectors_are_fresh(kb, embedder.inner)
    found = kb.store.search_bm25("expand the volume", 5)
    assert [hit.doc_path for hit in found][:1] == [PATH]


def test_a_new_description_heads_every_passage_so_all_are_embedded_again(
    tmp_path: Path, counted: tuple[KnowledgeBase, CountingEmbedder]
) -> None:
    kb, embedder = counted
    root = write_kb(tmp_path / "kb", {PATH: runbook(SECTIONS)})
    Ingestor(kb).ingest([root])
    write_kb(root, {PATH: runbook(SECTIONS, description="When kubelet reports DiskPressure")})
    report = Ingestor(kb).ingest([root])
    assert report.updated == [PATH] and report.vectors_reused == 0
    stored_vectors_are_fresh(kb, embedder.inner)


def test_a_passage_the_store_cut_short_is_embedded_again(
    tmp_path: Path, make_settings: Callable[..., Settings], use_embedder: Any
) -> None:
    """Milvus keeps 4,096 characters of a passage: what was cut off may differ, so a long
    passage (chunks of 8,000 characters here) is never matched by its kept part."""
    embedder = CountingEmbedder(use_embedder)
    settings = make_settings(tmp_path, ingest=IngestSettings(chunk_size=8000))
    kb = KnowledgeBase(settings, embedder=embedder)  # type: ignore[arg-type]
    script = "\n".join(f"echo step {n} of the long recovery script" for n in range(150))
    sections = {"Script": f"```bash\n{script}\n```", "Fix": "Prune unused images. " * 130}
    root = write_kb(tmp_path / "kb", {PATH: runbook(sections)})
    try:
        Ingestor(kb).ingest([root])
        texts = [c.text for c in kb.store.chunks_of(PATH)]
        assert len(texts) == 2 and len(texts[0]) == 4096  # the script's passage, cut
        assert [words.text for words in kb.store.vectors_by_words([PATH])] == texts[1:]

        write_kb(root, {PATH: runbook({**sections, "Fix": "Expand the volume. " * 140})})
        embedder.texts = 0
        report = Ingestor(kb).ingest([root])
        assert report.updated == [PATH] and report.vectors_reused == 0
        assert embedder.texts == 2  # the edited passage, and the script's again
    finally:
        kb.close()


def test_the_in_memory_store_gives_the_vectors_of_the_named_documents_only() -> None:
    store = InMemoryChunkStore()
    store.ensure_collection(2)
    store.insert([chunk_record("a.md", [1, 0], "alpha"), chunk_record("b.md", [0, 1], "beta")])
    found = store.vectors_by_words(["a.md"])
    assert list(found) == [ChunkWords("alpha", "", "alpha")]
    assert found[ChunkWords("alpha", "", "alpha")].tolist() == [1.0, 0.0]
