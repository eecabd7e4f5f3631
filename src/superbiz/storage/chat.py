"""Conversations: chat sessions and their messages; answers keep their evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, func, or_, select, update
from sqlalchemy.orm import Session

from superbiz.storage._storable import without_nul
from superbiz.storage.models import ChatMessageRow, ChatSessionRow, SessionOwnerRow, utcnow


@dataclass(frozen=True, slots=True)
class ChatMessage:
    session_id: str
    turn: int
    role: str  # user | assistant
    content: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    #: an answer's source (``model``, ``repaired``, ``extractive``, ``fallback``,
    #: ``no_evidence``); None for a question
    answer_source: str | None = None
    #: the OpenTelemetry trace of the turn (32 hex digits), when one was recording
    trace_id: str | None = None


def evidence_of(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Every document ``messages`` showed, once each, latest content kept."""
    docs: dict[str, dict[str, Any]] = {}
    for message in messages:
        for item in message.evidence:
            docs.pop(item["path"], None)
            docs[item["path"]] = item
    return list(docs.values())


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session as a list shows it: its name (or first question) and when."""

    session_id: str
    title: str | None
    first_question: str
    turns: int
    created_at: datetime
    updated_at: datetime
    #: whose it is (``session_owners``); None: started before sign-in was configured
    owner: str | None = None


class ChatRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_turn(self, session_id: str, turn: int, question: str, answer: ChatMessage) -> None:
        """Store a question and its answer together, in one transaction; what a model
        wrote (answer, plan) without NUL, which PostgreSQL cannot store."""
        with Session(self.engine) as session, session.begin():
            row = session.get(ChatSessionRow, session_id)
            if row is None:
                session.add(ChatSessionRow(session_id=session_id))
            else:
                row.updated_at = utcnow()
            session.add(
                ChatMessageRow(
                    session_id=session_id, turn=turn, role="user", content=without_nul(question)
                )
            )
            session.add(
                ChatMessageRow(
                    session_id=session_id,
                    turn=turn,
                    role="assistant",
                    content=without_nul(answer.content),
                    evidence=without_nul(answer.evidence),
                    plan=without_nul(answer.plan),
                    answer_source=answer.answer_source,
                    trace_id=answer.trace_id,
                )
            )

    def messages(self, session_id: str) -> list[ChatMessage]:
        query = (
            select(ChatMessageRow)
            .where(ChatMessageRow.session_id == session_id)
            .order_by(ChatMessageRow.id)
        )
        with Session(self.engine) as session:
            return [
                ChatMessage(
                    r.session_id,
                    r.turn,
                    r.role,
                    r.content,
                    list(r.evidence or []),
                    r.plan,
                    r.answer_source,
                    r.trace_id,
                )
                for r in session.scalars(query)
            ]

    def last_turn(self, session_id: str) -> int:
        query = select(func.max(ChatMessageRow.turn)).where(ChatMessageRow.session_id == session_id)
        with Session(self.engine) as session:
            return session.scalar(query) or 0

    def turn_exists(self, session_id: str, turn: int) -> bool:
        query = select(ChatMessageRow.id).where(
            ChatMessageRow.session_id == session_id, ChatMessageRow.turn == turn
        )
        with Session(self.engine) as session:
            return session.scalar(query.limit(1)) is not None

    def exists(self, session_id: str) -> bool:
        with Session(self.engine) as session:
            return session.get(ChatSessionRow, session_id) is not None

    def evidence(self, session_id: str) -> list[dict[str, Any]]:
        """Every document shown in the session, once each, latest content kept."""
        return evidence_of(self.messages(session_id))

    def clear(self, session_id: str) -> None:
        with Session(self.engine) as session, session.begin():
            session.execute(delete(ChatMessageRow).where(ChatMessageRow.session_id == session_id))
            session.execute(delete(ChatSessionRow).where(ChatSessionRow.session_id == session_id))

    def summaries(
        self,
        session_ids: Sequence[str] | None = None,
        limit: int = 200,
        *,
        owner: str | None = None,
        unowned: bool = False,
    ) -> list[SessionSummary]:
        """Sessions, latest first: those named (``session_ids``), or all of them; with
        ``owner``, only that person's (and with ``unowned`` those nobody claimed too)."""
        query = (
            select(ChatSessionRow, SessionOwnerRow.owner)
            .outerjoin(SessionOwnerRow, SessionOwnerRow.session_id == ChatSessionRow.session_id)
            .order_by(ChatSessionRow.updated_at.desc())
            .limit(limit)
        )
        if session_ids is not None:
            query = query.where(ChatSessionRow.session_id.in_(list(session_ids)))
        if owner is not None:
            mine = SessionOwnerRow.owner == owner
            query = query.where(or_(mine, SessionOwnerRow.owner.is_(None)) if unowned else mine)
        with Session(self.engine) as session:
            found = session.execute(query).all()
            rows = [row for row, _ in found]
            owners = {row.session_id: who for row, who in found}
            ids = [r.session_id for r in rows]
            firsts: dict[str, str] = {}
            turns: dict[str, int] = {}
            if ids:
                questions = (
                    select(ChatMessageRow.session_id, ChatMessageRow.content, ChatMessageRow.turn)
                    .where(ChatMessageRow.session_id.in_(ids), ChatMessageRow.role == "user")
                    .order_by(ChatMessageRow.id)
                )
                for session_id, content, turn in session.execute(questions):
                    firsts.setdefault(session_id, content)
                    turns[session_id] = max(turns.get(session_id, 0), turn)
            return [
                SessionSummary(
                    r.session_id,
                    r.title,
                    firsts.get(r.session_id, ""),
                    turns.get(r.session_id, 0),
                    r.created_at,
                    r.updated_at,
                    owners.get(r.session_id),
                )
                for r in rows
            ]

    def rename(self, session_id: str, title: str | None) -> bool:
        """Name the session (``None``: back to its first question); False when there is
        no such session. The time it was last used does not change."""
        query = (
            update(ChatSessionRow)
            .where(ChatSessionRow.session_id == session_id)
            .values(title=title, updated_at=ChatSessionRow.updated_at)
        )
        with Session(self.engine) as session, session.begin():
            return bool(session.execute(query).rowcount)  # type: ignore[attr-defined]
