"""Answer feedback: a person's thumbs up or down on one turn, with an optional comment.

One rating per turn: rating again replaces it (and its comment). It is kept apart from
the chat messages so that a turn without a stored answer (an MCP session's lookups)
can be rated too, and so that clearing a session forgets its ratings with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from superbiz.storage.db import upsert_insert
from superbiz.storage.models import TurnFeedbackRow, utcnow

Rating = Literal["up", "down"]
RATINGS: tuple[Rating, ...] = ("up", "down")


@dataclass(frozen=True, slots=True)
class Feedback:
    session_id: str
    turn: int
    rating: Rating
    comment: str | None
    created_at: datetime
    updated_at: datetime


def _feedback(row: TurnFeedbackRow) -> Feedback:
    rating: Rating = "up" if row.rating == "up" else "down"
    return Feedback(row.session_id, row.turn, rating, row.comment, row.created_at, row.updated_at)


class FeedbackRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def rate(self, session_id: str, turn: int, rating: Rating, comment: str | None) -> Feedback:
        """Store (or replace) the turn's rating; two raters of one turn do not collide."""
        now = utcnow()
        values = {
            "session_id": session_id,
            "turn": turn,
            "rating": rating,
            "comment": comment,
            "created_at": now,
            "updated_at": now,
        }
        insert = upsert_insert(self.engine, TurnFeedbackRow).values(**values)
        statement = insert.on_conflict_do_update(
            index_elements=["session_id", "turn"],
            set_={"rating": rating, "comment": comment, "updated_at": now},
        )
        with Session(self.engine) as session, session.begin():
            session.execute(statement)
            row = session.get(TurnFeedbackRow, (session_id, turn))
            assert row is not None
            return _feedback(row)

    def for_session(self, session_id: str) -> dict[int, Feedback]:
        query = select(TurnFeedbackRow).where(TurnFeedbackRow.session_id == session_id)
        with Session(self.engine) as session:
            return {row.turn: _feedback(row) for row in session.scalars(query)}

    def since(self, since: datetime | None = None) -> list[Feedback]:
        """Every rating given or changed since ``since`` (all of them without)."""
        query = select(TurnFeedbackRow).order_by(TurnFeedbackRow.updated_at)
        if since is not None:
            query = query.where(TurnFeedbackRow.updated_at >= since)
        with Session(self.engine) as session:
            return [_feedback(row) for row in session.scalars(query)]

    def counts(self) -> dict[str, int]:
        """How many turns are rated up and down."""
        query = select(TurnFeedbackRow.rating, func.count()).group_by(TurnFeedbackRow.rating)
        with Session(self.engine) as session:
            found = {str(rating): int(n) for rating, n in session.execute(query)}
        return {rating: found.get(rating, 0) for rating in RATINGS}

    def clear_session(self, session_id: str) -> None:
        with Session(self.engine) as session, session.begin():
            session.execute(delete(TurnFeedbackRow).where(TurnFeedbackRow.session_id == session_id))
