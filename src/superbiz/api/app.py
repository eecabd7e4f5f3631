"""The FastAPI app: chat (JSON and SSE), sessions, documents, map, health, metrics, page.

Every call into the assistant runs in a worker thread behind the assistant's one lock
(see ``superbiz.api.service``); a streamed turn hands its events to the request's own
queue, so concurrent sessions never see each other's events. Errors are JSON with a
message, never a stack trace.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, File, Form, Query, Request, Security, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api.events import sse, thread_emitter
from superbiz.api.metrics import RequestTimer
from superbiz.api.schemas import ChatRequest, ClearRequest, ErrorBody
from superbiz.api.service import NotFoundError, Service
from superbiz.config import Settings, load_settings
from superbiz.exceptions import (
    ConfigError,
    DocumentError,
    EmbeddingError,
    IndexMismatchError,
    LLMError,
    LLMUnavailableError,
    StoreError,
    SuperbizError,
    UnknownDomainError,
)

log = logging.getLogger(__name__)

STATIC = Path(str(resources.files("superbiz") / "api" / "static"))
#: multipart framing allowed on top of the file itself before a request is refused
UPLOAD_OVERHEAD = 64 * 1024

#: SuperbizError subclasses → (status, error kind); the first match wins
ERROR_STATUS: tuple[tuple[type[SuperbizError], int, str], ...] = (
    (UnknownDomainError, 404, "unknown_domain"),
    (DocumentError, 422, "invalid_document"),
    (ConfigError, 500, "configuration_error"),
    (LLMUnavailableError, 503, "llm_unavailable"),
    (LLMError, 502, "llm_error"),
    (IndexMismatchError, 409, "index_mismatch"),
    (StoreError, 503, "store_unavailable"),
    (EmbeddingError, 503, "embedding_unavailable"),
)

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "An API key is configured and was not sent."},
    422: {"model": ErrorBody, "description": "The request is malformed."},
}

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, scheme_name="X-API-Key")
bearer = HTTPBearer(auto_error=False, scheme_name="Bearer")


def error_status(exc: SuperbizError) -> tuple[int, str]:
    for kind, status, name in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, name
    return 400, "bad_request"


def _error(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    headers = extra.pop("headers", None)
    body = {"error": kind, "message": message, **extra}
    return JSONResponse(body, status_code=status, headers=headers)


def _service(request: Request) -> Service:
    return request.app.state.service  # type: ignore[no-any-return]


def require_api_key(
    request: Request,
    key: Annotated[str | None, Security(api_key_header)] = None,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None,
) -> None:
    """Write endpoints need the configured key; without one configured, they are open."""
    expected: str | None = request.app.state.api_key
    if not expected:
        return
    given = key or (credentials.credentials if credentials else None)
    if not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            401,
            "missing or wrong API key: send it as X-API-Key or Authorization: Bearer",
            headers={"WWW-Authenticate": "Bearer"},
        )


Authorized = [Depends(require_api_key)]


class UploadLimit:
    """Refuses an upload whose declared size is over the limit before it is read."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/api/documents"
        ):
            headers = dict(scope["headers"])
            length = headers.get(b"content-length", b"").decode() or "0"
            if length.isdigit() and int(length) > self.limit + UPLOAD_OVERHEAD:
                response = _error(
                    413,
                    "payload_too_large",
                    f"the upload is {length} bytes; the limit is {self.limit} bytes per file",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(
    settings: Settings | None = None,
    *,
    assistant: Runtime | None = None,
    warm_up: bool = True,
) -> FastAPI:
    """The app for ``settings`` (loaded from the environment when ``None``).

    Pass ``assistant`` to serve one opened elsewhere (tests, the benchmark): the app
    then never closes it. ``warm_up`` loads the embedder and map at start-up (lifespan).
    """
    settings = settings or (assistant.settings if assistant else load_settings())
    owns = assistant is None
    service = Service(assistant or open_runtime(settings), owns_assistant=owns)
    background: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if warm_up:
            await service.run(service.warm_up)
        yield
        if background:
            await asyncio.gather(*background, return_exceptions=True)
        await asyncio.to_thread(service.close)

    app = FastAPI(
        title="superbiz",
        summary="Knowledge assistant whose retrieval is governed by code.",
        description=(
            "Chat with citations, the governed lookups of every turn (relevance level, "
            "dedup reason, verdict, water level), documents and the knowledge map. "
            "`POST /api/chat_stream` answers with server-sent events: `plan`, `tool_call`, "
            "`tool_result`, `token`, `answer`, `error`, `done`."
        ),
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.api_key = settings.service.api_key
    app.state.background = background
    _handlers(app)
    _routes(app, service, background)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(UploadLimit, limit=service.settings.ingest.max_file_bytes)
    app.add_middleware(RequestTimer, metrics=service.metrics)
    return app


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg", ""), "type": e["type"]}
            for e in exc.errors()
        ]
        summary = "; ".join(
            f"body: {e['msg']}"
            if e["type"] == "json_invalid"
            else f"{'.'.join(e['loc'][1:] or e['loc']) or 'body'}: {e['msg']}"
            for e in errors
        )
        return _error(422, "invalid_request", summary or "invalid request", errors=errors)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
        return _error(exc.status_code, kind, str(exc.detail), headers=exc.headers)

    @app.exception_handler(NotFoundError)
    async def not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return _error(404, "not_found", str(exc.args[0] if exc.args else exc))

    @app.exception_handler(SuperbizError)
    async def superbiz_error(_: Request, exc: SuperbizError) -> JSONResponse:
        status, kind = error_status(exc)
        if status >= 500:
            log.error("%s: %s", kind, exc)
        return _error(status, kind, str(exc))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return _error(500, "internal_error", "internal server error; the server log has details")


def _routes(app: FastAPI, service: Service, background: set[asyncio.Task[None]]) -> None:
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    @app.get("/api/info", tags=["service"], summary="Model, governance marks, upload limits")
    async def info() -> dict[str, Any]:
        return {**service.info(), "auth_required": bool(app.state.api_key)}

    @app.post(
        "/api/chat",
        tags=["chat"],
        dependencies=Authorized,
        responses=_ERRORS,
        summary="Answer a question: answer, citations, plan and the turn's lookups",
    )
    async def chat(body: ChatRequest) -> dict[str, Any]:
        turn = await service.run(service.ask, body.session_id, body.question)
        return service.turn_view(turn)

    @app.post(
        "/api/chat_stream",
        tags=["chat"],
        dependencies=Authorized,
        response_class=StreamingResponse,
        responses={
            200: {
                "content": {"text/event-stream": {}},
                "description": "Events `plan`, `tool_call`, `tool_result`, `token`, "
                "`answer`, `error`, then `done`; each `data:` is one JSON object.",
            },
            **_ERRORS,
        },
        summary="Answer a question as server-sent events",
    )
    async def chat_stream(body: ChatRequest) -> StreamingResponse:
        return StreamingResponse(
            _stream_turn(service, background, body.session_id, body.question),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.post("/api/chat/clear", tags=["chat"], dependencies=Authorized, responses=_ERRORS)
    async def clear(body: ClearRequest) -> dict[str, Any]:
        """Forget a session: its messages, action memory and recorded calls."""
        await service.run(service.clear, body.session_id)
        return {"session_id": body.session_id, "cleared": True}

    @app.get("/api/sessions/{session_id}", tags=["sessions"])
    async def session(session_id: str) -> dict[str, Any]:
        """The session's messages, answers with their citations and plans."""
        return await service.run(service.session, session_id)

    @app.get("/api/sessions/{session_id}/invocations", tags=["sessions"])
    async def invocations(session_id: str) -> dict[str, Any]:
        """Every recorded tool call of the session, executed and blocked, with scores."""
        return await service.run(service.invocations, session_id)

    @app.post(
        "/api/documents",
        tags=["documents"],
        status_code=201,
        dependencies=Authorized,
        responses={
            **_ERRORS,
            413: {"model": ErrorBody, "description": "The file is over ingest.max-file-bytes."},
        },
    )
    async def upload(
        file: Annotated[UploadFile, File(description="A Markdown or text file.")],
        domain: Annotated[
            str | None, Form(description="Domain folder; default: general.", max_length=64)
        ] = None,
    ) -> dict[str, Any]:
        """Store and ingest one document, as `superbiz ingest` would (metadata, domain)."""
        limit = service.settings.ingest.max_file_bytes
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise HTTPException(
                413, f"the file is over the {limit}-byte limit (ingest.max-file-bytes)"
            )
        return await service.run(service.upload, file.filename or "", data, domain)

    @app.get("/api/documents", tags=["documents"])
    async def documents() -> dict[str, Any]:
        items = await service.run(service.documents)
        return {"documents": items, "count": len(items)}

    @app.delete(
        "/api/documents/{document_id:path}",
        tags=["documents"],
        dependencies=Authorized,
        responses=_ERRORS,
    )
    async def delete_document(document_id: str) -> dict[str, Any]:
        """Remove a document (its id is its path, e.g. `payment/refund.md`) from both
        stores and recompute its domain."""
        return await service.run(service.delete_document, document_id)

    @app.get(
        "/api/knowledge/map",
        tags=["knowledge"],
        responses={200: {"content": {"application/json": {}, "application/yaml": {}}}},
    )
    async def knowledge_map(
        fmt: Annotated[Literal["json", "yaml"], Query(alias="format")] = "json",
    ) -> Any:
        """The knowledge map the Planner sees; `format=yaml` gives it as the Planner
        reads it, within the map token budget."""
        data = await service.run(service.knowledge_map, fmt)
        if isinstance(data, str):
            return PlainTextResponse(data, media_type="application/yaml; charset=utf-8")
        return data

    @app.get("/healthz", tags=["service"], responses={503: {"description": "A store failed."}})
    async def healthz() -> JSONResponse:
        """200 when the database answers a query and the vector store is reachable."""
        data = await asyncio.to_thread(service.health)  # takes the lock itself, with a timeout
        return JSONResponse(data, status_code=200 if data["status"] == "ok" else 503)

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        """Prometheus text: lookups by outcome and dedup reason, levels, latencies."""
        return PlainTextResponse(
            service.metrics.exposition(),
            media_type="text/plain; version=0.0.4; charset=utf-8",
        )


async def _stream_turn(
    service: Service, background: set[asyncio.Task[None]], session_id: str, question: str
) -> AsyncIterator[bytes]:
    """Runs the turn as a task of its own that feeds this request's queue: if the client
    goes away, the turn still finishes and is stored; only its events are dropped."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
    emit = thread_emitter(loop, queue)
    started = time.perf_counter()

    async def produce() -> None:
        try:
            await service.run(service.ask, session_id, question, emit)
        except SuperbizError as exc:
            status, kind = error_status(exc)
            queue.put_nowait(("error", _stream_error(session_id, status, kind, str(exc))))
        except Exception:
            log.exception("streamed turn failed")
            queue.put_nowait(
                (
                    "error",
                    _stream_error(
                        session_id, 500, "internal_error", "internal error; see the server log"
                    ),
                )
            )
        finally:
            elapsed = round((time.perf_counter() - started) * 1000, 1)
            queue.put_nowait(("done", {"session_id": session_id, "elapsed_ms": elapsed}))
            queue.put_nowait(None)

    task = loop.create_task(produce())
    background.add(task)
    task.add_done_callback(background.discard)
    number = 0
    while (item := await queue.get()) is not None:
        number += 1
        yield sse(item[0], item[1], number)


def _stream_error(session_id: str, status: int, kind: str, message: str) -> dict[str, Any]:
    return {"session_id": session_id, "status": status, "error": kind, "message": message}
