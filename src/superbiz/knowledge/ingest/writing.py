"""Writing one embedded group of an ingest's documents beside their earlier versions:
new chunks first, then the rows, then the earlier chunks deleted, so readers find every
document throughout and a failure leaves the earlier version whole (``Ingestor`` runs it
for each group it embeds).
"""

from __future__ import annotations

from sqlalchemy.exc import DataError

from superbiz.exceptions import first_line
from superbiz.knowledge.ingest.batches import Group, chunk_id, chunk_record, document_row
from superbiz.knowledge.ingest.report import kept_note
from superbiz.knowledge.ingest.run import IngestRun
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.store import Outside
from superbiz.storage.repository import StoredDocument

__all__ = ["write_group"]


def write_group(
    kb: KnowledgeBase, run: IngestRun, group: Group, *, tick: bool, outside_stores: Outside
) -> None:
    """Write ``group``'s documents beside their earlier versions: the new chunks
    (``EMBED_BATCH`` at a time as their vectors come, so a large file never holds all
    at once, then those that kept their vectors) under ids of their own (``chunk_id``),
    then each row, and only then the earlier chunks deleted. Readers find every
    document throughout; an embedder or store failure, or a crash, leaves the earlier
    version whole (the next run's reconcile repairs a doubled index). A row the
    database refuses is a skipped file: its new chunks deleted, its earlier version kept."""
    pending = group.pending
    store = kb.store
    # Only a stored document can have chunks (``Ingestor._reconcile`` dropped the others' under
    # the write lock); asking for all scanned the whole index once a group.
    earlier = store.chunk_ids(run.earlier_versions(pending))
    fresh = {
        p.doc.path: {chunk_id(p.doc.path, c.index, p.doc.content_hash) for c in p.chunks}
        for p in pending
    }
    # the same version written again (a repair) replaces its own chunks in place
    store.delete_chunks({i for path, ids in fresh.items() for i in ids & earlier.get(path, set())})
    # The next batches are embedded (numpy, mostly off the GIL) while this one is
    # inserted (Milvus Lite analyses its BM25 text with jieba, in Python).
    for batch in group.batches:
        with outside_stores():
            vectors = group.upcoming.popleft().result()
        group.embed_next()
        pairs = zip(batch, vectors, strict=True)
        store.insert([chunk_record(doc, chunk, vector) for (doc, chunk), vector in pairs])
    if group.reused:  # last: an embedder failing leaves none of a one-batch group in
        store.insert(group.reused)
        run.report.vectors_reused += len(group.reused)
    rows = [document_row(p) for p in pending]
    try:  # every row in one transaction; when one is refused, each on its own
        kb.documents.save_all(rows)
        refused: dict[str, str] = {}
    except DataError:
        refused = _save_each(kb, rows)
    stale: set[str] = set()  # the earlier version of each saved document, the new one
    # of each refused (its earlier version stays, as a broken file's does)
    for doc, _, outcome, _ in pending:
        old, new = earlier.get(doc.path, set()), fresh[doc.path]
        if doc.path in refused:
            stale |= new - old
            problem = refused[doc.path] + kept_note(kb.documents.get(doc.path), doc.path)
            run.report.skipped.append((doc.path, f"refused by the database: {problem}"))
        else:
            stale |= old - new
            outcome.append(doc.path)
            run.report.domains_changed.add(doc.domain)
        if tick:
            run.tick(doc.path)
    store.delete_chunks(stale)


def _save_each(kb: KnowledgeBase, rows: list[StoredDocument]) -> dict[str, str]:
    """Save ``rows`` one by one; the path and reason of each the database refuses."""
    refused = {}
    for row in rows:
        try:
            kb.documents.save(row)
        except DataError as exc:
            refused[row.path] = first_line(exc)
    return refused
