"""Sessions and feedback: the page's list, a session's messages and recorded tool calls,
a cited passage, rename, delete, and a rating of one turn's answer.

A reader who may not read everything sees a session without the turns that used
anything withheld from it (``superbiz.knowledge.kb.withheld``). Reads take the store lock
for their store calls only; a document's text is read outside it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, replace
from functools import partial
from typing import Any
from urllib.parse import quote

from superbiz.access import Reader
from superbiz.agents.runtime import Runtime
from superbiz.api._passage import heading_path, level_of
from superbiz.api.metrics import ServiceMetrics
from superbiz.api.responses.sessions import (
    FeedbackView,
    Passage,
    RecordedInvocation,
    SessionDeleted,
    SessionHistory,
    SessionInvocations,
    SessionList,
    SessionMessage,
    SessionSummaryView,
)
from superbiz.exceptions import NotFoundError
from superbiz.knowledge.documents.ingested import document_text
from superbiz.knowledge.kb.access_rules import reader_limits
from superbiz.knowledge.kb.withheld import visible_turns
from superbiz.knowledge.sources.links import web_links
from superbiz.storage.chat import ChatMessage, SessionSummary
from superbiz.storage.feedback import Feedback, Rating


class SessionService:
    """What the session routes call; each method takes the store lock it needs."""

    def __init__(self, assistant: Runtime, metrics: ServiceMetrics) -> None:
        self.assistant = assistant
        self.settings = assistant.settings
        self.metrics = metrics
        self.stores = assistant.store_lock

    def history(self, session_id: str, reader: Reader) -> SessionHistory:
        """The stored messages; citations without the content the model was shown; an
        answer with its rating and trace id. The turns that used anything ``reader`` may
        not read are left out whole."""
        chats = self.assistant.chats
        with self.stores.held():
            messages = chats.messages(session_id)
            if not messages and not chats.exists(session_id):
                raise NotFoundError(f"no session {session_id!r}")
            ratings = self.assistant.feedback.for_session(session_id)
            shown = self._visible_turns(session_id, messages, reader)
        messages = [m for m in messages if shown is None or m.turn in shown]
        return SessionHistory(
            session_id=session_id,
            messages=[
                SessionMessage.model_validate(
                    {
                        "turn": m.turn,
                        "role": m.role,
                        "content": m.content,
                        "citations": _used(m.evidence, "quoted"),
                        "related": _used(m.evidence, "related"),
                        "plan": m.plan,
                        **(
                            {
                                "feedback": _feedback_view(ratings.get(m.turn)),
                                "trace_id": m.trace_id,
                            }
                            if m.role == "assistant"
                            else {}
                        ),
                    }
                )
                for m in messages
            ],
        )

    def rate(self, session_id: str, turn: int, rating: Rating, comment: str | None) -> FeedbackView:
        """Store a person's rating of one turn's answer (a chat turn, or an MCP session's
        lookups); 404 when the session has no such turn."""
        with self.stores.held():
            if not self.assistant.turn_exists(session_id, turn):
                raise NotFoundError(f"session {session_id!r} has no turn {turn}")
            saved = self.assistant.feedback.rate(session_id, turn, rating, comment or None)
        self.metrics.feedback.labels(rating).inc()
        view = _feedback_view(saved)
        assert view is not None
        return view

    def _visible_turns(
        self, session_id: str, messages: list[ChatMessage], reader: Reader
    ) -> Collection[int] | None:
        """The session's turns ``reader`` may see; None: all of them."""
        limits = reader_limits(self.assistant.kb, reader)
        if limits is None:
            return None
        calls = self.assistant.invocations.for_session(session_id)
        return visible_turns(messages, calls, limits)

    def invocations(self, session_id: str, reader: Reader) -> SessionInvocations:
        """The session's recorded calls, but those of turns ``reader`` may not see."""
        with self.stores.held():
            rows = self.assistant.invocations.for_session(session_id)
            messages = self.assistant.chats.messages(session_id)
            if not rows and not messages and not self.assistant.chats.exists(session_id):
                raise NotFoundError(f"no session {session_id!r}")
            limits = reader_limits(self.assistant.kb, reader)
        if limits is not None:
            shown = visible_turns(messages, rows, limits)
            rows = [row for row in rows if row.turn in shown]
        return SessionInvocations(
            session_id=session_id,
            invocations=[
                RecordedInvocation.model_validate(
                    {**asdict(row), "created_at": row.created_at.isoformat()}
                )
                for row in rows
            ],
        )

    def summaries(
        self,
        session_ids: list[str] | None,
        reader: Reader,
        *,
        owner: str | None = None,
        unowned: bool = False,
    ) -> SessionList:
        """The sessions named, or every session; with ``owner`` only that person's (and
        with ``unowned`` those nobody claimed): the route decides. For a restricted
        ``reader``, as it may see them: a session all of whose turns it may not see is not
        listed, and one whose first question it may not see is named by the first it may."""
        with self.stores.held():
            found = self.assistant.chats.summaries(session_ids, owner=owner, unowned=unowned)
            if reader_limits(self.assistant.kb, reader) is not None:
                found = [s for s in map(partial(self._as_seen, reader=reader), found) if s]
        return SessionList(sessions=[_summary_view(s) for s in found])

    def _as_seen(self, summary: SessionSummary, *, reader: Reader) -> SessionSummary | None:
        messages = self.assistant.chats.messages(summary.session_id)
        shown = self._visible_turns(summary.session_id, messages, reader)
        questions = [m for m in messages if m.role == "user" and (shown is None or m.turn in shown)]
        if not questions:
            return None
        turns = max(m.turn for m in questions)
        return replace(summary, first_question=questions[0].content, turns=turns)

    def rename(self, session_id: str, title: str | None) -> SessionSummaryView:
        chats = self.assistant.chats
        with self.stores.held():
            if not chats.rename(session_id, title):
                raise NotFoundError(f"no session {session_id!r}")
            return _summary_view(chats.summaries([session_id])[0])

    def delete(self, session_id: str) -> SessionDeleted:
        """Messages, recorded lookups and the session's retrieval memory, all of it."""
        with self.stores.held():
            if not self.assistant.chats.exists(session_id):
                raise NotFoundError(f"no session {session_id!r}")
        self.assistant.clear_session(session_id)
        return SessionDeleted(session_id=session_id, deleted=True)

    def passage(self, session_id: str, turn: int, ref: int, reader: Reader) -> Passage:
        """The passage behind ``[ref]`` of an answer, as the model was shown it; not
        found in a turn ``reader`` may not see."""
        assistant = self.assistant
        with self.stores.held():
            messages = assistant.chats.messages(session_id)
            shown = self._visible_turns(session_id, messages, reader)
            answers = [
                m
                for m in messages
                if m.turn == turn and m.role == "assistant" and (shown is None or m.turn in shown)
            ]
            item = next(
                (
                    e
                    for m in answers
                    for e in m.evidence
                    if e.get("ref") == ref and e.get("use", "quoted") != "shown"
                ),
                None,
            )
            if item is None:
                raise NotFoundError(f"no citation [{ref}] in turn {turn} of session {session_id!r}")
            calls = [
                {
                    "turn": row.turn,
                    "relevance_level": row.relevance_level,
                    "shown": (row.retrieval_details or {}).get("shown"),
                }
                for row in assistant.invocations.for_session(session_id)
            ]
            stored = assistant.kb.documents.get(item["path"])
            links = web_links(assistant.kb, [item["path"]])
        excerpt = str(item.get("content") or "")
        body = document_text(stored, self.settings.ingest) if stored else ""
        return Passage(
            session_id=session_id,
            turn=turn,
            ref=ref,
            title=item["title"],
            path=item["path"],
            domain=item.get("domain") or "",
            heading_path=heading_path(body or "", excerpt),
            excerpt=excerpt,
            relevance_level=level_of(item["path"], turn, calls),
            url=links.get(item["path"]),
            document_url="/api/documents/" + quote(item["path"]),
        )


def _summary_view(summary: SessionSummary) -> SessionSummaryView:
    return SessionSummaryView(
        session_id=summary.session_id,
        title=summary.title,
        first_question=summary.first_question,
        turns=summary.turns,
        created_at=summary.created_at.isoformat(),
        updated_at=summary.updated_at.isoformat(),
        owner=summary.owner,
    )


def _feedback_view(feedback: Feedback | None) -> FeedbackView | None:
    if feedback is None:
        return None
    return FeedbackView(
        session_id=feedback.session_id,
        turn=feedback.turn,
        rating=feedback.rating,
        comment=feedback.comment,
        updated_at=feedback.updated_at.isoformat(),
    )


def _used(evidence: list[dict[str, Any]], use: str) -> list[dict[str, Any]]:
    """The stored evidence the answer put to ``use`` (quoted or related); evidence stored
    before answers told them apart is all quoted."""
    return [item for item in evidence if item.get("use", "quoted") == use]
