"""The stored documents as this process last read them, brought up to date by difference.

Every cache built from the documents (the exact index, the knowledge map, the domains'
summaries) used to read every row again after any change, its own or another process's.
A ``DocumentMirror`` reads one light fingerprint per document (content hash, domain,
title, last update) and only the rows whose fingerprint moved: a change of N documents
reads N rows. The caches then compare each document object with the one they last used
(``is``) and redo the changed ones only. Where the knowledge version has not moved since
the last refresh (every document write counts in it, in its own transaction), nothing was
written, and not even the fingerprints are read: an upload asked three times for them
after its last write (0.25 s each at 50,000 documents).
"""

from __future__ import annotations

from typing import Any

from superbiz.storage.knowledge_version import knowledge_version
from superbiz.storage.repository import DocumentRepository, StoredDocument


class DocumentMirror:
    """Path → ``StoredDocument``; an unchanged document keeps its object across refreshes.
    ``rows_read`` counts the rows read (what a change costs)."""

    def __init__(self, repository: DocumentRepository) -> None:
        self._repository = repository
        self._prints: dict[str, tuple[Any, ...]] = {}
        #: replaced whole on each refresh, never changed in place (readers iterate it)
        self.rows: dict[str, StoredDocument] = {}
        self.rows_read = 0
        self._version: int | None = None  # the knowledge version the rows were read at

    def refresh(self) -> dict[str, StoredDocument]:
        version = knowledge_version(self._repository.engine)  # read first: a write after
        if version == self._version:  # it moves it, and the next refresh reads again
            return self.rows
        prints = self._repository.fingerprints()
        changed = {path for path, print_ in prints.items() if self._prints.get(path) != print_}
        rows = {path: doc for path, doc in self.rows.items() if path in prints}
        kept = {path: print_ for path, print_ in prints.items() if path not in changed}
        for path in changed:
            rows.pop(path, None)  # deleted since the fingerprints were read: not read back
        for doc, print_ in self._repository.with_fingerprints(sorted(changed)):
            rows[doc.path] = doc
            kept[doc.path] = print_
            self.rows_read += 1
        self.rows, self._prints, self._version = dict(sorted(rows.items())), kept, version
        return self.rows
