"""The server profile: PostgreSQL + a Milvus server over gRPC, shared by several processes.

A ``KnowledgeBase`` per "process" (each its own engine and Milvus client) stands in for
replicas here; ``test_replicas.py`` runs real ``superbiz serve`` processes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import MilvusServer, free_port
from superbiz.agents.runtime import open_runtime
from superbiz.config import Settings, VectorSettings
from superbiz.exceptions import StoreError
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.vector_store import MilvusChunkStore
from superbiz.storage.knowledge_version import knowledge_version

QUERIES = [
    ("支付回调超时怎么办", None),
    ("redis connection pool exhausted", None),
    ("HTTP 429 Too Many Requests", "api"),
    ("退款失败", "payment"),
    ("deployment checklist before release", None),
    ("what is idempotency", None),
]


@pytest.fixture
def server_settings(
    tmp_path: Path,
    database_factory: Callable[[str], str],
    milvus_server: MilvusServer,
    milvus_collection: str,
) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_factory("postgresql"),
        vector=VectorSettings(uri=milvus_server.uri, collection=milvus_collection),
    )


@pytest.fixture
def open_kb(use_embedder: Any) -> Iterator[Callable[[Settings], KnowledgeBase]]:
    opened: list[KnowledgeBase] = []

    def make(settings: Settings) -> KnowledgeBase:
        opened.append(KnowledgeBase(settings, embedder=use_embedder))
        return opened[-1]

    yield make
    for kb in opened:
        kb.close()


def _ranking(kb: KnowledgeBase, query: str, domain: str | None) -> tuple[str, list[str]]:
    """The level and the ranked documents (rounded scores would hide nothing more)."""
    result = kb.retrieve(query, domain)
    level = result.level.value if result.level else "none"
    return level, [doc.doc_path for doc in result.ranked]


def _exact(kb: KnowledgeBase, text: str) -> set[str]:
    return {match.doc_path for match in kb.exact_index.match(text)}


def test_a_milvus_server_ranks_as_the_embedded_lite(
    tmp_path: Path, small_kb: Path, server_settings: Settings, open_kb: Any
) -> None:
    embedded = open_kb(Settings(data_dir=tmp_path / "lite"))
    served = open_kb(server_settings)
    for kb in (embedded, served):
        Ingestor(kb).ingest([small_kb])
    assert isinstance(served.store, MilvusChunkStore) and served.store.has_bm25
    for query, domain in QUERIES:
        assert _ranking(served, query, domain) == _ranking(embedded, query, domain), query


def test_changes_made_by_another_process_are_seen_on_the_next_lookup(
    small_kb: Path, server_settings: Settings, open_kb: Any
) -> None:
    reader = open_kb(server_settings)  # opened before anything exists: no collection yet
    assert reader.store.dimension is None
    assert _ranking(reader, "redis connection pool exhausted", None)[1] == []

    writer = open_kb(server_settings)
    Ingestor(writer).ingest([small_kb])
    _, docs = _ranking(reader, "redis connection pool exhausted", None)
    assert docs[0] == "infrastructure/redis-pool.md"
    assert _exact(reader, "Redis 连接池耗尽") == {"infrastructure/redis-pool.md"}

    writer.documents.delete(["infrastructure/redis-pool.md"])
    writer.store.delete_documents(["infrastructure/redis-pool.md"])
    _, docs = _ranking(reader, "redis connection pool exhausted", None)
    assert "infrastructure/redis-pool.md" not in docs
    assert _exact(reader, "Redis 连接池耗尽") == set()


def test_the_knowledge_map_follows_another_process(
    small_kb: Path, server_settings: Settings, open_kb: Any
) -> None:
    writer = open_kb(server_settings)
    Ingestor(writer).ingest([small_kb])
    with open_runtime(server_settings, kb=open_kb(server_settings)) as runtime:
        before = {d.domain_id for d in runtime.knowledge_map().domains}
        assert "api" in before
        writer.documents.delete(["api/rate-limit.md"])
        writer.store.delete_documents(["api/rate-limit.md"])
        after = {d.domain_id for d in runtime.knowledge_map().domains}
        assert after == before - {"api"}
        unchanged = runtime.knowledge_map()
        assert runtime.knowledge_map() is unchanged  # no change, no rebuild


def test_every_document_or_domain_change_bumps_the_version(
    tmp_path: Path, database_url: str, small_kb: Path, use_embedder: Any
) -> None:
    from superbiz.retrieval.memory_store import InMemoryChunkStore

    settings = Settings(data_dir=tmp_path / "data", database_url=database_url)
    kb = KnowledgeBase(settings, embedder=use_embedder, store=InMemoryChunkStore())
    try:
        start = knowledge_version(kb.engine)
        Ingestor(kb).ingest([small_kb])
        ingested = knowledge_version(kb.engine)
        assert ingested > start  # one bump per transaction: a batch's rows are written in one
        assert kb.documents.delete(["no/such.md"]) == 0
        assert knowledge_version(kb.engine) == ingested
        assert not kb.catch_up() or kb.version == ingested
        assert not kb.catch_up()
        kb.documents.delete(["glossary.md"])
        assert kb.catch_up() and kb.version == ingested + 1
    finally:
        kb.close()


def test_milvus_down_is_a_store_error_and_the_next_call_works_when_it_is_back(
    tmp_path: Path, small_kb: Path, database_factory: Callable[[str], str], open_kb: Any
) -> None:
    server = MilvusServer(tmp_path / "milvus", free_port())
    if (problem := server.start()) is not None:
        pytest.skip(problem)
    try:
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=database_factory("sqlite"),
            vector=VectorSettings(uri=server.uri),
        )
        kb = open_kb(settings)
        Ingestor(kb).ingest([small_kb])
        server.stop()
        with pytest.raises(StoreError, match=rf"vector store \(Milvus at {server.uri}\)"):
            kb.retrieve("redis connection pool exhausted")
        assert server.start() is None
        assert _ranking(kb, "redis connection pool exhausted", None)[1][0] == (
            "infrastructure/redis-pool.md"
        )
    finally:
        server.stop()


def test_a_server_without_bm25_falls_back_to_dense_search_with_one_warning(
    milvus_server: MilvusServer,
    milvus_collection: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Milvus < 2.5 rejects an analyzer on a field: simulated by refusing every one."""
    import numpy as np

    real_create = MilvusChunkStore._create

    def create(self: MilvusChunkStore, dimension: int, analyzer: dict[str, Any] | None) -> None:
        if analyzer is not None:
            raise RuntimeError("field param enable_analyzer is not supported")
        real_create(self, dimension, analyzer)

    monkeypatch.setattr(MilvusChunkStore, "_create", create)
    store = MilvusChunkStore(milvus_server.uri, milvus_collection)
    try:
        with caplog.at_level(logging.WARNING, logger="superbiz.retrieval.vector_store"):
            store.ensure_collection(4)
        assert not store.has_bm25
        fallback = [r for r in caplog.records if "dense search only" in r.getMessage()]
        assert len(fallback) == 1
        assert store.search_bm25("anything", 5) == []
        vector = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
        assert store.search_dense(vector, 5) == []
    finally:
        store.drop()
        store.close()


