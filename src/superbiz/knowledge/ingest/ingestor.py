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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from pathlib import Path

from superbiz._process import release_freed_memory
from superbiz.exceptions import DocumentError
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.coverage.map import keeping_entry_vectors
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.documents.document import (
    SourceDocument,
    conversion_limits,
    indexed_hash,
    load_document,
    read_with,
)
from superbiz.knowledge.documents.metadata import MetadataWriter, enrich
from superbiz.knowledge.documents.site_titles import SiteTitles
from superbiz.knowledge.ingest.answers import encode_answers
from superbiz.knowledge.ingest.batches import (
    EMBED_WORKERS,
    INDEX_CHUNKS,
    THREADED_GROUPS,
    Group,
    Pending,
    embed_batch,
)
from superbiz.knowledge.ingest.discovery import (
    Candidate,
    Unreadable,
    discover,
    each_file_once,
    gone,
    placement,
    root_of,
    stored_files,
    stored_roots,
    under,
)
from superbiz.knowledge.ingest.parts import without_fragments
from superbiz.knowledge.ingest.report import IngestReport, clash_note, kept_note
from superbiz.knowledge.ingest.run import IngestRun, Progress
from superbiz.knowledge.ingest.writing import write_group
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.statistics import refresh_statistics
from superbiz.retrieval.answers import answer_head
from superbiz.retrieval.embedders import EmbedTexts
from superbiz.retrieval.store import Outside
from superbiz.storage.repository import StoredDocument

__all__ = ["IngestReport", "IngestRun", "Ingestor", "Progress"]


