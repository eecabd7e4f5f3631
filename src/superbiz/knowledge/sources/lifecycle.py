"""The verbs that change which documents the knowledge base holds: add (an upload),
update (an upload that replaces an earlier one), remove, ingest a folder, and sync a
Git source (``superbiz.knowledge.sources.git_sources``).

The CLI and the HTTP service call these and nothing below them: where an upload's file
is placed, which document may replace which, and what a delete removes (the uploaded
file first, so that no later ingest brings the document back) are decided here once.
Each verb holds the knowledge base's write lock (re-entrant); callers that share the
stores with turns hold their own store lock around the call.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from superbiz.access import Reader
from superbiz.exceptions import ConflictError, DocumentError, NotFoundError
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.documents.document import conversion_limits, parse_document
from superbiz.knowledge.documents.domains import DEFAULT_DOMAIN, normalize_domain
from superbiz.knowledge.documents.metadata import MetadataWriter
from superbiz.knowledge.ingest.discovery import stored_roots
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.ingest.report import IngestReport
from superbiz.knowledge.ingest.run import Progress
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.statistics import refresh_statistics
from superbiz.knowledge.sources.git_sources import GitSources, source_name
from superbiz.knowledge.sources.sync_result import SyncResult
from superbiz.retrieval.store import Outside
from superbiz.storage.models import utcnow
from superbiz.storage.repository import StoredDocument
from superbiz.storage.sources import FOLDER, SourceRecord, SourceRepository

#: the folder of the data directory that uploaded files are kept in
UPLOADS = "uploads"
#: ``kb_meta`` key: the knowledge-base folders of documents deleted through the API (a JSON
#: list), so that their paths stay the files' when no other document of the folder is left
WITHDRAWN_ROOTS = "withdrawn-kb-folders"
MAX_NAME_CHARS = 120


def safe_filename(name: str | None, fallback: str = "document.md") -> str:
    """The last component of an uploaded file's name, with nothing that could leave the
    uploads folder or hide the file (separators, ``..``, leading dots, control characters).

    >>> safe_filename("../../etc/passwd.md"), safe_filename("..\\\\a b/支付 手册.md")
    ('passwd.md', '支付 手册.md')
    >>> safe_filename(".hidden.md"), safe_filename(""), safe_filename("a:b*?.txt")
    ('hidden.md', 'document.md', 'a_b_.txt')
    """
    base = unicodedata.normalize("NFKC", name or "").replace("\\", "/").split("/")[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C")
    base = re.sub(r"[^\w.\- ()\[\]@+,]+", "_", base).strip(" ._")
    base = re.sub(r"_{2,}", "_", base)
    if len(base) > MAX_NAME_CHARS:
        stem, dot, ext = base.rpartition(".")
        base = stem[: MAX_NAME_CHARS - len(ext) - 1] + dot + ext if dot else base[:MAX_NAME_CHARS]
    return base or fallback


def safe_domain(domain: str | None) -> str:
    """A domain usable as a folder name (``Payment Ops`` → ``payment-ops``).

    >>> safe_domain("../Payment Ops"), safe_domain(None), safe_domain("..")
    ('payment-ops', 'general', 'general')
    """
    cleaned = re.sub(r"[^\w-]+", "-", normalize_domain(domain or "")).strip("-_")
    return cleaned or DEFAULT_DOMAIN


def _write_atomically(target: Path, data: bytes) -> None:
    """``data`` at ``target`` all at once: a hidden part file (ingest skips it) renamed."""
    partial_file = target.with_name(f".{target.name}.part")
    partial_file.write_bytes(data)
    os.replace(partial_file, target)


def inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Added:
    """An uploaded document as stored: ``status`` is added, updated, repaired or unchanged."""

    status: str
    document: StoredDocument
    report: IngestReport


@dataclass(frozen=True, slots=True)
class Removed:
    path: str
    domain: str
    #: True when the document was an upload and its file was deleted too
    file_removed: bool
    #: for a knowledge-base file's document: out of the index until the next ingest
    note: str | None = None


class DocumentLifecycle:
    """Adds, updates and removes the documents of ``kb``; ``metadata``, ``domains`` and
    ``outside_stores`` as for ``Ingestor`` (the domains of what changed are recomputed)."""

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        metadata: MetadataWriter | None = None,
        domains: DomainService | None = None,
        outside_stores: Outside = nullcontext,
    ) -> None:
        self.kb = kb
        self.metadata = metadata
        self.domains = domains
        self.outside_stores = outside_stores
        self.uploads = kb.settings.data_dir / UPLOADS
        self.sources = SourceRepository(kb.engine)

    def _ingestor(self) -> Ingestor:
        return Ingestor(
            self.kb,
            metadata=self.metadata,
            domains=self.domains,
            outside_stores=self.outside_stores,
        )

    # -- folders and files ------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[Path],
        *,
        prune: bool = False,
        rebuild: bool = False,
        on_total: Callable[[int], None] | None = None,
        on_progress: Progress | None = None,
    ) -> IngestReport:
        """Bring the knowledge base in line with the files and folders ``paths``; each
        folder is recorded as a source (``superbiz sources``) with this run's counts. Every
        stored document an older reader or chunking made is read again too (uploads,
        other folders): after an upgrade, one ingest brings the whole knowledge base up."""
        report = self._ingestor().ingest(
            paths,
            prune=prune,
            rebuild=rebuild,
            reread=True,
            on_total=on_total,
            on_progress=on_progress,
        )
        self._record_folders([p for p in paths if p.is_dir()], report)
        return report

    def _record_folders(self, folders: Sequence[Path], report: IngestReport) -> None:
        known = self.sources.all()
        for folder in folders:
            location = os.path.realpath(folder)
            same = next((s for s in known if (s.kind, s.location) == (FOLDER, location)), None)
            name = same.name if same else source_name(location, {s.name for s in known})
            record = SourceRecord(
                name=name,
                kind=FOLDER,
                location=location,
                synced_at=utcnow(),
                counts={
                    "added": len(report.added),
                    "updated": len(report.updated),
                    "removed": len(report.removed),
                    "unchanged": len(report.unchanged),
                    "skipped": len(report.skipped),
                },
                skipped=[{"path": p, "reason": r} for p, r in report.skipped[:50]],
            )
            self.sources.synced(record)
            known = [s for s in known if s.name != name] + [record]

    # -- Git sources ------------------------------------------------------------------
    def git(self) -> GitSources:
        return GitSources(self._ingestor(), self.sources)

    def add_git(
        self,
        url: str,
        *,
        branch: str | None = None,
        subdir: str | None = None,
        domain: str | None = None,
    ) -> SyncResult:
        """Clone the repository at ``url`` and ingest it, or sync it if it is a source
        already (``GitSources.add``)."""
        folder = safe_domain(domain) if domain else None
        return self.git().add(url, branch=branch, subdir=subdir, domain=folder)

    def sync(self, name: str) -> SyncResult:
        """Fetch the Git source ``name`` and ingest what changed."""
        return self.git().sync(name)

    def list_sources(self) -> list[SourceRecord]:
        return self.sources.all()

    # -- uploads ----------------------------------------------------------------------
    def add(
        self,
        filename: str,
        data: bytes,
        domain: str | None,
        overwrite: bool = False,
        reader: Reader | None = None,
    ) -> Added:
        """Store an uploaded file under ``uploads/<domain>/`` and ingest it the way a folder
        is. A document from a knowledge-base folder at the same path is never replaced; an
        earlier upload only with ``overwrite`` (see ``update``), and only by a ``reader``
        (None: everyone) who may read it."""
        with self.kb.write_lock.held():
            return self._add(filename, data, domain, overwrite, reader or Reader.everyone())

    def update(self, filename: str, data: bytes, domain: str | None) -> Added:
        """``add``, replacing an earlier upload at the same path."""
        return self.add(filename, data, domain, overwrite=True)

    def _add(
        self, filename: str, data: bytes, domain: str | None, overwrite: bool, reader: Reader
    ) -> Added:
        settings = self.kb.settings.ingest
        folder = safe_domain(domain)
        name = safe_filename(filename)
        if Path(name).suffix.lower() not in settings.extensions:
            expected = ", ".join(settings.extensions)
            raise DocumentError(name, f"unsupported file type (expected {expected})")
        relative = PurePosixPath(folder, name)
        target = (self.uploads / folder / name).resolve()
        self._check_replace(str(relative), target, data, overwrite, reader)
        # refuse binary, empty, wrongly encoded or malformed before storing; converting
        # touches no store (a 2,000-page PDF held every turn for seconds), and the ingest
        # below takes this document instead of converting the file again
        with self.outside_stores():
            parsed = parse_document(data, relative, settings.encodings, conversion_limits(settings))
        if not target.is_relative_to(self.uploads.resolve()):  # pragma: no cover - sanitised
            raise DocumentError(name, "file name leaves the uploads folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        # an upload the ingest refuses puts the earlier one back, as its document is kept
        earlier = target.read_bytes() if target.is_file() else None
        _write_atomically(target, data)
        # only this file: another replica's delete may have left an earlier upload in
        # this replica's folder, which a folder ingest would bring back
        ingestor = self._ingestor()
        ingestor.parsed[target] = parsed
        report = ingestor.ingest([target], root=self.uploads)
        path = str(relative)
        for skipped, reason in report.skipped:
            if skipped == path:
                if earlier is None:
                    target.unlink(missing_ok=True)
                else:
                    _write_atomically(target, earlier)
                raise DocumentError(path, reason)
        status = next(
            (
                label
                for label, paths in (
                    ("added", report.added),
                    ("updated", report.updated),
                    ("repaired", report.repaired),
                )
                if path in paths
            ),
            "unchanged",
        )
        stored = self.kb.documents.get(path)
        if stored is None:  # pragma: no cover - ingest reported no skip
            raise DocumentError(path, "the document was not stored")
        return Added(status, stored, report)

    def _check_replace(
        self, path: str, target: Path, data: bytes, overwrite: bool, reader: Reader
    ) -> None:
        """Refuse to replace a knowledge-base document, an upload ``reader`` may not read,
        or an earlier upload with other content unless ``overwrite`` (the same bytes again
        are harmless: unchanged). One the reader may not read is refused in the words of a
        knowledge-base document: the path was taken, and nothing says by what."""
        existing = self.kb.documents.get(path)
        if existing is None:
            kb_file = self._kb_file_at(path)
            if kb_file is not None:
                raise ConflictError(
                    f"{path} belongs to the knowledge-base file {kb_file} (out of the index "
                    "until the next `superbiz ingest` brings it back) and an upload never "
                    "takes its path; rename the file or upload it to another domain"
                )
            return
        hidden = not self.kb.view(reader).may_read(path)
        if hidden or not inside(Path(existing.source_file), self.uploads):
            raise ConflictError(
                f"{path} is the path of a document an upload never replaces (from a "
                "knowledge-base folder, or one you may not read); rename the file or upload it "
                "to another domain",
                withheld=path if hidden else None,
            )
        if not overwrite and not (target.is_file() and target.read_bytes() == data):
            raise ConflictError(f"{path} was uploaded before; send overwrite=true to replace it")

    # -- removal ----------------------------------------------------------------------
    def remove(self, path: str) -> Removed:
        """Remove a document from both stores and recompute its domain. An uploaded file
        goes first, so that a later upload's ingest cannot bring the document back."""
        with self.kb.write_lock.held():
            kb = self.kb
            doc = kb.documents.get(path)
            if doc is None:
                raise NotFoundError(f"no document {path!r}")
            source = Path(doc.source_file)
            removed_file = False
            note = None
            if inside(source, self.uploads):
                source.unlink(missing_ok=True)
                removed_file = True
            else:
                self._withdraw(doc)
                note = (
                    f"{path} is a knowledge-base file ({source}): it is out of the index "
                    "until the next `superbiz ingest`, which brings it back (delete the file, "
                    "then `superbiz ingest --prune`, to remove it for good); no upload takes "
                    "its path"
                )
            kb.documents.delete([path])
            kb.store.delete_documents([path])
            # key frequency and thresholds, without the document (computed outside the
            # store lock: turns go on)
            refresh_statistics(kb, outside_stores=self.outside_stores)
            kb.changed()
            if self.domains is not None:
                self.domains.refresh({doc.domain})
            return Removed(path, doc.domain, removed_file, note)

    def _withdrawn_roots(self) -> set[Path]:
        stored = self.kb.meta.get(WITHDRAWN_ROOTS)
        return {Path(root) for root in json.loads(stored)} if stored else set()

    def _withdraw(self, doc: StoredDocument) -> None:
        """Remember the KB folder of ``doc``, deleted through the API: its path stays its
        file's even once no other document of that folder is stored."""
        roots = stored_roots([doc])
        known = self._withdrawn_roots()
        if roots - known:
            value = json.dumps(sorted(str(root) for root in known | roots))
            self.kb.meta.set(WITHDRAWN_ROOTS, value)

    def _kb_file_at(self, path: str) -> Path | None:
        """The knowledge-base file whose document path is ``path``, if one is there: in
        the folder of a stored KB document, or of one deleted through the API."""
        kb_docs = [
            doc
            for doc in self.kb.documents.all()
            if not inside(Path(doc.source_file), self.uploads)
        ]
        for root in sorted(stored_roots(kb_docs) | self._withdrawn_roots()):
            candidate = root / path
            if candidate.is_file():
                return candidate
        return None
