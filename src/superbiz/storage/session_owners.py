"""Whose each session is. A session's first turn claims it for its person; the claim never
changes (a session never moves between people) and outlives clearing the session, so its
id is never handed to someone else."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from superbiz.storage.db import upsert_insert
from superbiz.storage.models import (
    ChatSessionRow,
    SessionOwnerRow,
    SessionRetrievalRow,
    ToolInvocationRow,
)


class SessionOwners:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def claim(self, session_id: str, owner: str) -> str:
        """The session's owner: ``owner`` when nobody had it (it is claimed now, atomically
        across replicas), else whoever did."""
        insert = upsert_insert(self.engine, SessionOwnerRow).values(
            session_id=session_id, owner=owner
        )
        with Session(self.engine) as session, session.begin():
            session.execute(insert.on_conflict_do_nothing(index_elements=["session_id"]))
            found = session.scalar(
                select(SessionOwnerRow.owner).where(SessionOwnerRow.session_id == session_id)
            )
        return found or owner

    def owner(self, session_id: str) -> str | None:
        with Session(self.engine) as session:
            return session.scalar(
                select(SessionOwnerRow.owner).where(SessionOwnerRow.session_id == session_id)
            )

    def recorded(self, session_id: str) -> bool:
        """Whether anything of the session is stored: messages, recorded calls or action
        memory (a session from before sign-in was configured has no owner row)."""
        with Session(self.engine) as session:
            for column in (
                ChatSessionRow.session_id,
                ToolInvocationRow.session_id,
                SessionRetrievalRow.session_id,
            ):
                found = session.scalar(select(column).where(column == session_id).limit(1))
                if found is not None:
                    return True
        return False