def test_milvus_down_at_start_up_is_a_store_error_until_it_comes_up(
    tmp_path: Path, small_kb: Path, open_kb: Any
) -> None:
    server = MilvusServer(tmp_path / "milvus", free_port())
    settings = Settings(data_dir=tmp_path / "data", vector=VectorSettings(uri=server.uri))
    kb = open_kb(settings)  # the relational store opens; Milvus is reached lazily
    with pytest.raises(StoreError, match=rf"cannot open Milvus at {server.uri}"):
        _ = kb.store
    if (problem := server.start()) is not None:
        pytest.skip(problem)
    try:
        Ingestor(kb).ingest([small_kb])
        assert _ranking(kb, "HTTP 429 Too Many Requests", None)[1][0] == "api/rate-limit.md"
    finally:
        server.stop()


def test_a_milvus_server_filters_by_access_inside_its_searches(
    tmp_path: Path, server_settings: Settings, open_kb: Any
) -> None:
    """The permission probe's searches on the server profile (PostgreSQL, a Milvus server
    over gRPC, filters sent as the server parses them): bob meets nothing restricted,
    alice ranks as an unrestricted reader, as on the embedded Lite."""
    from access_probe import ALICE, BOB, HIDDEN_DOCS, PROBES, assert_nothing_hidden, write_access_kb
    from superbiz.config import AccessSettings

    access = AccessSettings(domains={"hr": ("hr-team",)})
    served = open_kb(server_settings.model_copy(update={"access": access}))
    embedded = open_kb(Settings(data_dir=tmp_path / "lite", access=access))
    folder = write_access_kb(tmp_path / "kb")
    for kb in (served, embedded):
        assert not Ingestor(kb).ingest([folder]).skipped
    assert isinstance(served.store, MilvusChunkStore) and served.store.has_access
    for query in PROBES:
        his = served.retrieve(query, reader=BOB)
        assert_nothing_hidden([(d.doc_path, d.title, d.domain) for d in his.ranked])
        assert [d.doc_path for d in his.ranked] == [
            d.doc_path for d in embedded.retrieve(query, reader=BOB).ranked
        ]
        hers, everyone = served.retrieve(query, reader=ALICE), served.retrieve(query)
        assert [d.doc_path for d in hers.ranked] == [d.doc_path for d in everyone.ranked]
    assert {d.doc_path for d in served.retrieve(PROBES[0], reader=ALICE).shown} & set(HIDDEN_DOCS)


_IDLE_STORE = """
import sys, time
import numpy as np
from superbiz.retrieval.vector_store import MilvusChunkStore
store = MilvusChunkStore(sys.argv[1], sys.argv[2])
store.ensure_collection(8)
time.sleep(50)
print(store.search_dense(np.ones(8, dtype=np.float32), 3))
store.drop()
store.close()
"""


def test_an_idle_connection_to_the_server_is_not_sent_away_for_pinging(
    milvus_server: MilvusServer, milvus_collection: str
) -> None:
    """A store that waits 50 s between calls (an ingest embedding, a turn waiting for its
    model), in a process of its own: pymilvus' default keepalive pinged every 10 s while
    idle, and the server's gRPC ping policy answered GOAWAY "too_many_pings" after the
    third, which gRPC printed on the process's stderr. The store's channel does not ping
    while idle: nothing is printed, and the next call works."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _IDLE_STORE, milvus_server.uri, milvus_collection],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert done.stdout.strip().endswith("[]")
    assert "too_many_pings" not in done.stderr
