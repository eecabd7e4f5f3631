"""The knowledge map's domains as stored: the ``knowledge_domain`` table."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from superbiz.storage.db import upsert_insert
from superbiz.storage.knowledge_version import bump_version, deleted_rows
from superbiz.storage.models import KnowledgeDomainRow, utcnow


@dataclass(frozen=True, slots=True)
class DomainRecord:
    domain_id: str
    description: str | None
    when_to_retrieve: str | None
    document_count: int
    source: str


class DomainRepository:
    """The ``knowledge_domain`` table."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def all(self) -> list[DomainRecord]:
        with Session(self.engine) as session:
            rows = session.scalars(
                select(KnowledgeDomainRow).order_by(KnowledgeDomainRow.domain_id)
            )
            return [
                DomainRecord(
                    r.domain_id, r.description, r.when_to_retrieve, r.document_count, r.source
                )
                for r in rows
            ]

    def save(self, record: DomainRecord) -> None:
        """Insert or replace the domain's row in one statement: two turns (or replicas)
        building the map at once both save a new domain."""
        values = {
            "description": record.description,
            "when_to_retrieve": record.when_to_retrieve,
            "document_count": record.document_count,
            "source": record.source,
        }
        statement = (
            upsert_insert(self.engine, KnowledgeDomainRow)
            .values(domain_id=record.domain_id, **values)
            .on_conflict_do_update(
                index_elements=["domain_id"], set_={**values, "updated_at": utcnow()}
            )
        )
        with Session(self.engine) as session, session.begin():
            session.execute(statement)
            bump_version(session)

    def delete(self, domain_id: str) -> None:
        with Session(self.engine) as session, session.begin():
            statement = delete(KnowledgeDomainRow).where(KnowledgeDomainRow.domain_id == domain_id)
            if deleted_rows(session, statement):
                bump_version(session)
