"""The ``tool_invocation`` record: one row per tool call, blocked calls included."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from superbiz.storage._storable import without_nul
from superbiz.storage.models import ToolInvocationRow, utcnow

#: the one tool the assistant offers (``superbiz.governance.tool``), as its calls are recorded
TOOL_NAME = "lookup_knowledge"


@dataclass(frozen=True, slots=True)
class Invocation:
    session_id: str
    turn: int
    step: int
    tool_name: str
    arguments: dict[str, Any]
    domain: str | None
    relevance_level: str | None
    dedup_reason: str | None
    retrieval_details: dict[str, Any] | None
    executed: bool
    verdict: str
    water_level: str
    latency_ms: float
    error: str | None = None
    origin: str = "model"  # "plan": code ran it before the model's first step; "user": a person
    #: the OpenTelemetry trace the call ran in (32 hex digits), when one was recording
    trace_id: str | None = None
    id: int | None = None
    created_at: datetime = field(default_factory=utcnow)


_COLUMNS = tuple(f for f in Invocation.__dataclass_fields__ if f != "id")
#: columns holding text a model or a client wrote (PostgreSQL refuses NUL in them)
_MODEL_TEXT = ("tool_name", "arguments", "error", "retrieval_details")


class InvocationRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, invocation: Invocation) -> int:
        """Record one call; what the model wrote (arguments, a tool name) without NUL."""
        values = {name: getattr(invocation, name) for name in _COLUMNS}
        for name in _MODEL_TEXT:
            values[name] = without_nul(values[name])
        row = ToolInvocationRow(**values)
        with Session(self.engine) as session, session.begin():
            session.add(row)
            session.flush()
            return row.id

    def for_session(self, session_id: str) -> list[Invocation]:
        query = (
            select(ToolInvocationRow)
            .where(ToolInvocationRow.session_id == session_id)
            .order_by(ToolInvocationRow.id)
        )
        with Session(self.engine) as session:
            return [
                Invocation(id=row.id, **{name: getattr(row, name) for name in _COLUMNS})
                for row in session.scalars(query)
            ]

    def turn_exists(self, session_id: str, turn: int) -> bool:
        query = select(ToolInvocationRow.id).where(
            ToolInvocationRow.session_id == session_id, ToolInvocationRow.turn == turn
        )
        with Session(self.engine) as session:
            return session.scalar(query.limit(1)) is not None

    def last_turn(self, session_id: str) -> int:
        """The highest turn recorded for the session (0 when none)."""
        query = select(func.max(ToolInvocationRow.turn)).where(
            ToolInvocationRow.session_id == session_id
        )
        with Session(self.engine) as session:
            return session.scalar(query) or 0

    def discard_turn(self, session_id: str, turn: int) -> None:
        """Delete the rows of one turn (a turn that failed is not kept half-recorded)."""
        with Session(self.engine) as session, session.begin():
            session.execute(
                delete(ToolInvocationRow).where(
                    ToolInvocationRow.session_id == session_id, ToolInvocationRow.turn == turn
                )
            )

    def clear_session(self, session_id: str) -> None:
        with Session(self.engine) as session, session.begin():
            session.execute(
                delete(ToolInvocationRow).where(ToolInvocationRow.session_id == session_id)
            )
