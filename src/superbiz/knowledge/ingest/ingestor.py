"""Ingestion: files → documents → chunks → vectors, idempotent by content hash.

Per document the vector index is written first and the relational row last, so a
crash leaves at worst a row that disagrees with the index; every run starts by
reconciling the two (chunk count and content hash per document) and repairs what
disagrees. An updated document's earlier chunks are deleted only once its new ones and
its row are in: it stays searchable throughout, and whole when the update fails. A file
that cannot be read is reported and skipped; the rest goes on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import NamedTuple

import numpy as np
from sqlalchemy.exc import DataError

from superbiz.access import encode_access
from superbiz.exceptions import DocumentError, first_line
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.documents.chunking import Chunk, chunk_markdown, embedding_text, search_text
from superbiz.knowledge.documents.document import SourceDocument, conversion_limits, load_document
from superbiz.knowledge.documents.metadata import MetadataWriter, enrich
from superbiz.knowledge.ingest.discovery import (
    Candidate,
    Unreadable,
    discover,
    each_file_once,
    gone,
    placement,
    root_of,
    stored_roots,
    under,
)
from superbiz.knowledge.ingest.report import IngestReport
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.statistics import refresh_statistics
from superbiz.retrieval.answers import AnswerEncoder, answer_head, to_bytes
from superbiz.retrieval.records import ChunkRecord
from superbiz.storage.repository import StoredDocument

EMBED_BATCH = 128
#: batches embedded at once, in threads, while the current one is inserted and the next
#: files are read: USE spends most of its time in BLAS (off the GIL), so a second core
#: embeds too when it is free
EMBED_WORKERS = 2
#: chunks of small files gathered before they are indexed together: enough batches for
#: the embedding threads to overlap the inserts (with one batch per call they took turns)
INDEX_CHUNKS = 8 * EMBED_BATCH
#: document openings encoded (and saved) at a time by the answer model
ANSWER_BATCH = 32
#: how often a long answer-model backfill tells serving processes of its new vectors: each
#: time they rebuild their exact and answer indexes, so not at every batch (1-4 s)
ANSWER_ANNOUNCE_S = 30.0


Progress = Callable[[str], None]


class _Pending(NamedTuple):
    doc: SourceDocument
    file: Path
    outcome: list[str]
    chunks: list[Chunk]


_Batch = list[tuple[SourceDocument, Chunk]]


class _Group:
    """Documents being indexed together: their chunks in ``EMBED_BATCH`` batches, the
    first ``EMBED_WORKERS`` of them already embedding in the run's pool."""

    def __init__(
        self,
        pending: list[_Pending],
        pool: ThreadPoolExecutor,
        embed: Callable[[_Batch], np.ndarray],
    ) -> None:
        self.pending = pending
        work = [(p.doc, chunk) for p in pending for chunk in p.chunks]
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


def chunk_id(doc_path: str, index: int, version: str) -> str:
    """A chunk's id: its document, the content ``version`` (hash) and its place. The
    version keeps an update's new chunks apart from the earlier ones, which stay
    searchable until the new ones are in."""
    return f"{hashlib.sha1(doc_path.encode()).hexdigest()[:20]}:{version[:12]}:{index}"


