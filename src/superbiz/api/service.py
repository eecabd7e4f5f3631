"""Every call the HTTP service makes into the assistant, each in a worker thread.

Turns of different sessions run at the same time: ``Runtime.ask`` orders the turns of
one session (a request in a busy session waits, then 409) and holds the store lock
only while it is not waiting for a model (see ``superbiz.agents.store_lock``). Reads
and document changes here take the store lock for their store calls; document changes
also run one at a time. Each streamed turn gets its own ``TokenStreamingModel`` and
reports to the listener of the request that asked, so events never mix.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import text

from superbiz.agents.planner import Plan
from superbiz.agents.runtime import Runtime
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.api.events import Emit, TokenStreamingModel, answer_chunks, tool_result_event
from superbiz.api.metrics import ServiceMetrics
from superbiz.api.responses import (
    ChatAnswer,
    Deleted,
    DocumentView,
    Health,
    HealthChecks,
    IngestSummary,
    KnowledgeMapView,
    PlanEvent,
    RecordedInvocation,
    ServiceInfo,
    SessionHistory,
    SessionInvocations,
    SessionMessage,
    TokenEvent,
    ToolCallEvent,
    TurnEvent,
    Uploaded,
)
from superbiz.config import Settings
from superbiz.exceptions import DocumentError, first_line
from superbiz.governance.tool import TOOL_NAME, ToolOutcome
from superbiz.knowledge.documents import DEFAULT_DOMAIN, normalize_domain, parse_document
from superbiz.knowledge.ingest import Ingestor
from superbiz.knowledge.metadata import LLMMetadataWriter
from superbiz.knowledge.statistics import refresh_statistics
from superbiz.storage.repository import StoredDocument

log = logging.getLogger(__name__)

T = TypeVar("T")
UPLOADS = "uploads"
MAX_NAME_CHARS = 120
#: how long a health check waits for the stores before calling them busy
HEALTH_WAIT_S = 10.0


class NotFoundError(LookupError):
    """A document or session the caller named does not exist (→ 404)."""


class ConflictError(Exception):
    """An upload would replace a document it must not, or not without asking (→ 409)."""


def safe_filename(name: str | None, fallback: str = "document.md") -> str:
    """The last component of an uploaded file's name, with nothing that could leave the
    uploads folder or hide the file (separators, ``..``, leading dots, control characters).

    >>> safe_filename("../../etc/passwd.md"), safe_filename("..\\\\a b/支付 手册.md")
    ('passwd.md', '支付 手册.md')
    >>> safe_filename(".hidden.md"), safe_filename(""), safe_filename("a:b*?.txt")
    ('hidden.md', 'document.md', 'a_b_.txt')
    """
    base = unicodedata.normalize("NFKC", name or "").replace("\\", "/").split("/")[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C")
    base = re.sub(r"[^\w.\- ()\[\]@+,]+", "_", base).strip(" ._")
    base = re.sub(r"_{2,}", "_", base)
    if len(base) > MAX_NAME_CHARS:
        stem, dot, ext = base.rpartition(".")
        base = stem[: MAX_NAME_CHARS - len(ext) - 1] + dot + ext if dot else base[:MAX_NAME_CHARS]
    return base or fallback


def safe_domain(domain: str | None) -> str:
    """A domain usable as a folder name (``Payment Ops`` → ``payment-ops``).

    >>> safe_domain("../Payment Ops"), safe_domain(None), safe_domain("..")
    ('payment-ops', 'general', 'general')
    """
    cleaned = re.sub(r"[^\w-]+", "-", normalize_domain(domain or "")).strip("-_")
    return cleaned or DEFAULT_DOMAIN


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
        uploaded=_inside(Path(doc.source_file), uploads),
    )


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


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

    # -- threading ------------------------------------------------------------------------
    async def run(self, method: Callable[..., T], *args: Any) -> T:
        """``method(*args)`` in a worker thread."""
        return await anyio.to_thread.run_sync(partial(method, *args))

    async def run_turn(
        self, session_id: str, question: str, emit: Emit | None = None
    ) -> SupervisedTurn:
        """``ask`` in a worker thread of the turns' own pool: turns waiting for a model
        never take the threads that reads and health checks need."""
        return await anyio.to_thread.run_sync(
            partial(self.ask, session_id, question, emit), limiter=self._turn_threads
        )

    # -- chat ----------------------------------------------------------------------------
    def ask(self, session_id: str, question: str, emit: Emit | None = None) -> SupervisedTurn:
        """One turn; with ``emit`` it reports plan, tool calls, results, tokens, answer."""
        high_mark = self.settings.governance.high_min_calls
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

        try:
            turn = self.assistant.ask(
                session_id, question, on_plan=on_plan, on_lookup=on_lookup, model=streamer
            )
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
        return ChatAnswer.from_turn(turn, self.settings.governance.high_min_calls)

    def clear(self, session_id: str) -> None:
        self.assistant.clear_session(session_id)

    def session(self, session_id: str) -> SessionHistory:
        """The stored messages; citations without the content the model was shown."""
        chats = self.assistant.chats
        with self.stores.held():
            messages = chats.messages(session_id)
            if not messages and not chats.exists(session_id):
                raise NotFoundError(f"no session {session_id!r}")
        return SessionHistory(
            session_id=session_id,
            messages=[
                SessionMessage.model_validate(
                    {
                        "turn": m.turn,
                        "role": m.role,
                        "content": m.content,
                        "citations": m.evidence,
                        "plan": m.plan,
                    }
                )
                for m in messages
            ],
        )

    def invocations(self, session_id: str) -> SessionInvocations:
        with self.stores.held():
            rows = self.assistant.invocations.for_session(session_id)
            if not rows and not self.assistant.chats.exists(session_id):
                raise NotFoundError(f"no session {session_id!r}")
        return SessionInvocations(
            session_id=session_id,
            invocations=[
                RecordedInvocation.model_validate(
                    {**asdict(row), "created_at": row.created_at.isoformat()}
                )
                for row in rows
            ],
        )

    # -- documents -----------------------------------------------------------------------
    def documents(self) -> list[DocumentView]:
        with self.stores.held():
            stored = self.assistant.kb.documents.all()
        return [document_view(d, self.uploads) for d in stored]

    def upload(
        self, filename: str, data: bytes, domain: str | None, overwrite: bool = False
    ) -> Uploaded:
        """Store the file under ``uploads/<domain>/`` and ingest it the way ``superbiz
        ingest`` does (same metadata writer, same domain recompute).

        A document from a knowledge-base folder at the same path is never replaced; an
        earlier upload only with ``overwrite``."""
        with self._writes.held(), self.stores.held():
            return self._upload(filename, data, domain, overwrite)

    def _upload(self, filename: str, data: bytes, domain: str | None, overwrite: bool) -> Uploaded:
        folder = safe_domain(domain)
        name = safe_filename(filename)
        extensions = self.settings.ingest.extensions
        if Path(name).suffix.lower() not in extensions:
            raise DocumentError(name, f"unsupported file type (expected {', '.join(extensions)})")
        relative = PurePosixPath(folder, name)
        target = (self.uploads / folder / name).resolve()
        self._check_replace(str(relative), target, data, overwrite)
        # refuse binary, empty, wrongly encoded or malformed before storing
        parse_document(data, relative, self.settings.ingest.encodings)
        if not target.is_relative_to(self.uploads.resolve()):  # pragma: no cover - sanitised
            raise DocumentError(name, "file name leaves the uploads folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial_file = target.with_name(f".{target.name}.part")  # hidden: ingest skips it
        partial_file.write_bytes(data)
        os.replace(partial_file, target)

        assistant = self.assistant
        # the LLM describing documents does so outside the store lock: turns go on
        model = None if assistant.extractive else self.stores.releasing(assistant.model)
        ingestor = Ingestor(
            assistant.kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=assistant.domains,
        )
        # only this file: another replica's delete may have left an earlier upload in
        # this replica's folder, which a folder ingest would bring back
        report = ingestor.ingest([target], root=self.uploads)
        assistant.invalidate_map()
        path = str(relative)
        for skipped, reason in report.skipped:
            if skipped == path:
                target.unlink(missing_ok=True)
                raise DocumentError(path, reason)
        status = next(
            (
                label
                for label, paths in (
                    ("added", report.added),
                    ("updated", report.updated),
                    ("repaired", report.repaired),
                )
                if path in paths
            ),
            "unchanged",
        )
        stored = assistant.kb.documents.get(path)
        if stored is None:  # pragma: no cover - ingest reported no skip
            raise DocumentError(path, "the document was not stored")
        return Uploaded(
            status=status,
            document=document_view(stored, self.uploads),
            report=IngestSummary.model_validate(report.as_dict()),
        )

    def _check_replace(self, path: str, target: Path, data: bytes, overwrite: bool) -> None:
        """Refuse to replace a knowledge-base document, or an earlier upload with other
        content unless ``overwrite`` (the same bytes again are harmless: unchanged)."""
        existing = self.assistant.kb.documents.get(path)
        if existing is None:
            return
        if not _inside(Path(existing.source_file), self.uploads):
            raise ConflictError(
                f"{path} is a document from a knowledge-base folder and an upload never "
                "replaces it; rename the file or upload it to another domain"
            )
        if not overwrite and not (target.is_file() and target.read_bytes() == data):
            raise ConflictError(f"{path} was uploaded before; send overwrite=true to replace it")

    def delete_document(self, path: str) -> Deleted:
        """Remove a document from both stores and recompute its domain. An uploaded file
        goes first, so that a later upload's ingest cannot bring the document back."""
        with self._writes.held(), self.stores.held():
            return self._delete_document(path)

    def _delete_document(self, path: str) -> Deleted:
        kb = self.assistant.kb
        doc = kb.documents.get(path)
        if doc is None:
            raise NotFoundError(f"no document {path!r}")
        source = Path(doc.source_file)
        removed_file = False
        if _inside(source, self.uploads):
            source.unlink(missing_ok=True)
            removed_file = True
        kb.documents.delete([path])
        kb.store.delete_documents([path])
        refresh_statistics(kb)  # key frequency and thresholds, without the document
        self.assistant.domains.refresh({doc.domain})
        self.assistant.invalidate_map()
        return Deleted(deleted=path, domain=doc.domain, file_removed=removed_file)

    # -- knowledge map and health ---------------------------------------------------------
    def knowledge_map(self, fmt: str) -> KnowledgeMapView | str:
        """The map as JSON with each document's path, or as the YAML the Planner reads."""
        with self.stores.held():
            kmap = self.assistant.knowledge_map()
        if fmt == "yaml":
            return kmap.to_yaml(self.settings.planner.map_token_budget)
        data = kmap.as_dict()
        for entry, domain in zip(data["available_knowledge_domains"], kmap.domains, strict=True):
            for item, doc in zip(entry.get("documents", []), domain.documents, strict=False):
                item["path"] = doc.path
        return KnowledgeMapView.model_validate(data)

    def info(self, *, auth_required: bool) -> ServiceInfo:
        governance = self.settings.governance
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
        )

    def health(self) -> Health:
        """Checks both stores: a query on the database, a query on the vector index."""
        try:
            with self.stores.held(timeout=HEALTH_WAIT_S):
                return self._health()
        except TimeoutError as exc:
            return Health(status="unavailable", problems=[str(exc)])

    def _health(self) -> Health:
        kb = self.assistant.kb
        checks: dict[str, str] = {}
        problems: list[str] = []
        try:
            with kb.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = "failed"
            problems.append(f"database: {first_line(exc)}")
        try:
            store = kb.store
            if store.dimension is not None:
                store.index_state(["__healthz__"])  # a real query on the collection
                checks["vector_store"] = "ok"
            else:
                checks["vector_store"] = "ok (empty: nothing ingested yet)"
        except Exception as exc:
            checks["vector_store"] = "failed"
            problems.append(f"vector store: {first_line(exc)}")
        checked = HealthChecks.model_validate(checks)
        if problems:
            return Health(status="unavailable", checks=checked, problems=problems)
        return Health(status="ok", checks=checked, documents=len(kb.documents.all()))

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
