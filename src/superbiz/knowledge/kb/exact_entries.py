"""A stored document's exact keys, as the exact index and the statistics read them."""

from __future__ import annotations

from pathlib import PurePosixPath

from superbiz.retrieval.exact_index import ExactEntry, names_by_file_name
from superbiz.storage.repository import StoredDocument


def exact_entry(doc: StoredDocument, *, derived_covers: bool = False) -> ExactEntry:
    """``doc``'s exact keys. Derived covers are only headings: the map shows them (and the
    map planner matches them, ``derived_covers``), a lookup's exact matching does not. The
    file's name, stored among the aliases at ingest, is a key only when it is a name
    (``names_by_file_name``)."""
    derived = doc.origin.get("covers") == "derived"
    stem = PurePosixPath(doc.path).stem
    return ExactEntry(
        doc_path=doc.path,
        title=doc.title,
        domain=doc.domain,
        aliases=tuple(a for a in doc.aliases if a != stem or names_by_file_name(stem)),
        covers=tuple(doc.covers) if derived_covers or not derived else (),
        tags=tuple(doc.tags),
    )
