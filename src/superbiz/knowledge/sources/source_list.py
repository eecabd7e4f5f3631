"""The sources report: every folder and Git repository documents come from, and its last sync.

Its shape is defined here once: ``superbiz sources --json`` prints its ``sources``,
``GET /api/sources`` returns it whole, ``/openapi.json`` describes it, and a Git sync's
report (``superbiz ingest --git --json``) carries its source in the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from superbiz.knowledge.ingest.report import SkippedFile
from superbiz.storage.sources import SourceRecord


class SourceView(BaseModel):
    """A folder or Git repository documents come from, and its last sync."""

    name: str
    kind: str = Field(description="`folder` or `git`.")
    location: str = Field(description="A folder's path, or the URL without credentials.")
    branch: str | None = None
    subdir: str | None = None
    domain: str | None = None
    commit: str | None = Field(default=None, description="The commit last synced (Git).")
    synced_at: str | None = Field(default=None, description="When the last sync succeeded.")
    counts: dict[str, int] = Field(default_factory=dict)
    skipped: list[SkippedFile] = Field(default_factory=list)
    error: str | None = Field(
        default=None, description="Why the last attempt failed; its last good state stays."
    )
    error_at: str | None = None

    @classmethod
    def of(cls, record: SourceRecord) -> SourceView:
        return cls(
            name=record.name,
            kind=record.kind,
            location=record.location,
            branch=record.branch,
            subdir=record.subdir,
            domain=record.domain,
            commit=record.commit,
            synced_at=record.synced_at.isoformat() if record.synced_at else None,
            counts=record.counts,
            skipped=[SkippedFile.model_validate(item) for item in record.skipped],
            error=record.error,
            error_at=record.error_at.isoformat() if record.error_at else None,
        )


class SourceList(BaseModel):
    sources: list[SourceView]
    sync_interval_s: float = Field(description="`sources.sync-interval-s`; 0: no scheduled sync.")

    @classmethod
    def of(cls, records: Iterable[SourceRecord], sync_interval_s: float) -> SourceList:
        return cls(sources=[SourceView.of(r) for r in records], sync_interval_s=sync_interval_s)
