"""Documents and sources: list, text, upload and delete; every source and its sync; the
knowledge map.

Reads take the store lock for their store calls; document changes also take the
knowledge base's write lock, so they run one at a time in this process and every other
one (an upload's ingest lets go of the store lock while it embeds, most of its time).
"""

from __future__ import annotations

import logging
from pathlib import Path

from superbiz.access import Reader
from superbiz.agents.runtime import Runtime
from superbiz.api.responses.documents import (
    Deleted,
    DocumentView,
    IngestSummary,
    KnowledgeMapView,
    Uploaded,
)
from superbiz.exceptions import NotFoundError, SuperbizError
from superbiz.knowledge.documents.ingested import document_text
from superbiz.knowledge.documents.metadata import LLMMetadataWriter
from superbiz.knowledge.sources.lifecycle import UPLOADS, DocumentLifecycle, inside
from superbiz.knowledge.sources.source_list import SourceList
from superbiz.knowledge.sources.sync_result import SyncResult
from superbiz.storage.kb_writes import KnowledgeWriteLock
from superbiz.storage.repository import StoredDocument
from superbiz.storage.sources import GIT

log = logging.getLogger(__name__)


def _document_view(doc: StoredDocument, uploads: Path) -> DocumentView:
    return DocumentView(
        id=doc.path,
        path=doc.path,
        title=doc.title,
        domain=doc.domain,
        size_bytes=doc.size_bytes,
        chunk_count=doc.chunk_count,
        covers=doc.covers,
        when_to_retrieve=doc.when_to_retrieve,
        tags=doc.tags,
        origin=doc.origin,
        uploaded=inside(Path(doc.source_file), uploads),
    )


class DocumentService:
    """What the document, source and knowledge-map routes call."""

    def __init__(self, assistant: Runtime, writes: KnowledgeWriteLock) -> None:
        self.assistant = assistant
        self.settings = assistant.settings
        self.stores = assistant.store_lock
        #: one upload, delete or ingest at a time, in this process and every other one
        self.writes = writes
        self.uploads = self.settings.data_dir / UPLOADS
        #: the largest upload taken (``ingest.max-file-bytes``)
        self.max_file_bytes = self.settings.ingest.max_file_bytes

    def readable(self, reader: Reader) -> list[DocumentView]:
        """The documents ``reader`` may read."""
        with self.stores.held():
            stored = self.assistant.kb.documents.all()
            view = self.assistant.kb.view(reader)
        return [_document_view(d, self.uploads) for d in stored if view.may_read(d.path)]

    def text(self, path: str, reader: Reader) -> str:
        """A stored document's file, as it was ingested; not found for a reader who may
        not read it (404, not 403: whether it exists is not said either)."""
        with self.stores.held():
            stored = self.assistant.kb.documents.get(path)
            hidden = stored is not None and not self._may_read(path, reader)
        text = document_text(stored, self.settings.ingest) if stored and not hidden else None
        if text is None:
            raise NotFoundError(f"no document {path!r}", withheld=path if hidden else None)
        return text

    def _may_read(self, path: str, reader: Reader) -> bool:
        """Whether ``reader`` may read the document at ``path`` (stores held)."""
        return self.assistant.kb.view(reader).may_read(path)

    def upload(
        self,
        filename: str,
        data: bytes,
        domain: str | None,
        overwrite: bool = False,
        reader: Reader | None = None,
    ) -> Uploaded:
        """Store the file and ingest it the way ``superbiz ingest`` does (same metadata
        writer, same domain recompute): ``DocumentLifecycle.add``; an upload ``reader``
        may not read is never replaced."""
        with self.writes.held(), self.stores.held():
            added = self._lifecycle().add(filename, data, domain, overwrite, reader)
            self.assistant.invalidate_map()
        return Uploaded(
            status=added.status,
            document=_document_view(added.document, self.uploads),
            report=IngestSummary.model_validate(added.report.as_dict()),
        )

    def delete(self, path: str, reader: Reader) -> Deleted:
        """Remove a document from both stores: ``DocumentLifecycle.remove``; one ``reader``
        may not read is not found (404)."""
        with self.writes.held(), self.stores.held():
            if self.assistant.kb.documents.get(path) and not self._may_read(path, reader):
                raise NotFoundError(f"no document {path!r}", withheld=path)
            removed = self._lifecycle().remove(path)
            self.assistant.invalidate_map()
        return Deleted(
            deleted=removed.path,
            domain=removed.domain,
            file_removed=removed.file_removed,
            note=removed.note,
        )

    def _lifecycle(self) -> DocumentLifecycle:
        """The document verbs, with this assistant's metadata writer and domains; the LLM
        describing documents does so outside the store lock, so turns go on."""
        assistant = self.assistant
        model = None if assistant.extractive else self.stores.releasing(assistant.model)
        return DocumentLifecycle(
            assistant.kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=assistant.domains,
            # its embedding (most of an ingest) runs outside the store lock: turns go on
            outside_stores=self.stores.released,
        )

    def sources(self) -> SourceList:
        with self.stores.held():
            records = DocumentLifecycle(self.assistant.kb).list_sources()
        return SourceList.of(records, self.settings.sources.sync_interval_s)

    def sync_sources(self) -> list[SyncResult]:
        """Fetch every Git source and apply what changed; one that fails (a remote that
        cannot be reached) keeps its last good state and records the error, and the rest
        go on. The fetch takes no lock: turns wait only while changed files are written."""
        git = self._lifecycle().git()
        with self.stores.held():
            names = [s.name for s in git.sources.all() if s.kind == GIT]
        results = []
        for name in names:
            try:
                fetched = git.fetch(name)
                with self.writes.held(), self.stores.held():
                    results.append(git.apply(fetched))
                    self.assistant.invalidate_map()
            except SuperbizError as exc:  # recorded on the source, redacted
                log.warning("source %s: sync failed: %s", name, exc)
            except Exception:  # one source's failure never stops the others
                log.exception("source %s: sync failed", name)
        return results

    def knowledge_map(self, fmt: str, reader: Reader) -> KnowledgeMapView | str:
        """The map ``reader`` sees, as JSON with each document's path, or as the YAML the
        Planner reads."""
        with self.stores.held():
            kmap = self.assistant.knowledge_map(reader)
        if fmt == "yaml":
            return kmap.to_yaml(self.settings.advanced.planner.map_token_budget)
        data = kmap.as_dict()
        for entry, domain in zip(data["available_knowledge_domains"], kmap.domains, strict=True):
            for item, doc in zip(entry.get("documents", []), domain.documents, strict=False):
                item["path"] = doc.path
        return KnowledgeMapView.model_validate(data)
