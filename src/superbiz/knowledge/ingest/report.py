"""What one ingest run did, file by file."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from superbiz.storage.repository import StoredDocument


#: a file an ingest left out, or whose metadata it derived, and why
class SkippedFile(BaseModel):
    path: str
    reason: str


@dataclass(slots=True)
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    #: the updated documents this version of superbiz reads otherwise than the one that
    #: stored them (``read_with``: a reader's or the chunker's version, the chunk size):
    #: read again after an upgrade, whether or not their files changed too
    reread: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: the skipped files that are part of another document or page (a page's include, a
    #: Sphinx build's copy of a page's source): left out on purpose, not for a fault
    parts: list[str] = field(default_factory=list)
    #: documents ingested with derived metadata because the LLM failed, and why
    metadata_failures: list[tuple[str, str]] = field(default_factory=list)
    #: what a document's frontmatter says that is not used (unknown keys), on every run
    #: until the file is fixed
    metadata_warnings: list[tuple[str, str]] = field(default_factory=list)
    #: domains whose documents were added, changed or removed
    domains_changed: set[str] = field(default_factory=set)
    #: documents whose opening the answer model encoded (``retrieval.answers``)
    answers_encoded: int = 0
    #: passages of updated documents whose words did not change: their vectors were kept,
    #: not embedded again
    vectors_reused: int = 0
    #: what the run advises about the knowledge base itself (an index an older superbiz
    #: built, which a rebuild would improve), once per run
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.repaired or self.removed)

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.updated)} updated"
            + (f" ({len(self.reread)} read again by this version)" if self.reread else ""),
            f"{len(self.unchanged)} unchanged",
        ]
        if self.repaired:
            parts.append(f"{len(self.repaired)} repaired")
        if self.removed:
            parts.append(f"{len(self.removed)} removed")
        parts.append(f"{len(self.skipped)} skipped")
        if self.answers_encoded:
            parts.append(f"{self.answers_encoded} openings encoded for answers")
        if self.vectors_reused:
            parts.append(f"{self.vectors_reused} passages kept their vectors")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "reread": self.reread,
            "unchanged": self.unchanged,
            "repaired": self.repaired,
            "removed": self.removed,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "parts": self.parts,
            "metadata_failures": [{"path": p, "reason": r} for p, r in self.metadata_failures],
            "metadata_warnings": [{"path": p, "reason": r} for p, r in self.metadata_warnings],
            "domains_changed": sorted(self.domains_changed),
            "answers_encoded": self.answers_encoded,
            "vectors_reused": self.vectors_reused,
            "notes": self.notes,
        }


def clash_note(real: str, other: str) -> str:
    """Why ``real`` is not stored over the document of ``other``, and what to do."""
    return (
        f"another file is stored at this path, from another folder: {other} (still there) "
        f"is not replaced by {real}; rename one of them, or delete {other} if this file "
        "replaces it"
    )


def kept_note(stored: StoredDocument | None, label: str) -> str:
    """What a skip line adds when the file was ingested before: that version is kept (a
    file emptied or broken by mistake loses nothing), and so stays in lookups."""
    if stored is None:
        return ""
    name = "its earlier version" if stored.path == label else f"its earlier version ({stored.path})"
    return (
        f"; {name} stays searchable until the file is fixed "
        "(or deleted, then `superbiz ingest --prune`)"
    )
