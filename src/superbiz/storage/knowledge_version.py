"""The knowledge version: one counter moved in the transaction of every change to the
documents or the domains, so that a process caching what it read of them knows when to
read again."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, Delete, Engine, select, update
from sqlalchemy.orm import Session

from superbiz.storage.models import KnowledgeVersionRow

_VERSION = select(KnowledgeVersionRow.version).where(KnowledgeVersionRow.id == 1)
_BUMP = (
    update(KnowledgeVersionRow)
    .where(KnowledgeVersionRow.id == 1)
    .values(version=KnowledgeVersionRow.version + 1)
)


def knowledge_version(engine: Engine) -> int:
    """The current count of changes to documents and domains: one indexed point query,
    cheap enough to run at the start of every turn."""
    with engine.connect() as connection:
        return int(connection.execute(_VERSION).scalar_one())


def bump_version(session: Session) -> None:
    """Count a change to documents or domains, in the transaction that makes it, so that
    a reader never sees the new version without the change (see ``knowledge_version``)."""
    session.execute(_BUMP)


def deleted_rows(session: Session, statement: Delete) -> int:
    """Run a DELETE; how many rows it removed."""
    result = cast("CursorResult[Any]", session.execute(statement))
    return result.rowcount or 0
