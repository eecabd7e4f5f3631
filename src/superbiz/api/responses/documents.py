"""Documents (list, upload, delete) and the knowledge map as the routes return them; the
sources report is ``superbiz.knowledge.sources.source_list``'s."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from superbiz.knowledge.ingest.report import SkippedFile


class DocumentView(BaseModel):
    """A stored document; its id is its path."""

    id: str
    path: str
    title: str
    domain: str
    size_bytes: int
    chunk_count: int
    covers: list[str]
    when_to_retrieve: str | None
    tags: list[str]
    origin: dict[str, str] = Field(
        description="Where `covers` and `when_to_retrieve` came from: frontmatter, llm, derived."
    )
    uploaded: bool = Field(description="True when the file lives in the uploads folder.")


class DocumentList(BaseModel):
    documents: list[DocumentView]
    count: int


class IngestSummary(BaseModel):
    """What the ingest of the uploads folder did (as ``superbiz ingest`` reports it)."""

    added: list[str]
    updated: list[str]
    unchanged: list[str]
    repaired: list[str]
    removed: list[str]
    skipped: list[SkippedFile]
    metadata_failures: list[SkippedFile]
    #: unknown frontmatter keys and the like: stored, but worth fixing
    metadata_warnings: list[SkippedFile]
    domains_changed: list[str]
    notes: list[str] = Field(
        default_factory=list,
        description="Advice about the knowledge base itself, e.g. an index an older "
        "superbiz built that a rebuild would improve.",
    )


class Uploaded(BaseModel):
    status: Literal["added", "updated", "repaired", "unchanged"]
    document: DocumentView
    report: IngestSummary


class Deleted(BaseModel):
    deleted: str = Field(description="The document's path.")
    domain: str
    file_removed: bool = Field(description="True when an uploaded file was deleted too.")
    note: str | None = Field(
        default=None,
        description="For a knowledge-base file's document: it is out of the index until the "
        "next `superbiz ingest`, which brings it back.",
    )


class MapDocumentView(BaseModel):
    title: str
    covers: list[str] | None = Field(default=None, description="Absent when none are known.")
    path: str


class MapDomainView(BaseModel):
    domain_id: str
    description: str
    when_to_retrieve: str
    document_count: int
    documents: list[MapDocumentView] | None = Field(
        default=None, description="Absent for a domain without documents."
    )
    more_documents: int | None = Field(
        default=None, description="Documents left out to keep the map within its budget."
    )


class KnowledgeMapView(BaseModel):
    """The knowledge map the Planner sees."""

    available_knowledge_domains: list[MapDomainView]
    note: str | None = Field(default=None, description="Present when the map was shortened.")
