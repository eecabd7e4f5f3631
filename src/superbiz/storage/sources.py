"""The sources repository: which folders and Git repositories documents come from, and
how each one's last sync went."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from superbiz.storage.models import SourceRow, utcnow

FOLDER = "folder"
GIT = "git"


@dataclass(frozen=True, slots=True)
class SourceRecord:
    name: str
    kind: str
    #: a folder's real path, or a repository's URL without credentials
    location: str
    branch: str | None = None
    subdir: str | None = None
    domain: str | None = None
    commit: str | None = None
    synced_at: datetime | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    error_at: datetime | None = None


def _record(row: SourceRow) -> SourceRecord:
    return SourceRecord(
        name=row.name,
        kind=row.kind,
        location=row.location,
        branch=row.branch,
        subdir=row.subdir,
        domain=row.domain,
        commit=row.commit,
        synced_at=row.synced_at,
        counts=dict(row.counts or {}),
        skipped=list(row.skipped or []),
        error=row.error,
        error_at=row.error_at,
    )


class SourceRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def all(self) -> list[SourceRecord]:
        with Session(self.engine) as session:
            return [_record(r) for r in session.scalars(select(SourceRow).order_by(SourceRow.name))]

    def get(self, name: str) -> SourceRecord | None:
        with Session(self.engine) as session:
            row = session.scalar(select(SourceRow).where(SourceRow.name == name))
            return _record(row) if row else None

    def synced(self, record: SourceRecord) -> None:
        """Insert or update ``record`` after a successful sync: its error is cleared."""
        with Session(self.engine) as session, session.begin():
            row = session.scalar(select(SourceRow).where(SourceRow.name == record.name))
            if row is None:
                row = SourceRow(name=record.name)
                session.add(row)
            row.kind = record.kind
            row.location = record.location
            row.branch = record.branch
            row.subdir = record.subdir
            row.domain = record.domain
            row.commit = record.commit
            row.synced_at = record.synced_at or utcnow()
            row.counts = record.counts
            row.skipped = record.skipped
            row.error = None
            row.error_at = None

    def failed(self, name: str, error: str) -> None:
        """Note that the last attempt to sync ``name`` failed; its last good state stays."""
        with Session(self.engine) as session, session.begin():
            row = session.scalar(select(SourceRow).where(SourceRow.name == name))
            if row is not None:
                row.error = error
                row.error_at = utcnow()
