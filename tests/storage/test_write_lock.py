"""One writer of a knowledge base at a time, across processes: SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from conftest import write_kb
from superbiz.config import Settings
from superbiz.knowledge.ingest.ingestor import Ingestor, IngestReport
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.storage.db import open_database
from superbiz.storage.kb_writes import KnowledgeWriteLock

#: how long a waiter is watched to see that it really waits
WATCH_S = 0.5


@pytest.fixture
def engines(database_url: str) -> Iterator[Callable[[], Engine]]:
    """``engine()`` → another engine on the one database: another process's view of it."""
    made: list[Engine] = []

    def engine() -> Engine:
        made.append(open_database(database_url))
        return made[-1]

    yield engine
    for e in made:
        e.dispose()


def test_a_second_writer_waits_for_the_first(engines: Callable[[], Engine]) -> None:
    first, second = KnowledgeWriteLock(engines()), KnowledgeWriteLock(engines())
    acquired = threading.Event()

    def write() -> None:
        with second.held():
            acquired.set()

    with first.held():
        waiter = threading.Thread(target=write)
        waiter.start()
        assert not acquired.wait(WATCH_S), "the second writer did not wait"
    assert acquired.wait(10), "the second writer never got the lock"
    waiter.join()


def test_the_lock_is_reentrant_in_a_thread_and_free_after(engines: Callable[[], Engine]) -> None:
    lock, other = KnowledgeWriteLock(engines()), KnowledgeWriteLock(engines())
    with lock.held(), lock.held():  # an upload holds it and ingests
        pass
    with other.held():  # released on the last exit: another process gets it at once
        pass


def test_an_ingest_waits_while_another_process_writes(
    tmp_path: Path, database_url: str, engines: Callable[[], Engine], use_embedder: Any
) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url)
    kb = KnowledgeBase(settings, embedder=use_embedder, store=InMemoryChunkStore())
    folder = write_kb(tmp_path / "kb")
    try:
        Ingestor(kb).ingest([folder])  # warm: the re-ingest below takes well under a second
        changed = folder / "glossary.md"
        changed.write_text(changed.read_text(encoding="utf-8") + "\nOne more line.\n")
        before = kb.documents.get("glossary.md")
        reports: list[IngestReport] = []
        ingest = threading.Thread(target=lambda: reports.append(Ingestor(kb).ingest([folder])))
        with KnowledgeWriteLock(engines()).held():
            ingest.start()
            ingest.join(WATCH_S * 4)
            assert ingest.is_alive(), "the ingest did not wait for the other writer"
            assert kb.documents.get("glossary.md") == before
        ingest.join(60)
        assert reports and reports[0].updated == ["glossary.md"]
    finally:
        kb.close()