class Ingestor:
    """Ingests files into ``kb``; ``metadata`` writes missing covers/when_to_retrieve
    (an LLM), else they are derived; ``domains`` recomputes the changed domains.

    ``outside_stores`` is entered while the ingest does work that touches no store: reading
    and converting each file (a 2,000-page PDF: seconds), waiting for its embeddings (13
    of 17 s for a 1.5 MB file), measuring the KB's statistics and waiting for the vector
    index to build: the HTTP service lets go of its store lock there, so turns and reads
    go on beside an upload's ingest as they do beside a ``superbiz ingest`` on server
    stores."""

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        metadata: MetadataWriter | None = None,
        domains: DomainService | None = None,
        outside_stores: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.kb = kb
        self.metadata = metadata
        self.domains = domains
        self.outside_stores = outside_stores
        self._report = IngestReport()
        #: this run's document openings, so that the answer model needs no store read
        self._heads: dict[str, str] = {}
        #: files already read and converted by the caller (an upload, checked before it
        #: was stored), taken by ``load`` instead of converting them again
        self.parsed: dict[Path, SourceDocument] = {}
        #: the run's embedding threads, and the group embedding while files are read
        self._pool: ThreadPoolExecutor | None = None
        self._started: _Group | None = None

    def ingest(
        self,
        paths: Sequence[Path],
        *,
        prune: bool = False,
        rebuild: bool = False,
        on_total: Callable[[int], None] | None = None,
        on_progress: Progress | None = None,
        root: Path | None = None,
    ) -> IngestReport:
        """Bring the knowledge base in line with ``paths`` (files in the KB folder ``root``
        get their paths from it); one writer at a time, in any process
        (``KnowledgeBase.write_lock``): its first step drops index entries with no
        document row, which would be another writer's chunks not yet recorded."""
        with self.kb.write_lock.held():
            try:
                return self._ingest(paths, prune, rebuild, on_total, on_progress, root)
            finally:  # a run that stopped part-way leaves its last group unwritten, whole
                self._started = None
                if self._pool is not None:
                    self._pool.shutdown(cancel_futures=True)
                    self._pool = None

    def _ingest(
        self,
        paths: Sequence[Path],
        prune: bool,
        rebuild: bool,
        on_total: Callable[[int], None] | None,
        on_progress: Progress | None,
        root: Path | None,
    ) -> IngestReport:
        kb, settings = self.kb, self.kb.settings.ingest
        report = self._report = IngestReport()
        self._heads = {}
        # a rebuild indexes again every stored document whose file is still there (other
        # folders', uploads), not only those under ``paths``: nothing disappears with it
        again: list[Candidate] = []
        if rebuild:
            again = [
                Candidate(Path(doc.source_file), root_of(Path(doc.source_file), doc.path))
                for doc in kb.documents.all()
                if not gone(doc.source_file)
            ]
            kb.store.drop()
            kb.documents.delete_all()
            kb.record_embedder()
        kb.check_index()
        kb.store.ensure_collection(kb.embedder.dimension)
        kb.record_embedder()

        stored = {doc.path: doc for doc in kb.documents.all()}
        #: stored documents by the real path of their file
        by_source: dict[str, list[StoredDocument]] = {}
        for row in stored.values():
            by_source.setdefault(os.path.realpath(row.source_file), []).append(row)
        broken = self._reconcile(stored)

        found = each_file_once([*discover(paths, settings.extensions, root), *again])
        if on_total:
            on_total(len(found))
        # Each file is stored once, under its path in the widest KB folder that holds it
        # (given now, or ingested before): the root to load it against, and the copies
        # stored under narrower folders' paths, removed once it has landed.
        kb_roots = stored_roots(stored.values())
        placed = {
            item.file: placement(item, by_source.get(os.path.realpath(item.file), []), kb_roots)
            for item in found
            if isinstance(item, Candidate)
        }
        moving = {old: item for item, (_, olds) in placed.items() for old in olds}
        followed: list[StoredDocument] = []  # unchanged files whose folder moved
        pending: list[_Pending] = []
        seen: dict[str, Path] = {}
        unlisted: list[Path] = []  # folders that could not be read: nothing under them is gone
        unloaded: set[str] = set()  # real files that could not be loaded: their rows stay
        for item in found:
            if isinstance(item, Unreadable):
                report.skipped.append((item.label, item.reason))
                unlisted.append(item.folder)
                self._tick(on_progress, item.label)
                continue
            if isinstance(item, tuple):
                report.skipped.append(item)
                self._tick(on_progress, item[0])
                continue
            label = item.file.relative_to(item.root).as_posix()
            real = os.path.realpath(item.file)
            earlier = next(iter(by_source.get(real, [])), None)
            try:
                # reading and converting a file touches no store: turns go on meanwhile
                with self.outside_stores():
                    doc = self.load(item.file, placed[item.file][0])
            except DocumentError as exc:
                unloaded.add(real)
                report.skipped.append((exc.path, exc.reason + _kept(earlier, exc.path)))
                self._tick(on_progress, label)
                continue
            except OSError as exc:
                unloaded.add(real)
                kept = _kept(earlier, label)
                report.skipped.append((label, f"cannot read: {exc.strerror or exc}{kept}"))
                self._tick(on_progress, label)
                continue
            if doc.path in seen:
                report.skipped.append((doc.path, f"same relative path as {seen[doc.path]}"))
                self._tick(on_progress, label)
                continue
            previous = stored.get(doc.path)
            other = previous.source_file if previous else None
            moved = bool(other) and os.path.realpath(other or "") != real
            # another file's document is never replaced while that file is there, unless it
            # is a copy of a file this run has already stored under its KB path
            freed = doc.path in moving and moving[doc.path] in seen.values()  # rare: a copy
            if other and moved and not freed and not gone(other):
                report.skipped.append((doc.path, _clash(real, other)))
                self._tick(on_progress, label)
                continue
            seen[doc.path] = item.file
            report.metadata_warnings.extend((doc.path, warning) for warning in doc.warnings)
            if (
                previous
                and previous.content_hash == doc.content_hash
                and previous.access == doc.access  # stored before superbiz read ``access``
                and doc.path not in broken
            ):
                if moved:  # the file's folder moved (or was renamed): follow it
                    followed.append(dataclasses.replace(previous, source_file=str(item.file)))
                report.unchanged.append(doc.path)
                self._tick(on_progress, label)
                continue
            outcome = (
                report.added
                if previous is None
                else report.repaired
                if doc.path in broken and previous.content_hash == doc.content_hash
                else report.updated
            )
            pending.append(self._prepare(doc, item.file, outcome))
            if sum(len(p.chunks) for p in pending) >= INDEX_CHUNKS:
                self._index(pending, on_progress)
                pending = []
        self._index(pending, on_progress)
        self._finish_indexing(on_progress)
        kb.documents.save_all(followed)
        self._drop_copies(moving, seen, report)

        # Documents whose index was broken and that this run did not see again; not one
        # whose file this run could not load: its skip line says the row is kept, and the
        # run after the file is fixed repairs it
        for path in sorted(broken - seen.keys() - moving.keys()):
            source = stored[path].source_file
            if not under(source, unlisted) and os.path.realpath(source) not in unloaded:
                self._repair_unseen(stored[path], report)
        if prune:
            self._prune(stored, seen, paths, unlisted, report)
        self._encode_answers(len(found), on_total, on_progress)
        report.domains_changed.update(
            stored[path].domain for path in [*report.updated, *report.removed] if path in stored
        )
        if report.changed or report.answers_encoded:
            kb.store.flush(waiting=self.outside_stores)
            kb.changed()
        # what the KB measures about itself (key frequency, level thresholds), again after
        # any change, and once for a KB ingested before it was measured
        if report.changed or kb.key_frequency is None:
            refresh_statistics(kb, outside_stores=self.outside_stores)
        if self.domains is not None:
            self.domains.refresh(report.domains_changed)
        return report

    def load(self, file: Path, root: Path) -> SourceDocument:
        """Read one file into a document, its path relative to ``root``: the one place a
        run reads a file, so that how a file is read (its format) is decided here alone."""
        settings = self.kb.settings.ingest
        if (parsed := self.parsed.pop(file, None)) is not None:
            return parsed
        return load_document(
            file, root, settings.max_file_bytes, settings.encodings, conversion_limits(settings)
        )

    # -- steps ----------------------------------------------------------------
    def _drop_copies(
        self,
        moving: dict[str, Path],
        seen: dict[str, Path],
        report: IngestReport,
    ) -> None:
        """Remove the copies of a file stored under a narrower folder's path, once the file
        is stored under its path in the wider one (a copy whose path another file of this
        run took was replaced already). ``seen``: path → the file this run stored there."""
        landed = {file: path for path, file in seen.items()}
        copies = []
        for old, file in moving.items():
            if old in seen or file not in landed:
                continue
            row = self.kb.documents.get(landed[file])
            if row is not None and os.path.realpath(row.source_file) == os.path.realpath(file):
                copies.append(old)
        self.kb.store.delete_documents(copies)
        self.kb.documents.delete(copies)
        report.removed.extend(copies)

    def _reconcile(self, stored: dict[str, StoredDocument]) -> set[str]:
        """Drop index entries with no row; return rows whose index disagrees."""
        self.kb.store.delete_other_documents(list(stored))
        state = self.kb.store.index_state(list(stored))
        return {
            path
            for path, doc in stored.items()
            if state.get(path) != (doc.chunk_count, frozenset([doc.content_hash]))
            and not (doc.chunk_count == 0 and path not in state)
        }

    def _prepare(self, doc: SourceDocument, file: Path, outcome: list[str]) -> _Pending:
        settings = self.kb.settings.ingest
        enrichment = enrich(doc, self.metadata)
        if enrichment.failure:
            self._report.metadata_failures.append((doc.path, enrichment.failure))
        doc = enrichment.document
        chunks = chunk_markdown(doc.body, settings.chunk_size, settings.chunk_overlap)
        if chunks and self.kb.answer_encoder is not None:
            chars = self.kb.settings.advanced.retrieval.answers.head_chars
            self._heads[doc.path] = answer_head(doc.title, chunks[0].text, chars)
        return _Pending(doc, file, outcome, chunks)

    def _index(self, pending: list[_Pending], on_progress: Progress | None) -> None:
        """Start indexing ``pending`` documents, and finish the group started before:
        ``pending`` is embedded in the run's threads while the earlier group is inserted
        and, after this returns, while the run reads and converts its next files (which
        took turns with embedding before). ``_finish_indexing`` finishes the last group."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=EMBED_WORKERS, thread_name_prefix="embed")
        started = _Group(pending, self._pool, self._embed) if pending else None
        earlier, self._started = self._started, started
        if earlier is not None:
            self._write(earlier, on_progress)

    def _finish_indexing(self, on_progress: Progress | None) -> None:
        """Write the group still embedding: every document of the run is in after it."""
        group, self._started = self._started, None
        if group is not None:
            self._write(group, on_progress)

    def _write(self, group: _Group, on_progress: Progress | None) -> None:
        """Write ``group``'s documents beside their earlier versions: the new chunks
        inserted ``EMBED_BATCH`` at a time as their vectors come (a large file never holds
        all its vectors at once) under ids of their own (``chunk_id``), then each row, and
        only then the earlier chunks deleted. Readers find every document throughout; an
        embedder or store failure, or a crash, leaves the earlier version whole (the next
        run's reconcile repairs a doubled index). A row the database refuses is a skipped
        file: its new chunks are deleted, its earlier version kept."""
        pending = group.pending
        store = self.kb.store
        earlier = store.chunk_ids([p.doc.path for p in pending])
        fresh = {
            p.doc.path: {chunk_id(p.doc.path, c.index, p.doc.content_hash) for c in p.chunks}
            for p in pending
        }
        # the same version written again (a repair) replaces its own chunks in place
        store.delete_chunks(
            {i for path, ids in fresh.items() for i in ids & earlier.get(path, set())}
        )
        # The next batches are embedded (numpy, mostly off the GIL) while this one is
        # inserted (Milvus Lite analyses its BM25 text with jieba, in Python).
        for batch in group.batches:
            with self.outside_stores():
                vectors = group.upcoming.popleft().result()
            group.embed_next()
            pairs = zip(batch, vectors, strict=True)
            store.insert([_record(doc, chunk, vector) for (doc, chunk), vector in pairs])
        rows = [
            StoredDocument(
                path=doc.path,
                title=doc.title,
                domain=doc.domain,
                content_hash=doc.content_hash,
                size_bytes=doc.size_bytes,
                chunk_count=len(chunks),
                source_file=str(file),
                metadata=doc.metadata(),
                access=doc.access,
            )
            for doc, file, _, chunks in pending
        ]
        try:  # every row in one transaction; when one is refused, each on its own
            self.kb.documents.save_all(rows)
            refused: dict[str, str] = {}
        except DataError:
            refused = self._save_each(rows)
        stale: set[str] = set()  # the earlier version of each saved document, the new one
        # of each refused (its earlier version stays, as a broken file's does)
        for doc, _, outcome, _ in pending:
            old, new = earlier.get(doc.path, set()), fresh[doc.path]
            if doc.path in refused:
                stale |= new - old
                problem = refused[doc.path] + _kept(self.kb.documents.get(doc.path), doc.path)
                self._report.skipped.append((doc.path, f"refused by the database: {problem}"))
            else:
                stale |= old - new
                outcome.append(doc.path)
                self._report.domains_changed.add(doc.domain)
            self._tick(on_progress, doc.path)
        store.delete_chunks(stale)

    def _encode_answers(
        self,
        files: int,
        on_total: Callable[[int], None] | None,
        on_progress: Progress | None,
    ) -> None:
        """Encode the opening of every document without an answer vector for its current
        content: the ones this run wrote, and all of them when ``retrieval.answers`` was
        just turned on. A no-op without an answer model. The progress total grows by the
        documents to encode (about 0.13 s each on two cores)."""
        encoder = self.kb.answer_encoder
        if encoder is None:
            return
        chars = self.kb.settings.advanced.retrieval.answers.head_chars
        missing = self.kb.documents.without_answer_vector(encoder.name)
        if missing and on_total:
            on_total(files + len(missing))
        announced, unannounced = time.monotonic(), False
        try:
            for start in range(0, len(missing), ANSWER_BATCH):
                batch = missing[start : start + ANSWER_BATCH]
                rows = self._answer_rows(batch, encoder, chars)
                announce = start + ANSWER_BATCH >= len(missing) or (
                    time.monotonic() - announced >= ANSWER_ANNOUNCE_S
                )
                self.kb.documents.save_answer_vectors(encoder.name, rows, announce=announce)
                if announce:
                    announced = time.monotonic()
                unannounced = not announce
                self._report.answers_encoded += len(batch)
                for doc in batch:
                    self._tick(on_progress, f"answer model: {doc.path}")
        finally:
            if unannounced:  # the run stopped part-way: what it saved is used
                self.kb.documents.announce_change()

    def _answer_rows(
        self, batch: list[StoredDocument], encoder: AnswerEncoder, chars: int
    ) -> list[tuple[str, str, bytes]]:
        """``(path, content_hash, vector)`` of each document's opening in ``batch``."""
        unread = [doc.path for doc in batch if doc.path not in self._heads]
        # the first chunk of each document an earlier ingest wrote, in one query
        first = {
            path: chunks[0].text
            for path, chunks in self.kb.store.chunks_of_documents(unread).items()
        }
        heads = [
            self._heads.get(doc.path) or answer_head(doc.title, first.get(doc.path, ""), chars)
            for doc in batch
        ]
        vectors = encoder.passages(heads)
        return [
            (doc.path, doc.content_hash, to_bytes(v)) for doc, v in zip(batch, vectors, strict=True)
        ]

    def _save_each(self, rows: list[StoredDocument]) -> dict[str, str]:
        """Save ``rows`` one by one; the path and reason of each the database refuses."""
        refused = {}
        for row in rows:
            try:
                self.kb.documents.save(row)
            except DataError as exc:
                refused[row.path] = first_line(exc)
        return refused

    def _embed(self, batch: list[tuple[SourceDocument, Chunk]]) -> np.ndarray:
        texts = [embedding_text(doc.title, chunk.heading, chunk.text) for doc, chunk in batch]
        return self.kb.embedder.embed(texts)

    def _repair_unseen(self, doc: StoredDocument, report: IngestReport) -> None:
        source = Path(doc.source_file)
        root = root_of(source, doc.path)
        try:
            fresh = self.load(source, root)
        except (DocumentError, OSError, ValueError):
            self.kb.store.delete_documents([doc.path])
            self.kb.documents.delete([doc.path])
            report.removed.append(doc.path)
            return
        self._index([self._prepare(fresh, source, report.repaired)], None)
        self._finish_indexing(None)

    def _prune(
        self,
        stored: dict[str, StoredDocument],
        seen: dict[str, Path],
        paths: Sequence[Path],
        unlisted: Sequence[Path],
        report: IngestReport,
    ) -> None:
        """Drop the documents under the ingested folders whose files are gone; never one
        under a folder this run could not read, nor one whose file cannot be checked."""
        roots = [p.resolve() for p in paths if p.is_dir()]
        vanished = [
            doc.path
            for doc in stored.values()
            if doc.path not in seen
            and any(Path(doc.source_file).is_relative_to(root) for root in roots)
            and not under(doc.source_file, unlisted)
            and gone(doc.source_file)
        ]
        self.kb.store.delete_documents(vanished)
        self.kb.documents.delete(vanished)
        report.removed.extend(vanished)

    @staticmethod
    def _tick(on_progress: Progress | None, label: str) -> None:
        if on_progress:
            on_progress(label)


def _record(doc: SourceDocument, chunk: Chunk, vector: np.ndarray) -> ChunkRecord:
    return ChunkRecord(
        id=chunk_id(doc.path, chunk.index, doc.content_hash),
        doc_path=doc.path,
        domain=doc.domain,
        title=doc.title,
        heading=chunk.heading,
        chunk_index=chunk.index,
        content_hash=doc.content_hash,
        text=chunk.text,
        search_text=search_text(doc.title, chunk.heading, chunk.text),
        vector=vector,
        access=encode_access(doc.access),
    )


def _clash(real: str, other: str) -> str:
    """Why ``real`` is not stored over the document of ``other``, and what to do."""
    return (
        f"another file is stored at this path, from another folder: {other} (still there) "
        f"is not replaced by {real}; rename one of them, or delete {other} if this file "
        "replaces it"
    )


def _kept(stored: StoredDocument | None, label: str) -> str:
    """What a skip line adds when the file was ingested before: that version is kept (a
    file emptied or broken by mistake loses nothing), and so stays in lookups."""
    if stored is None:
        return ""
    name = "its earlier version" if stored.path == label else f"its earlier version ({stored.path})"
    return (
        f"; {name} stays searchable until the file is fixed "
        "(or deleted, then `superbiz ingest --prune`)"
    )