class Ingestor:
    """Ingests files into ``kb``; ``metadata`` writes missing covers/when_to_retrieve
    (an LLM), else they are derived; ``domains`` recomputes the changed domains. Each
    ``ingest`` is one ``IngestRun``: nothing of a run stays here.

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
        outside_stores: Outside = nullcontext,
    ) -> None:
        self.kb = kb
        self.metadata = metadata
        self.domains = domains
        self.outside_stores = outside_stores
        #: files already read and converted by the caller (an upload, checked before it
        #: was stored), taken by ``load`` instead of converting them again
        self.parsed: dict[Path, SourceDocument] = {}

    def ingest(
        self,
        paths: Sequence[Path],
        *,
        prune: bool = False,
        rebuild: bool = False,
        reread: bool = False,
        on_total: Callable[[int], None] | None = None,
        on_progress: Progress | None = None,
        root: Path | None = None,
    ) -> IngestReport:
        """Bring the knowledge base in line with ``paths`` (files in the KB folder ``root``
        get their paths from it; ``reread``: and each stored document an older reader or
        chunking made); one writer at a time, in any process (``KnowledgeBase.write_lock``):
        its first step drops index entries with no document row (another writer's)."""
        run = IngestRun(
            paths,
            prune=prune,
            rebuild=rebuild,
            reread=reread and not rebuild,
            root=root,
            on_total=on_total,
            on_progress=on_progress,
        )
        with self.kb.write_lock.held():
            try:
                self._run(run)
            finally:  # a run that stopped part-way leaves its last group unwritten, whole
                run.started = None
                if run.pool is not None:
                    run.pool.shutdown(cancel_futures=True)
                    run.pool = None
                run.closing.close()
        return run.report

    def _run(self, run: IngestRun) -> None:
        again = self._open_index(run)
        self._survey(run, again)
        for item in run.found:
            self._read(run, item)
        self._index(run, run.pending)
        self._finish_indexing(run)
        self._tidy(run)
        run.report.notes.extend(run.sites.problems)
        self._announce(run)  # the map's entries embed on the run's worker processes too
        run.closing.close()  # no embedding worker idles through what the caller does next

    # -- steps ----------------------------------------------------------------
    def _open_index(self, run: IngestRun) -> list[Candidate]:
        """Check the index against the embedder; a rebuild empties it first, and returns
        every stored document whose file is still there (other folders', uploads), not
        only those under the run's paths: nothing disappears with it."""
        kb = self.kb
        again = stored_files(kb.documents.all()) if run.rebuild else []
        if run.rebuild:
            kb.store.drop()
            kb.documents.delete_all()
            kb.record_embedder()
        kb.check_index()
        kb.store.ensure_collection(kb.embedder.dimension)
        kb.record_embedder()
        if kb.store.upgrade:
            run.report.notes.append(f"the knowledge base still works, but {kb.store.upgrade}")
        return again

    def _survey(self, run: IngestRun, again: list[Candidate]) -> None:
        """What is stored, what disagrees with the index, what the paths hold, and where
        each file goes. Each file is stored once, under its path in the widest KB folder
        that holds it (given now, or ingested before): the root to load it against, and
        the copies stored under narrower folders' paths, removed once it has landed."""
        run.stored = dict(self.kb.current_documents(fresh=True))  # read by difference
        if run.reread:  # what an older reader or chunking made, wherever its file is
            now = partial(read_with, settings=self.kb.settings.ingest)
            again += stored_files(d for d in run.stored.values() if d.read_with != now(d.path))
        for row in run.stored.values():
            run.by_source.setdefault(run.real(row.source_file), []).append(row)
        run.broken = self._reconcile(run.stored)
        extensions = self.kb.settings.ingest.extensions
        found = each_file_once([*discover(run.paths, extensions, run.root), *again], run.real)
        run.found, fragments = without_fragments(found, self.kb.domain_access)
        run.fragments = {run.real(file) for file in fragments}
        run.report.parts = list(fragments.values())
        if run.on_total:
            run.on_total(len(run.found))
        kb_roots = stored_roots(run.stored.values(), run.real)
        run.placed = {
            item.file: placement(
                item, run.by_source.get(run.real(item.file), []), kb_roots, run.real
            )
            for item in run.found
            if isinstance(item, Candidate)
        }
        run.moving = {old: item for item, (_, olds) in run.placed.items() for old in olds}

    def _read(self, run: IngestRun, item: Candidate | Unreadable | tuple[str, str]) -> None:
        """One thing discovery found: skipped with its reason, unchanged, or read and
        chunked into ``run.pending`` (indexed once enough chunks are gathered)."""
        report = run.report
        if isinstance(item, Unreadable):
            run.unlisted.append(item.folder)
            run.skip(item.label, item.reason)
            return
        if isinstance(item, tuple):
            run.skip(*item)
            return
        label = item.file.relative_to(item.root).as_posix()
        real = run.real(item.file)
        earlier = next(iter(run.by_source.get(real, [])), None)
        try:
            # reading and converting a file touches no store: turns go on meanwhile
            with self.outside_stores():
                doc = self.load(item.file, run.placed[item.file][0], run.sites)
        except DocumentError as exc:
            run.unloaded.add(real)
            run.skip(exc.path, exc.reason + kept_note(earlier, exc.path), label)
            return
        except OSError as exc:
            run.unloaded.add(real)
            run.skip(label, f"cannot read: {exc.strerror or exc}{kept_note(earlier, label)}")
            return
        if doc.path in run.seen:
            run.skip(doc.path, f"same relative path as {run.seen[doc.path]}", label)
            return
        previous = run.stored.get(doc.path)
        other = previous.source_file if previous else None
        moved = bool(other) and run.real(other or "") != real
        # another file's document is never replaced while that file is there, unless it
        # is a copy of a file this run has already stored under its KB path
        freed = doc.path in run.moving and run.moving[doc.path] in run.seen.values()
        if other and moved and not freed and not gone(other):
            run.skip(doc.path, clash_note(real, other), label)
            return
        run.seen[doc.path] = item.file
        report.metadata_warnings.extend((doc.path, warning) for warning in doc.warnings)
        if (
            previous
            and previous.content_hash == doc.content_hash
            # a row stored before superbiz read ``access`` or recorded ``read_with`` is rewritten
            and (previous.access, previous.read_with) == (doc.access, doc.read_with)
            and doc.path not in run.broken
        ):
            if moved:  # the file's folder moved (or was renamed): follow it
                run.followed.append(dataclasses.replace(previous, source_file=str(item.file)))
            report.unchanged.append(doc.path)
            run.tick(label)
            return
        outcome = (
            report.added
            if previous is None
            else report.repaired
            if doc.path in run.broken and previous.content_hash == doc.content_hash
            else report.updated
        )
        if outcome is report.updated and previous and previous.read_with not in ("", doc.read_with):
            report.reread.append(doc.path)
        run.pending.append(self._prepare(run, doc, item.file, outcome))
        if sum(len(p.chunks) for p in run.pending) >= INDEX_CHUNKS:
            self._index(run, run.pending, bulk=True)
            run.pending = []

    def _tidy(self, run: IngestRun) -> None:
        """After every file is in: rows follow their moved files, copies under narrower
        folders go, broken documents this run did not see are repaired, vanished files'
        documents pruned, and the answer model encodes what it lacks."""
        report, stored = run.report, run.stored
        self.kb.documents.save_all(run.followed)
        self._drop_copies(run)
        # Documents whose index was broken and that this run did not see again; not one
        # whose file this run could not load: its skip line says the row is kept, and the
        # run after the file is fixed repairs it
        for path in sorted(run.broken - run.seen.keys() - run.moving.keys()):
            source = stored[path].source_file
            if not under(source, run.unlisted) and run.real(source) not in run.unloaded:
                self._repair_unseen(run, stored[path])
        if run.prune:
            self._prune(run)
        encode_answers(self.kb, run)
        report.domains_changed.update(
            stored[path].domain for path in [*report.updated, *report.removed] if path in stored
        )

    def _announce(self, run: IngestRun) -> None:
        """Tell readers of the change: the index flushed, the caches built again, the
        statistics measured again (and once for a KB ingested before it was measured, or
        measured by an older method) while the written documents' map entries embed in
        threads, on the run's worker processes where it has them (both are mostly one
        core's work: 3.0 → 2.5 s after dev2's 477 documents), the changed domains
        summarised again."""
        kb, report = self.kb, run.report
        written = {*report.added, *report.updated, *report.repaired}
        with keeping_entry_vectors(kb, written, outside=self.outside_stores, embed=run.embed):
            if report.changed or report.answers_encoded:
                kb.store.flush(waiting=self.outside_stores)
                kb.changed()
            calibration = kb.calibration
            older = calibration is not None and not calibration.current
            if report.changed or kb.key_frequency is None or older:
                refresh_statistics(kb, outside_stores=self.outside_stores)
        if self.domains is not None:
            self.domains.refresh(report.domains_changed)
        if report.changed:
            release_freed_memory()  # a run's copies and batches, not kept while serving

    def load(self, file: Path, root: Path, sites: SiteTitles | None = None) -> SourceDocument:
        """Read one file into a document, its path relative to ``root``, stored under its
        ``indexed_hash``: the one place a run reads a file (decides how, by its format;
        a page of a documentation site without a title of its own takes the site's)."""
        settings = self.kb.settings.ingest
        doc = self.parsed.pop(file, None) or load_document(
            file,
            root,
            settings.max_file_bytes,
            settings.encodings,
            conversion_limits(settings),
            self.kb.domain_access,
            sites,
        )
        refused = self.kb.store.refuses(doc.path, doc.domain)
        if refused:
            raise DocumentError(doc.path, refused)
        stored_as = indexed_hash(doc.content_hash, doc.path, settings)
        return dataclasses.replace(
            doc, content_hash=stored_as, read_with=read_with(doc.path, settings)
        )

    # -- the steps' parts -----------------------------------------------------
    def _drop_copies(self, run: IngestRun) -> None:
        """Remove the copies of a file stored under a narrower folder's path, once the file
        is stored under its path in the wider one (a copy whose path another file of this
        run took was replaced already)."""
        landed = {file: path for path, file in run.seen.items()}
        copies = []
        for old, file in run.moving.items():
            if old in run.seen or file not in landed:
                continue
            row = self.kb.documents.get(landed[file])
            if row is not None and run.real(row.source_file) == run.real(file):
                copies.append(old)
        self.kb.store.delete_documents(copies)
        self.kb.documents.delete(copies)
        run.report.removed.extend(copies)

    def _reconcile(self, stored: dict[str, StoredDocument]) -> set[str]:
        """Drop index entries with no row; return rows whose index disagrees. The whole
        index is read once (a delete naming every stored document, then a query per 200 of
        them, took 1.3 s of a one-file upload into 11,925 documents)."""
        state = self.kb.store.index_state(None)
        self.kb.store.delete_documents([path for path in state if path not in stored])
        return {
            path
            for path, doc in stored.items()
            if state.get(path) != (doc.chunk_count, frozenset([doc.content_hash]))
            and not (doc.chunk_count == 0 and path not in state)
        }

    def _prepare(
        self, run: IngestRun, doc: SourceDocument, file: Path, outcome: list[str]
    ) -> Pending:
        settings = self.kb.settings.ingest
        enrichment = enrich(doc, self.metadata)
        if enrichment.failure:
            run.report.metadata_failures.append((doc.path, enrichment.failure))
        doc = enrichment.document
        chunks = chunk_markdown(doc.body, settings.chunk_size, settings.chunk_overlap)
        if chunks and self.kb.answer_encoder is not None:
            chars = self.kb.settings.advanced.retrieval.answers.head_chars
            run.heads[doc.path] = answer_head(doc.title, chunks[0].text, chars)
        return Pending(doc, file, outcome, chunks)

    def _index(
        self, run: IngestRun, pending: list[Pending], *, tick: bool = True, bulk: bool = False
    ) -> None:
        """Start indexing ``pending`` documents, and finish the group started before:
        ``pending`` is embedded in the run's threads while the earlier group is inserted
        and, after this returns, while the run reads and converts its next files (which
        took turns with embedding before); an updated document's passages whose words did
        not change keep their vectors. ``_finish_indexing`` finishes the last group.
        ``bulk``: the group is full and more may come (``_embedding``)."""
        if run.pool is None:
            run.pool = ThreadPoolExecutor(max_workers=EMBED_WORKERS, thread_name_prefix="embed")
        embed = partial(embed_batch, self._embedding(run, bulk))
        known = self.kb.store.vectors_by_words(run.earlier_versions(pending))
        started = Group(pending, run.pool, embed, known) if pending else None
        earlier, run.started = run.started, started
        if earlier is not None:
            write_group(self.kb, run, earlier, tick=tick, outside_stores=self.outside_stores)

    def _embedding(self, run: IngestRun, bulk: bool) -> EmbedTexts:
        """What the run's threads embed with: the embedder, and from the run's full group
        after ``THREADED_GROUPS`` on its worker processes (``Embedder.in_processes``) where
        Milvus Lite runs in this process: Lite's BM25 analysis is Python, and the embedding
        threads waited for the GIL (``eval scale`` at 11,925 documents: an embedded ingest
        took 288 s in threads, 224 s with the workers). Beside a Milvus server the threads
        reach the embedder's own speed and the workers were slower (300 s against 272, the
        server on the same two cores). A run without a full group keeps its threads: a
        worker's start (an interpreter and the kept model files) costs about 0.5 s of a
        core."""
        if bulk:
            run.full_groups += 1
        settings = self.kb.settings
        if run.full_groups == THREADED_GROUPS + 1 and settings.uses_milvus_lite:
            processes = self.kb.embedder.in_processes(settings.ingest.embedding_processes)
            run.embed = run.closing.enter_context(processes)
        return run.embed or self.kb.embedder.embed

    def _finish_indexing(self, run: IngestRun, *, tick: bool = True) -> None:
        """Write the group still embedding: every document of the run is in after it."""
        group, run.started = run.started, None
        if group is not None:
            write_group(self.kb, run, group, tick=tick, outside_stores=self.outside_stores)

    def _repair_unseen(self, run: IngestRun, doc: StoredDocument) -> None:
        source = Path(doc.source_file)
        root = root_of(source, doc.path)
        try:
            fresh = self.load(source, root, run.sites)
        except (DocumentError, OSError, ValueError):
            self.kb.store.delete_documents([doc.path])
            self.kb.documents.delete([doc.path])
            run.report.removed.append(doc.path)
            return
        self._index(run, [self._prepare(run, fresh, source, run.report.repaired)], tick=False)
        self._finish_indexing(run, tick=False)

    def _prune(self, run: IngestRun) -> None:
        """Drop the documents under the ingested folders whose files are gone or are now
        another page's fragment; never one under a folder this run could not read, nor one
        whose file cannot be checked."""
        roots = [p.resolve() for p in run.paths if p.is_dir()]
        vanished = [
            doc.path
            for doc in run.stored.values()
            if doc.path not in run.seen
            and under(doc.source_file, roots)
            and not under(doc.source_file, run.unlisted)
            and (gone(doc.source_file) or run.real(doc.source_file) in run.fragments)
        ]
        self.kb.store.delete_documents(vanished)
        self.kb.documents.delete(vanished)
        run.report.removed.extend(vanished)
