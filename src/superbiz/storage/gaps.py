"""The questions asked since a time, each with the best evidence its lookups found.

One SQL query aggregates the ``tool_invocation`` record, so the report reads one row a
question however many lookups each made (100,000 lookups in well under a second on
SQLite). A question is a chat turn (its lookups together, its text the user's message)
or, outside a chat (an MCP session, ``superbiz lookup``), each lookup on its own, its
text the query.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    String,
    and_,
    case,
    exists,
    func,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.orm import aliased

from superbiz.storage.invocations import TOOL_NAME
from superbiz.storage.models import ChatMessageRow, ToolInvocationRow, TurnFeedbackRow

#: the levels at which a lookup answered the question
GOOD_LEVELS = ("PRECISE", "HIGHLY_RELEVANT")
REFERENCE = "REFERENCE"
#: a lookup withheld documents the session already had: the knowledge base had them
DOC_RETRIEVED = "doc_retrieved"

Evidence = Literal["good", "reference", "none"]
_EVIDENCE: dict[int, Evidence] = {2: "good", 1: "reference", 0: "none"}
#: answer sources that say the evidence was not enough
WEAK_SOURCES = ("fallback", "no_evidence")


@dataclass(frozen=True, slots=True)
class AskedQuestion:
    session_id: str
    turn: int
    question: str
    domain: str | None
    #: the best any of its executed lookups found
    evidence: Evidence
    #: whether any lookup ran at all (a question whose calls were all blocked searched
    #: nothing, so it says nothing about the knowledge base)
    searched: bool
    answer_source: str | None
    last_asked: datetime
    #: a document shown to the model (at REFERENCE level when the evidence is weak)
    closest: str | None
    chat: bool


def asked_questions(
    engine: Engine, since: datetime | None = None, *, weak_only: bool = False
) -> list[AskedQuestion]:
    """Every question with a lookup recorded since ``since`` (all without), oldest first.
    ``weak_only``: only those that can be gaps (no good evidence, an answer that fell
    back or had no evidence, or a rating): most traffic is answered, and leaving it in
    the database is what keeps the report fast."""
    found = _chat_questions(engine, since, weak_only) + _lookup_questions(engine, since, weak_only)
    found.sort(key=lambda q: q.last_asked)
    return found


def _good(ti: type[ToolInvocationRow]) -> ColumnElement[bool]:
    """A lookup that answered: a good level, or documents the session already had."""
    level = func.coalesce(ti.relevance_level, "")
    reason = func.coalesce(ti.dedup_reason, "")
    return and_(ti.executed, or_(level.in_(GOOD_LEVELS), reason == DOC_RETRIEVED))


def _closest(ti: type[ToolInvocationRow]) -> ColumnElement[str | None]:
    """The first document a REFERENCE lookup showed (the evidence that came closest);
    the record's JSON is read for those rows only, the costly part of the query."""
    shown = ti.retrieval_details[("shown", 0)].as_string()
    return case((ti.relevance_level == REFERENCE, shown), else_=None)


