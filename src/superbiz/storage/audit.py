"""The audit trail: who did what, when (sign-ins, uploads, deletes, role changes, refused
requests), kept in the relational store so every replica writes to the same trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from superbiz.storage._storable import without_nul
from superbiz.storage.models import PATH_MAX, USER_NAME_MAX, AuditEventRow


@dataclass(frozen=True, slots=True)
class AuditEvent:
    id: int
    at: datetime
    actor: str
    action: str
    target: str | None
    detail: dict[str, Any] | None
    address: str | None


class AuditRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(
        self,
        actor: str,
        action: str,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
        address: str | None = None,
    ) -> None:
        with Session(self.engine) as session, session.begin():
            session.add(
                AuditEventRow(
                    actor=without_nul(actor)[:USER_NAME_MAX],
                    action=action,
                    target=without_nul(target)[:PATH_MAX] if target else None,
                    detail=without_nul(detail),
                    address=(address or None) and address[:64],
                )
            )

    def events(
        self,
        *,
        since: datetime | None = None,
        actor: str | None = None,
        action: str | None = None,
        limit: int = 200,
    ) -> list[AuditEvent]:
        """Latest first."""
        query = select(AuditEventRow).order_by(AuditEventRow.id.desc()).limit(limit)
        if since is not None:
            query = query.where(AuditEventRow.at >= since)
        if actor is not None:
            query = query.where(AuditEventRow.actor == actor)
        if action is not None:
            query = query.where(AuditEventRow.action == action)
        with Session(self.engine) as session:
            return [
                AuditEvent(r.id, r.at, r.actor, r.action, r.target, r.detail, r.address)
                for r in session.scalars(query)
            ]
