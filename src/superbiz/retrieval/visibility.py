"""What one reader may see of the index, decided before any search runs.

Every search takes a ``Visibility`` (None: everything) and filters *inside* the search,
before ranking: the vector and BM25 searches by the chunks' scalar fields, the exact
index and the answer model by document. Dropping results afterwards would change the
levels, the counts and what a lookup says it withheld.

A chunk carries its document's own access list (``ChunkRecord.access``); whether a
reader may read a chunk is decided from that and from its domain, so a restricted
document is filtered from the moment its chunks are written, before its row (which the
rest of the knowledge base reads) exists. A list the relational store does not know yet
admits nobody: it is admitted once its row lands.
"""

from __future__ import annotations

from dataclasses import dataclass

from superbiz.access import NO_LIST


@dataclass(frozen=True, slots=True)
class Visibility:
    """One restricted reader's view: documents hidden by path (what the relational store
    knows), and the rule a chunk is filtered by (its domain and its own list)."""

    #: documents the reader may not read
    hidden: frozenset[str]
    #: domains whose rule leaves the reader out (a document with its own list aside)
    denied_domains: frozenset[str]
    #: the documents' own lists (encoded) that let the reader in
    admitted_lists: frozenset[str]
    #: whether any document has a list of its own (an index without the chunks' list
    #: field cannot filter by it)
    lists_in_use: bool

    def shows(self, doc_path: str) -> bool:
        return doc_path not in self.hidden

    def admits_chunk(self, domain: str, access: str) -> bool:
        """Whether a chunk of ``domain`` whose document's own list is ``access`` is
        searched (what the stores' filters say)."""
        if access == NO_LIST:
            return domain not in self.denied_domains
        return access in self.admitted_lists