def _chat_questions(engine: Engine, since: datetime | None, weak_only: bool) -> list[AskedQuestion]:
    """Chat turns, each with its lookups together (one pass over the questions, each
    turn's lookups found by index: no sort of the whole record)."""
    ti = ToolInvocationRow
    user = aliased(ChatMessageRow)
    answer = aliased(ChatMessageRow)
    best = func.max(case((_good(ti), 2), (ti.relevance_level == REFERENCE, 1), else_=0))
    # once per turn, not once per lookup as a join would
    source = (
        select(answer.answer_source)
        .where(
            answer.session_id == user.session_id,
            answer.turn == user.turn,
            answer.role == "assistant",
        )
        .limit(1)
        .scalar_subquery()
    )
    query = (
        select(
            user.session_id,
            user.turn,
            user.content,
            func.min(ti.domain),
            best,
            func.max(case((ti.executed, 1), else_=0)),
            source,
            _text(func.max(ti.created_at)),
            func.min(_closest(ti)),
        )
        .select_from(user)
        .join(ti, and_(ti.session_id == user.session_id, ti.turn == user.turn))
        .where(user.role == "user", ti.tool_name == TOOL_NAME, ti.error.is_(None))
        .group_by(user.id, user.session_id, user.turn, user.content)
    )
    if since is not None:
        query = query.where(ti.created_at >= since)
    if weak_only:
        rated = exists().where(
            TurnFeedbackRow.session_id == user.session_id, TurnFeedbackRow.turn == user.turn
        )
        query = query.having(or_(best < 2, source.in_(WEAK_SOURCES), rated))
    with _reading(engine) as connection:
        return [
            AskedQuestion(
                session_id=sid,
                turn=turn,
                question=text,
                domain=domain,
                evidence=_EVIDENCE[int(level or 0)],
                searched=bool(ran),
                answer_source=answer_source,
                last_asked=_utc(last),
                closest=shown,
                chat=True,
            )
            for sid, turn, text, domain, level, ran, answer_source, last, shown in (
                connection.execute(query)
            )
        ]


def _lookup_questions(
    engine: Engine, since: datetime | None, weak_only: bool
) -> list[AskedQuestion]:
    """Lookups outside a chat turn (an MCP session, ``superbiz lookup``): each its own
    question, its text the query."""
    ti = ToolInvocationRow
    user = aliased(ChatMessageRow)
    in_chat = exists().where(
        user.session_id == ti.session_id, user.turn == ti.turn, user.role == "user"
    )
    query = select(
        ti.session_id,
        ti.turn,
        ti.arguments["query"].as_string(),
        ti.domain,
        case((_good(ti), 2), (ti.relevance_level == REFERENCE, 1), else_=0),
        ti.executed,
        _text(ti.created_at),
        _closest(ti),
    ).where(ti.tool_name == TOOL_NAME, ti.error.is_(None), ~in_chat)
    if since is not None:
        query = query.where(ti.created_at >= since)
    if weak_only:
        rated = exists().where(
            TurnFeedbackRow.session_id == ti.session_id, TurnFeedbackRow.turn == ti.turn
        )
        query = query.where(or_(~_good(ti), rated))
    with _reading(engine) as connection:
        return [
            AskedQuestion(
                session_id=sid,
                turn=turn,
                question=str(text),
                domain=domain,
                evidence=_EVIDENCE[int(level or 0)],
                searched=bool(ran),
                answer_source=None,
                last_asked=_utc(last),
                closest=shown,
                chat=False,
            )
            for sid, turn, text, domain, level, ran, last, shown in connection.execute(query)
            if text  # a malformed call has no query: no question to report
        ]


@contextmanager
def _reading(engine: Engine) -> Iterator[Connection]:
    """A connection for one report query. PostgreSQL's JIT compiles a plan its estimate
    calls costly (the record's JSON): 0.8 s of compiling for a 0.2 s scan of 100,000
    lookups, so it is off for these queries."""
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql("SET LOCAL jit = off")
        yield connection


def _text(column: Any) -> Any:
    """A timestamp read as the driver hands it: SQLite's text is parsed by ``_utc`` in C,
    five times faster than SQLAlchemy's own parsing of 20,000 rows (PostgreSQL hands
    back a ``datetime`` either way)."""
    return type_coerce(column, String)


def _utc(value: datetime | str) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def chat_question(engine: Engine, session_id: str, turn: int) -> tuple[str, datetime] | None:
    """The user's message of one chat turn and when it was asked."""
    query = select(ChatMessageRow.content, ChatMessageRow.created_at).where(
        ChatMessageRow.session_id == session_id,
        ChatMessageRow.turn == turn,
        ChatMessageRow.role == "user",
    )
    with engine.connect() as connection:
        row = connection.execute(query.limit(1)).first()
    return (row[0], _utc(row[1])) if row else None
