"""Every call the HTTP service makes into the assistant, each in a worker thread.

Turns of different sessions run at the same time: ``Runtime.ask`` orders the turns of
one session (a request in a busy session waits, then 409) and holds the store lock
only while it is not waiting for a model (see ``superbiz.agents.store_access``). Reads
and document changes here take the store lock for their store calls (an upload's ingest
lets go of it while it embeds, most of its time); document changes also run one at a
time. Each streamed turn gets its own ``TokenStreamingModel`` and reports to the
listener of the request that asked, so events never mix.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import asdict, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio.to_thread

from superbiz.access import Reader
from superbiz.agents.planner import Plan
from superbiz.agents.runtime import Runtime
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.api._passage import heading_path, level_of
from superbiz.api._running_turns import RunningTurns
from superbiz.api.events import Emit, TokenStreamingModel, answer_chunks, tool_result_event
from superbiz.api.health_checks import check_health
from superbiz.api.metrics import ServiceMetrics
from superbiz.api.responses import (
    ChatAnswer,
    Deleted,
    DocumentView,
    FeedbackView,
    Health,
    IngestSummary,
    KnowledgeMapView,
    Passage,
    PlanEvent,
    RecordedInvocation,
    ServiceInfo,
    SessionDeleted,
    SessionHistory,
    SessionInvocations,
    SessionList,
    SessionMessage,
    SessionSummaryView,
    TokenEvent,
    ToolCallEvent,
    TurnEvent,
    Uploaded,
)
from superbiz.config import Settings
from superbiz.exceptions import (
    NotFoundError,
    SuperbizError,
    TurnCancelledError,
)
from superbiz.governance.tool import ToolOutcome
from superbiz.knowledge.access_rules import reader_limits
from superbiz.knowledge.documents import normalize_domain
from superbiz.knowledge.gaps import GapReport, gap_report
from superbiz.knowledge.ingested import document_text
from superbiz.knowledge.lifecycle import UPLOADS, DocumentLifecycle, inside
from superbiz.knowledge.metadata import LLMMetadataWriter
from superbiz.knowledge.source_list import SourceList
from superbiz.knowledge.sources import SyncResult, web_links
from superbiz.knowledge.withheld import visible_turns
from superbiz.llm import deadline
from superbiz.storage.chat import ChatMessage, SessionSummary
from superbiz.storage.feedback import Feedback, Rating
from superbiz.storage.invocations import TOOL_NAME
from superbiz.storage.repository import StoredDocument
from superbiz.storage.sources import GIT

log = logging.getLogger(__name__)

T = TypeVar("T")


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


def document_view(doc: StoredDocument, uploads: Path) -> DocumentView:
    return DocumentView(
        id=doc.path,
        path=doc.path,
        title=doc.title,
        domain=doc.domain,
        size_bytes=doc.size_bytes,
        chunk_count=doc.chunk_count,
        covers=doc.covers,
        when_to_retrieve=doc.when_to_retrieve,
        tags=doc.tags,
        origin=doc.origin,
        uploaded=inside(Path(doc.source_file), uploads),
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


class Service:
    """What the routes call. ``run`` puts a blocking method in a worker thread; each
    method takes the locks it needs."""

    def __init__(
        self,
        assistant: Runtime,
        *,
        metrics: ServiceMetrics | None = None,
        owns_assistant: bool = False,
    ) -> None:
        self.assistant = assistant
        self.settings: Settings = assistant.settings
        self.metrics = metrics or ServiceMetrics()
        self.owns_assistant = owns_assistant
        self.stores = assistant.store_lock
        self.uploads = self.settings.data_dir / UPLOADS
        #: one upload, delete or ingest at a time, in this process and every other one
        self._writes = assistant.kb.write_lock
        self._turn_threads = anyio.CapacityLimiter(self.settings.service.max_concurrent_turns)
        self._running = RunningTurns()

    # -- threading ------------------------------------------------------------------------
    async def run(self, method: Callable[..., T], *args: Any) -> T:
        """``method(*args)`` in a worker thread."""
        return await anyio.to_thread.run_sync(partial(method, *args))

    async def run_turn(
        self,
        session_id: str,
        question: str,
        reader: Reader,
        emit: Emit | None = None,
        cancel: threading.Event | None = None,
    ) -> SupervisedTurn:
        """``ask`` in a worker thread of the turns' own pool: turns waiting for a model
        never take the threads that reads and health checks need."""
        return await anyio.to_thread.run_sync(
            partial(self.ask, session_id, question, reader, emit, cancel),
            limiter=self._turn_threads,
        )

    # -- chat ----------------------------------------------------------------------------
    def ask(
        self,
        session_id: str,
        question: str,
        reader: Reader,
        emit: Emit | None = None,
        cancel: threading.Event | None = None,
    ) -> SupervisedTurn:
        """One turn of ``reader``'s (it plans, searches and is answered from what it may
        read); with ``emit`` it reports plan, tool calls, results, tokens, answer.

        Setting ``cancel`` (from any thread), or :meth:`cancel_turn`, stops the turn at
        its next model call, lookup or streamed chunk with :class:`TurnCancelledError`;
        it is undone like a failed turn (no messages stored, its recorded lookups
        forgotten) and counted as ``cancelled``."""
        high_mark = self.settings.advanced.governance.high_min_calls
        announced: set[str] = set()
        streamer = (
            TokenStreamingModel(
                self.assistant.model,
                session_id,
                self._announcing(emit, announced),
                self.settings.chat.max_answer_chars,
            )
            if emit
            else None
        )

        def on_plan(plan: Plan) -> None:
            if emit:
                emit(PlanEvent.model_validate({"session_id": session_id, **plan.as_dict()}))

        def on_lookup(outcome: ToolOutcome) -> None:
            self.metrics.observe_lookup(outcome)
            if not emit:
                return
            if outcome.call_id and outcome.call_id not in announced:
                emit(
                    ToolCallEvent(
                        session_id=session_id,
                        step=streamer.step if streamer else 0,
                        call_id=outcome.call_id,
                        name=TOOL_NAME,
                        arguments=outcome.arguments,
                    )
                )
            emit(tool_result_event(session_id, outcome, high_mark))

        cancel = cancel or threading.Event()
        try:
            with self._running.running(session_id, cancel), deadline.cancellable(cancel):
                turn = self.assistant.ask(
                    session_id,
                    question,
                    on_plan=on_plan,
                    on_lookup=on_lookup,
                    model=streamer,
                    reader=reader,
                )
        except TurnCancelledError:
            self.metrics.turns.labels("cancelled").inc()
            log.info("turn of session %r cancelled by its caller", session_id)
            raise
        except Exception:
            self.metrics.turns.labels("error").inc()
            raise
        self.metrics.turns.labels(turn.result.stopped_by).inc()
        if emit:
            answer = turn.result.answer
            streamed = streamer.last_text if streamer else ""
            cut = streamer is not None and streamer.cut  # the answer event has the cut text
            if not cut and streamed.strip() != answer.strip():  # e.g. a plan's direct answer
                for piece in answer_chunks(answer):
                    emit(TokenEvent(session_id=session_id, step=0, text=piece))
            emit(self.turn_view(turn))
        return turn

    def cancel_turn(self, session_id: str) -> int:
        """Stop the session's running turn (``POST /api/chat/cancel``); how many turns
        were running."""
        return self._running.cancel(session_id)

    @staticmethod
    def _announcing(emit: Emit, announced: set[str]) -> Emit:
        """``emit``, noting the tool calls the model announced (``on_lookup`` then does
        not announce them again)."""

        def on_event(event: TurnEvent) -> None:
            if isinstance(event, ToolCallEvent):
                announced.add(event.call_id)
            emit(event)

        return on_event

    def turn_view(self, turn: SupervisedTurn) -> ChatAnswer:
        """The turn's body; a citation of a Git source's document links to it when the
        source has a ``web-url`` pattern."""
        view = ChatAnswer.from_turn(turn, self.settings.advanced.governance.high_min_calls)
        if view.citations and self.settings.sources.model_extra:
            with self.stores.held():
                links = web_links(self.assistant.kb, [c.path for c in view.citations])
            for citation in view.citations:
                citation.url = links.get(citation.path)
        return view

    def clear(self, session_id: str) -> None:
        self.assistant.clear_session(session_id)

    def session(self, session_id: str, reader: Reader) -> SessionHistory:
        """The stored messages; citations without the content the model was shown; an
        answer with its rating and trace id. The turns that used anything ``reader`` may
        not read are left out whole (``superbiz.knowledge.withheld``)."""
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

    def gaps(self, since: datetime | None, domain: str | None, reader: Reader) -> GapReport:
        """The knowledge-gaps report (``superbiz gaps``), of the questions about what
        ``reader`` may read."""
        kb = self.assistant.kb
        with self.stores.held():
            return gap_report(
                kb.engine,
                kb.embedder,
                kb.documents,
                self.settings.gap_config,
                since=since,
                domain=normalize_domain(domain) if domain else None,
                limits=reader_limits(kb, reader),
            )

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

    # -- the page's session list ------------------------------------------------------------
    def sessions(
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

    def rename_session(self, session_id: str, title: str | None) -> SessionSummaryView:
        chats = self.assistant.chats
        with self.stores.held():
            if not chats.rename(session_id, title):
                raise NotFoundError(f"no session {session_id!r}")
            return _summary_view(chats.summaries([session_id])[0])

    def delete_session(self, session_id: str) -> SessionDeleted:
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

    def document_text(self, path: str, reader: Reader) -> str:
        """A stored document's file, as it was ingested; not found for a reader who may
        not read it (404, not 403: whether it exists is not said either)."""
        with self.stores.held():
            stored = self._readable(path, reader)
        text = document_text(stored, self.settings.ingest) if stored else None
        if text is None:
            raise NotFoundError(f"no document {path!r}")
        return text

    # -- documents -----------------------------------------------------------------------
    def documents(self, reader: Reader) -> list[DocumentView]:
        """The documents ``reader`` may read."""
        with self.stores.held():
            stored = self.assistant.kb.documents.all()
            view = self.assistant.kb.view(reader)
        return [document_view(d, self.uploads) for d in stored if view.may_read(d.path)]

    def _readable(self, path: str, reader: Reader) -> StoredDocument | None:
        """The stored document at ``path`` when ``reader`` may read it (stores held)."""
        kb = self.assistant.kb
        stored = kb.documents.get(path)
        return stored if stored is not None and kb.view(reader).may_read(path) else None

    def upload(
        self, filename: str, data: bytes, domain: str | None, overwrite: bool = False
    ) -> Uploaded:
        """Store the file and ingest it the way ``superbiz ingest`` does (same metadata
        writer, same domain recompute): ``DocumentLifecycle.add``."""
        with self._writes.held(), self.stores.held():
            added = self._lifecycle().add(filename, data, domain, overwrite)
            self.assistant.invalidate_map()
        return Uploaded(
            status=added.status,
            document=document_view(added.document, self.uploads),
            report=IngestSummary.model_validate(added.report.as_dict()),
        )

    def delete_document(self, path: str, reader: Reader) -> Deleted:
        """Remove a document from both stores: ``DocumentLifecycle.remove``; one ``reader``
        may not read is not found (404)."""
        with self._writes.held(), self.stores.held():
            if self.assistant.kb.documents.get(path) and not self._readable(path, reader):
                raise NotFoundError(f"no document {path!r}")
            removed = self._lifecycle().remove(path)
            self.assistant.invalidate_map()
        return Deleted(
            deleted=removed.path,
            domain=removed.domain,
            file_removed=removed.file_removed,
            note=removed.note,
        )

    def _lifecycle(self) -> DocumentLifecycle:
        """The document verbs, with this assistant's metadata writer and domains; the LLM
        describing documents does so outside the store lock, so turns go on."""
        assistant = self.assistant
        model = None if assistant.extractive else self.stores.releasing(assistant.model)
        return DocumentLifecycle(
            assistant.kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=assistant.domains,
            # its embedding (most of an ingest) runs outside the store lock: turns go on
            outside_stores=self.stores.released,
        )

    # -- sources -------------------------------------------------------------------------
    def sources(self) -> SourceList:
        with self.stores.held():
            records = DocumentLifecycle(self.assistant.kb).list_sources()
        return SourceList.of(records, self.settings.sources.sync_interval_s)

    def sync_sources(self) -> list[SyncResult]:
        """Fetch every Git source and apply what changed; one that fails (a remote that
        cannot be reached) keeps its last good state and records the error, and the rest
        go on. The fetch takes no lock: turns wait only while changed files are written."""
        git = self._lifecycle().git()
        with self.stores.held():
            names = [s.name for s in git.sources.all() if s.kind == GIT]
        results = []
        for name in names:
            try:
                fetched = git.fetch(name)
                with self._writes.held(), self.stores.held():
                    results.append(git.apply(fetched))
                    self.assistant.invalidate_map()
            except SuperbizError as exc:  # recorded on the source, redacted
                log.warning("source %s: sync failed: %s", name, exc)
            except Exception:  # one source's failure never stops the others
                log.exception("source %s: sync failed", name)
        return results

    # -- knowledge map and health ---------------------------------------------------------
    def knowledge_map(self, fmt: str, reader: Reader) -> KnowledgeMapView | str:
        """The map ``reader`` sees, as JSON with each document's path, or as the YAML the
        Planner reads."""
        with self.stores.held():
            kmap = self.assistant.knowledge_map(reader)
        if fmt == "yaml":
            return kmap.to_yaml(self.settings.advanced.planner.map_token_budget)
        data = kmap.as_dict()
        for entry, domain in zip(data["available_knowledge_domains"], kmap.domains, strict=True):
            for item, doc in zip(entry.get("documents", []), domain.documents, strict=False):
                item["path"] = doc.path
        return KnowledgeMapView.model_validate(data)

    def info(self, *, auth_required: bool, sign_in: str = "none") -> ServiceInfo:
        governance = self.settings.governance_config
        return ServiceInfo(
            model=self.assistant.model.name,
            extractive=self.assistant.extractive,
            high_mark=governance.high_min_calls,
            low_max_calls=governance.low_max_calls,
            indicator=governance.indicator,
            governance=governance.enabled,
            max_upload_bytes=self.settings.ingest.max_file_bytes,
            extensions=list(self.settings.ingest.extensions),
            auth_required=auth_required,
            sign_in=sign_in,
        )

    def health(self) -> Health:
        """Checks both stores: a query on the database, a query on the vector index."""
        return check_health(self.assistant.kb, self.stores)

    def warm_up(self) -> None:
        """Load the embedder and build the map now, so the first question pays nothing."""
        try:
            with self.stores.held():
                self._warm_up()
        except Exception:  # the request that needs it reports the problem
            log.warning("warm-up failed", exc_info=True)

    def _warm_up(self) -> None:
        kb = self.assistant.kb
        kb.embedder.embed(["warm up"])
        self.assistant.knowledge_map()
        if kb.documents.all():
            _ = kb.searcher

    def close(self) -> None:
        if self.owns_assistant:
            with self.stores.held():
                self.assistant.close()


def _used(evidence: list[dict[str, Any]], use: str) -> list[dict[str, Any]]:
    """The stored evidence the answer put to ``use`` (quoted or related); evidence stored
    before answers told them apart is all quoted."""
    return [item for item in evidence if item.get("use", "quoted") == use]
