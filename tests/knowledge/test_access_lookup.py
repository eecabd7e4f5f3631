"""The permission probe at the knowledge base: searches filter before ranking.

A reader who may not read the restricted documents gets exactly what a knowledge base
without them gives (levels, exact counts, ranking, similarities): the filter is inside
the exact index, the vector and BM25 searches, not applied to their results. A reader
who may read them gets what an unrestricted reader gets. On Milvus Lite and on the
in-memory store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from access_probe import (
    ALICE,
    BOB,
    HIDDEN_DOCS,
    HR_DOC,
    PROBES,
    RECON_DOC,
    RESTRICTED,
    access_settings,
    assert_nothing_hidden,
    write_access_kb,
)
from conftest import write_kb
from superbiz.access import Reader
from superbiz.exceptions import IndexMismatchError, UnknownDomainError
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.documents.document import parse_document
from superbiz.knowledge.ingest.batches import chunk_record
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.pipeline import Retrieval
from superbiz.retrieval.store import ChunkStore

#: everyday questions beside the probes: what bob may read must answer as before
EVERYDAY = [
    "支付回调超时怎么办",
    "redis connection pool exhausted",
    "HTTP 429 Too Many Requests",
    "退款失败",
    "deployment checklist before release",
    "what is idempotency",
]


def _open(root: Path, embedder: Any, files: dict[str, str] | None, store: str) -> KnowledgeBase:
    folder = write_access_kb(root / "kb") if files is None else write_kb(root / "kb", files)
    chunks: ChunkStore | None = InMemoryChunkStore() if store == "memory" else None
    kb = KnowledgeBase(access_settings(root / "data"), embedder=embedder, store=chunks)
    report = Ingestor(kb).ingest([folder])
    assert not report.skipped
    return kb


@pytest.fixture(scope="module", params=["milvus-lite", "memory"])
def kbs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, use_embedder: Any
) -> Iterator[tuple[KnowledgeBase, KnowledgeBase]]:
    """The KB with the restricted documents, and the same KB without them."""
    from conftest import SMALL_KB

    store = request.param
    full = _open(tmp_path_factory.mktemp("access-full"), use_embedder, None, store)
    open_only = _open(tmp_path_factory.mktemp("access-open"), use_embedder, dict(SMALL_KB), store)
    yield full, open_only
    full.close()
    open_only.close()


def _seen(found: Retrieval) -> dict[str, Any]:
    """Everything a retrieval says, as the governed lookup reads it."""
    return {
        "level": found.level,
        "exact": found.exact_count,
        "naming": [(m.doc_path, m.title) for m in found.naming],
        "ranked": [d.doc_path for d in found.ranked],
        "similarities": [round(d.similarity, 5) for d in found.ranked],
        "shown": [d.doc_path for d in found.shown],
        "withheld": [d.doc_path for d in found.withheld],
    }


def test_bob_finds_nothing_of_what_he_may_not_read(
    kbs: tuple[KnowledgeBase, KnowledgeBase],
) -> None:
    full, _ = kbs
    for query in PROBES:
        found = full.retrieve(query, reader=BOB)
        seen = _seen(found)
        assert_nothing_hidden({k: v for k, v in seen.items() if k != "level"})
        assert_nothing_hidden([d.title for d in found.ranked] + [d.domain for d in found.ranked])
        assert full.infer_domain(query, BOB) != "hr"
        # nor inside the open domain that holds one of them
        inside = full.retrieve(query, "payment", reader=BOB)
        assert all(d.doc_path not in HIDDEN_DOCS for d in inside.ranked)


def test_bob_gets_what_a_knowledge_base_without_them_gives(
    kbs: tuple[KnowledgeBase, KnowledgeBase],
) -> None:
    full, open_only = kbs
    for query in [*PROBES, *EVERYDAY]:
        restricted, without = (
            _seen(full.retrieve(query, reader=BOB)),
            _seen(open_only.retrieve(query)),
        )
        # BM25 keeps its statistics over the whole collection (Milvus does too), so the
        # fused order may differ only where two documents tie on everything else
        assert restricted["level"] == without["level"], query
        assert restricted["exact"] == without["exact"], query
        assert restricted["naming"] == without["naming"], query
        assert restricted["shown"] == without["shown"], query
        assert sorted(restricted["ranked"]) == sorted(without["ranked"]), query
        # two collections, two float32 searches: a cosine may differ in its last digit
        assert sorted(restricted["similarities"]) == pytest.approx(
            sorted(without["similarities"]), abs=1e-4
        ), query


def test_alice_gets_what_an_unrestricted_reader_gets(
    kbs: tuple[KnowledgeBase, KnowledgeBase],
) -> None:
    full, _ = kbs
    for query in [*PROBES, *EVERYDAY]:
        mine, everyone = full.retrieve(query, reader=ALICE), full.retrieve(query)
        assert _seen(mine) == _seen(everyone), query
        assert [round(d.score, 6) for d in mine.ranked] == [
            round(d.score, 6) for d in everyone.ranked
        ]
    assert any(
        d.doc_path in HIDDEN_DOCS for q in PROBES[:2] for d in full.retrieve(q, reader=ALICE).shown
    )


def test_a_restricted_domain_is_unknown_to_bob_not_forbidden(
    kbs: tuple[KnowledgeBase, KnowledgeBase],
) -> None:
    full, _ = kbs
    with pytest.raises(UnknownDomainError) as hidden:
        full.require_domain("hr", BOB)
    with pytest.raises(UnknownDomainError) as absent:
        full.require_domain("nope", BOB)
    assert str(hidden.value).replace("'hr'", "'X'") == str(absent.value).replace("'nope'", "'X'")
    assert full.require_domain("hr", ALICE) == "hr" == full.require_domain("HR")
    assert "hr" not in full.domains(BOB)
    assert full.domains(BOB)["payment"] == full.domains()["payment"] - 1
    assert full.domains(ALICE) == full.domains()


def test_a_new_restricted_document_is_hidden_from_its_first_chunk(
    tmp_path: Path, use_embedder: Any
) -> None:
    """Chunks land before their row: a list no row holds yet admits nobody (the stores
    filter by the chunk's own list), so a document being ingested never shows early."""
    kb = _open(tmp_path, use_embedder, {"pay/open.md": "# Open\nRefunds take two days.\n"}, "lite")
    try:
        before = kb.retrieve("kingfisher ledger mismatch", reader=BOB)
        doc = parse_document(RESTRICTED[RECON_DOC].encode(), PurePosixPath(RECON_DOC))
        chunks = chunk_markdown(doc.body, 800, 100)
        vectors = use_embedder.embed([c.text for c in chunks])
        kb.store.insert([chunk_record(doc, c, v) for c, v in zip(chunks, vectors, strict=True)])
        kb.store.flush()
        for reader in (BOB, ALICE):  # no row yet: nobody restricted sees it
            found = kb.retrieve("kingfisher ledger mismatch", reader=reader)
            assert all(d.doc_path != doc.path for d in found.ranked)
        assert any(d.doc_path == doc.path for d in kb.retrieve("kingfisher ledger").ranked)
        assert _seen(kb.retrieve("kingfisher ledger mismatch", reader=BOB)) == _seen(before)
    finally:
        kb.close()


def test_an_index_without_the_chunks_lists_says_to_rebuild(
    tmp_path: Path, use_embedder: Any
) -> None:
    """A collection built before superbiz stored access lists with its chunks filters by
    domain while no document has a list; once one does, a restricted reader's lookup
    says to rebuild (nothing is shown unfiltered); the unrestricted reader goes on."""
    kb = _open(tmp_path, use_embedder, None, "lite")
    try:
        kb.store.has_access = False  # type: ignore[attr-defined]  # as read from an old schema
        with pytest.raises(IndexMismatchError, match="--rebuild"):
            kb.retrieve("kingfisher ledger", reader=BOB)
        assert kb.retrieve("kingfisher ledger").shown
    finally:
        kb.close()


def test_readers_views_are_cached_per_group_set(kbs: tuple[KnowledgeBase, KnowledgeBase]) -> None:
    full, _ = kbs
    assert full.view(BOB) is full.view(Reader.of_groups("someone else", ["sre"]))
    assert full.view(None) is full.view(Reader.everyone())
    assert full.view(BOB).visibility is not None and full.view(None).visibility is None


def test_whether_the_knowledge_base_writes_chinese_is_read_on_what_the_reader_may_read(
    tmp_path: Path, use_embedder: Any
) -> None:
    """The answer selection reads an English knowledge base's passages differently for a
    Chinese question: that must not tell bob there are Chinese documents he may not read
    (the HR page's title is half Chinese)."""
    english = {"ops/disk-full.md": "# Disk full\n\nFree space under /var/log first.\n"}
    kb = KnowledgeBase(access_settings(tmp_path / "data"), embedder=use_embedder)
    try:
        Ingestor(kb).ingest([write_kb(tmp_path / "kb", {**english, HR_DOC: RESTRICTED[HR_DOC]})])

        assert kb.writes_chinese() and kb.writes_chinese(ALICE)
        assert not kb.writes_chinese(BOB)
    finally:
        kb.close()
