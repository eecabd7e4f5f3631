"""Chunks embedded in batches, in threads, while a run reads its next files and inserts
the batch before: the ids and records the vector store gets, and the row the database
gets once they are in."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from superbiz.access import encode_access
from superbiz.knowledge.documents.chunking import Chunk, embedding_text, search_text
from superbiz.knowledge.documents.document import SourceDocument
from superbiz.retrieval.embedders import EmbedTexts
from superbiz.retrieval.records import ChunkRecord, ChunkWords
from superbiz.storage.repository import StoredDocument

EMBED_BATCH = 128
#: batches embedded at once, in threads, while the current one is inserted and the next
#: files are read: USE spends most of its time in BLAS (off the GIL), so a second core
#: embeds too when it is free
EMBED_WORKERS = 2
#: chunks of small files gathered before they are indexed together: enough batches for
#: the embedding threads to overlap the inserts (with one batch per call they took turns)
INDEX_CHUNKS = 8 * EMBED_BATCH
#: full groups a large run embeds in its own threads before its worker processes start
#: (``Ingestor._embedding``): none since a worker loads the kept model files in 0.5 s of a
#: core (``retrieval._use_files``; 1.3 s before, when three groups went first): dev2's 477
#: documents, two full groups, ingest in 9.02 s instead of 9.82 (the means of ten runs each,
#: alternating; 11.0 against 13.0 in four while the machine was slower)
THREADED_GROUPS = 0


class Pending(NamedTuple):
    """A document read and chunked, waiting to be embedded and written; ``outcome`` is
    the report's list it joins once written."""

    doc: SourceDocument
    file: Path
    outcome: list[str]
    chunks: list[Chunk]


Batch = list[tuple[SourceDocument, Chunk]]


class Group:
    """Documents being indexed together: their chunks in ``EMBED_BATCH`` batches, the
    first ``EMBED_WORKERS`` of them already embedding in the run's pool, but for the
    chunks whose words were embedded before (``known``: an updated document's unchanged
    passages), which keep that vector (``reused``)."""

    def __init__(
        self,
        pending: list[Pending],
        pool: ThreadPoolExecutor,
        embed: Callable[[Batch], np.ndarray],
        known: Mapping[ChunkWords, np.ndarray] | None = None,
    ) -> None:
        self.pending = pending
        self.reused: list[ChunkRecord] = []
        work = []
        for p in pending:
            for chunk in p.chunks:
                vector = known.get(chunk_words(p.doc, chunk)) if known else None
                if vector is None:
                    work.append((p.doc, chunk))
                else:
                    self.reused.append(chunk_record(p.doc, chunk, vector))
        self.batches = [work[i : i + EMBED_BATCH] for i in range(0, len(work), EMBED_BATCH)]
        self._pool, self._embed = pool, embed
        self._next = min(EMBED_WORKERS, len(self.batches))
        self.upcoming: deque[Future[np.ndarray]] = deque(
            pool.submit(embed, batch) for batch in self.batches[: self._next]
        )

    def embed_next(self) -> None:
        """Start the next batch not embedding yet (one is taken: one more may start)."""
        if self._next < len(self.batches):
            self.upcoming.append(self._pool.submit(self._embed, self.batches[self._next]))
            self._next += 1


def embed_batch(embed: EmbedTexts, batch: Batch) -> np.ndarray:
    """The vectors of a batch's chunks, each embedded with its document's headline and
    its headings."""
    return embed([embedding_text(doc.headline, chunk.heading, chunk.text) for doc, chunk in batch])


def chunk_words(doc: SourceDocument, chunk: Chunk) -> ChunkWords:
    """What a stored chunk with this document's headline, heading and text shows the
    store (``ChunkStore.vectors_by_words``)."""
    return ChunkWords(
        search_text(doc.headline, chunk.heading, chunk.text), chunk.heading, chunk.text
    )


def chunk_id(doc_path: str, index: int, version: str) -> str:
    """A chunk's id: its document, the content ``version`` (hash) and its place. The
    version keeps an update's new chunks apart from the earlier ones, which stay
    searchable until the new ones are in."""
    return f"{hashlib.sha1(doc_path.encode()).hexdigest()[:20]}:{version[:12]}:{index}"


def chunk_record(doc: SourceDocument, chunk: Chunk, vector: np.ndarray) -> ChunkRecord:
    return ChunkRecord(
        id=chunk_id(doc.path, chunk.index, doc.content_hash),
        doc_path=doc.path,
        domain=doc.domain,
        title=doc.title,
        heading=chunk.heading,
        chunk_index=chunk.index,
        content_hash=doc.content_hash,
        text=chunk.text,
        search_text=search_text(doc.headline, chunk.heading, chunk.text),
        vector=vector,
        access=encode_access(doc.access),
    )


def document_row(written: Pending) -> StoredDocument:
    """The relational row of a document whose chunks are in."""
    doc = written.doc
    return StoredDocument(
        path=doc.path,
        title=doc.title,
        domain=doc.domain,
        content_hash=doc.content_hash,
        size_bytes=doc.size_bytes,
        chunk_count=len(written.chunks),
        source_file=str(written.file),
        metadata=doc.metadata(),
        access=doc.access,
    )
