"""Ingestion: files → documents → chunks → vectors, idempotent by content hash.

Per document the vector index is written first and the relational row last, so a
crash leaves at worst a row that disagrees with the index; every run starts by
reconciling the two (chunk count and content hash per document) and repairs what
disagrees. A file that cannot be read is reported and skipped; the rest goes on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from superbiz.exceptions import DocumentError
from superbiz.knowledge.base import KnowledgeBase
from superbiz.knowledge.chunking import Chunk, chunk_markdown, embedding_text, search_text
from superbiz.knowledge.documents import SourceDocument, load_document
from superbiz.knowledge.domains import DomainService
from superbiz.knowledge.metadata import MetadataWriter, enrich
from superbiz.retrieval.vector_store import ChunkRecord
from superbiz.storage.repository import StoredDocument

EMBED_BATCH = 128


@dataclass(slots=True)
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: documents ingested with derived metadata because the LLM failed, and why
    metadata_failures: list[tuple[str, str]] = field(default_factory=list)
    #: domains whose documents were added, changed or removed
    domains_changed: set[str] = field(default_factory=set)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.repaired or self.removed)

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.updated)} updated",
            f"{len(self.unchanged)} unchanged",
        ]
        if self.repaired:
            parts.append(f"{len(self.repaired)} repaired")
        if self.removed:
            parts.append(f"{len(self.removed)} removed")
        parts.append(f"{len(self.skipped)} skipped")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "repaired": self.repaired,
            "removed": self.removed,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "metadata_failures": [{"path": p, "reason": r} for p, r in self.metadata_failures],
            "domains_changed": sorted(self.domains_changed),
        }


@dataclass(frozen=True, slots=True)
class _Candidate:
    file: Path
    root: Path


Progress = Callable[[str], None]


class _Pending(NamedTuple):
    doc: SourceDocument
    file: Path
    outcome: list[str]
    chunks: list[Chunk]


def discover(paths: Sequence[Path], extensions: Sequence[str]) -> Iterator[_Candidate | tuple]:
    """Files to ingest under ``paths`` (sorted; hidden folders skipped), or
    ``(label, reason)`` for a path that cannot be ingested at all."""
    for path in paths:
        if path.is_dir():
            root = path.resolve()
            for file in sorted(root.rglob("*")):
                relative = file.relative_to(root)
                if any(part.startswith(".") for part in relative.parts):
                    continue
                if file.is_file() and file.suffix.lower() in extensions:
                    yield _Candidate(file, root)
        elif path.is_file():
            if path.suffix.lower() in extensions:
                yield _Candidate(path.resolve(), path.resolve().parent)
            else:
                yield (str(path), f"unsupported file type (expected {', '.join(extensions)})")
        else:
            yield (str(path), "no such file or directory")


def chunk_id(doc_path: str, index: int) -> str:
    return f"{hashlib.sha1(doc_path.encode()).hexdigest()[:20]}:{index}"


class Ingestor:
    """Ingests files into ``kb``; ``metadata`` writes missing covers/when_to_retrieve
    (an LLM), else they are derived; ``domains`` recomputes the changed domains."""

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        metadata: MetadataWriter | None = None,
        domains: DomainService | None = None,
    ) -> None:
        self.kb = kb
        self.metadata = metadata
        self.domains = domains
        self._report = IngestReport()

    def ingest(
        self,
        paths: Sequence[Path],
        *,
        prune: bool = False,
        rebuild: bool = False,
        on_total: Callable[[int], None] | None = None,
        on_progress: Progress | None = None,
    ) -> IngestReport:
        kb, settings = self.kb, self.kb.settings.ingest
        report = self._report = IngestReport()
        if rebuild:
            kb.store.drop()
            kb.documents.delete_all()
            kb.record_embedder()
        kb.check_index()
        kb.store.ensure_collection(kb.embedder.dimension)
        kb.record_embedder()

        stored = {doc.path: doc for doc in kb.documents.all()}
        broken = self._reconcile(stored)

        found = list(discover(paths, settings.extensions))
        if on_total:
            on_total(len(found))
        pending: list[_Pending] = []
        seen: dict[str, Path] = {}
        for item in found:
            if isinstance(item, tuple):
                report.skipped.append(item)
                self._tick(on_progress, item[0])
                continue
            label = item.file.relative_to(item.root).as_posix()
            try:
                doc = load_document(item.file, item.root, settings.max_file_bytes)
            except DocumentError as exc:
                report.skipped.append((exc.path, exc.reason))
                self._tick(on_progress, label)
                continue
            except OSError as exc:
                report.skipped.append((label, f"cannot read: {exc.strerror or exc}"))
                self._tick(on_progress, label)
                continue
            if doc.path in seen:
                report.skipped.append((doc.path, f"same relative path as {seen[doc.path]}"))
                self._tick(on_progress, label)
                continue
            seen[doc.path] = item.file
            previous = stored.get(doc.path)
            if previous and previous.content_hash == doc.content_hash and doc.path not in broken:
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
            if sum(len(p.chunks) for p in pending) >= EMBED_BATCH:
                self._index(pending, on_progress)
                pending = []
        self._index(pending, on_progress)

        # Documents whose index was broken and that this run did not see again.
        for path in sorted(broken - seen.keys()):
            self._repair_unseen(stored[path], report)
        if prune:
            self._prune(stored, seen, paths, report)
        report.domains_changed.update(
            stored[path].domain for path in [*report.updated, *report.removed] if path in stored
        )
        if report.changed:
            kb.store.flush()
            kb.invalidate()
        if self.domains is not None:
            self.domains.refresh(report.domains_changed)
        return report

    # -- steps ----------------------------------------------------------------
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
        return _Pending(doc, file, outcome, chunks)

    def _index(self, pending: list[_Pending], on_progress: Progress | None) -> None:
        if not pending:
            return
        texts = [
            embedding_text(p.doc.title, chunk.heading, chunk.text)
            for p in pending
            for chunk in p.chunks
        ]
        vectors = self.kb.embedder.embed(texts)
        offset = 0
        for doc, file, outcome, chunks in pending:
            records = [
                ChunkRecord(
                    id=chunk_id(doc.path, chunk.index),
                    doc_path=doc.path,
                    domain=doc.domain,
                    title=doc.title,
                    heading=chunk.heading,
                    chunk_index=chunk.index,
                    content_hash=doc.content_hash,
                    text=chunk.text,
                    search_text=search_text(doc.title, chunk.heading, chunk.text),
                    vector=vectors[offset + i],
                )
                for i, chunk in enumerate(chunks)
            ]
            offset += len(chunks)
            self.kb.store.replace_document(doc.path, records)
            self.kb.documents.save(
                StoredDocument(
                    path=doc.path,
                    title=doc.title,
                    domain=doc.domain,
                    content_hash=doc.content_hash,
                    size_bytes=doc.size_bytes,
                    chunk_count=len(records),
                    source_file=str(file),
                    metadata=doc.metadata(),
                )
            )
            outcome.append(doc.path)
            self._report.domains_changed.add(doc.domain)
            self._tick(on_progress, doc.path)

    def _repair_unseen(self, doc: StoredDocument, report: IngestReport) -> None:
        source = Path(doc.source_file)
        root = _root_of(source, doc.path)
        try:
            fresh = load_document(source, root, self.kb.settings.ingest.max_file_bytes)
        except (DocumentError, OSError, ValueError):
            self.kb.store.delete_documents([doc.path])
            self.kb.documents.delete([doc.path])
            report.removed.append(doc.path)
            return
        self._index([self._prepare(fresh, source, report.repaired)], None)

    def _prune(
        self,
        stored: dict[str, StoredDocument],
        seen: dict[str, Path],
        paths: Sequence[Path],
        report: IngestReport,
    ) -> None:
        roots = [p.resolve() for p in paths if p.is_dir()]
        gone = [
            doc.path
            for doc in stored.values()
            if doc.path not in seen
            and not Path(doc.source_file).exists()
            and any(Path(doc.source_file).is_relative_to(root) for root in roots)
        ]
        self.kb.store.delete_documents(gone)
        self.kb.documents.delete(gone)
        report.removed.extend(gone)

    @staticmethod
    def _tick(on_progress: Progress | None, label: str) -> None:
        if on_progress:
            on_progress(label)


def _root_of(source: Path, doc_path: str) -> Path:
    parts = len(Path(doc_path).parts)
    return source.parents[parts - 1] if parts else source.parent
