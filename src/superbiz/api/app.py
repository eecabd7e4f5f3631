"""The FastAPI app: the factory, its middleware and its error handlers.

The routes live in ``superbiz.api.routes``, one router per area, and each reaches its
own piece of the service (``superbiz.api.services``) through a dependency. Every call into
the assistant runs in a worker thread, turns of different sessions concurrently (see
``superbiz.api.services.chat``); a streamed turn hands its events to the request's own
queue, so concurrent sessions never see each other's events. Errors are JSON with a
message, never a stack trace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import cache
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException

from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api._threads import in_thread
from superbiz.api.errors import error_response, reported_status
from superbiz.api.guard import RequestGuard, RouteTemplates
from superbiz.api.metrics import RequestTimer
from superbiz.api.responses.chat import TURN_EVENTS
from superbiz.api.responses.errors import ErrorBody, FieldError
from superbiz.api.routes import ROUTERS
from superbiz.api.routes.page import STATIC
from superbiz.api.services import Services
from superbiz.api.services.documents import DocumentService
from superbiz.auth.authenticate import Authenticator
from superbiz.config import Settings, load_settings
from superbiz.exceptions import ConflictError, NotFoundError, SuperbizError

log = logging.getLogger(__name__)

#: error kinds of our own HTTPExceptions (the HTTP phrases change between versions)
KINDS = {413: "payload_too_large", 422: "invalid_request"}


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
    runtime = assistant or open_runtime(settings)
    services = Services(runtime, owns_assistant=owns)
    background: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if warm_up:
            await in_thread(services.status.warm_up)
        interval = settings.sources.sync_interval_s
        syncing = (
            asyncio.create_task(_sync_every(services.documents, interval)) if interval else None
        )
        yield
        if syncing is not None:
            syncing.cancel()
            await asyncio.gather(syncing, return_exceptions=True)
        if background:
            await asyncio.gather(*background, return_exceptions=True)
        await asyncio.to_thread(services.close)

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
        docs_url=None,  # served from the package: superbiz.api.routes.api_docs
        redoc_url=None,
    )
    app.state.service = services
    app.state.auth = auth = Authenticator(settings, runtime.kb.engine)
    app.state.background = background
    _handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    referenced = (ErrorBody, *TURN_EVENTS)
    app.openapi = _with_schemas(app.openapi, referenced)  # type: ignore[method-assign]
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    routes = RouteTemplates(lambda: app.routes)
    app.add_middleware(RequestGuard, settings=settings, auth=auth, routes=routes)
    app.add_middleware(RequestTimer, metrics=services.metrics)
    return app


async def _sync_every(documents: DocumentService, interval: float) -> None:
    """Sync the Git sources every ``interval`` seconds, in a worker thread (turns go on);
    a sync that fails is logged and recorded on its source, and the next one comes."""
    while True:
        await asyncio.sleep(interval)
        try:
            await in_thread(documents.sync_sources)
        except Exception:  # the stores were unavailable, say: try again next time
            log.exception("scheduled sync of the sources failed")


def _with_schemas(
    openapi: Callable[[], dict[str, Any]], models: tuple[type[BaseModel], ...]
) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document with ``models`` among its components: the error responses
    and the stream's ``itemSchema`` refer to them by hand (see ``superbiz.api.errors``
    and ``superbiz.api.routes.chat``)."""

    def schema() -> dict[str, Any]:
        document = openapi()  # built once, then cached by FastAPI
        components = document.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in _definitions(models).items():
            components.setdefault(name, definition)
        return document

    return schema


@cache
def _definitions(models: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    _, defined = models_json_schema(
        [(model, "serialization") for model in models],
        ref_template="#/components/schemas/{model}",
    )
    return dict(defined.get("$defs", {}))


#: what a field's pattern refuses, said in words (pydantic quotes the regular expression)
_PATTERN_MEANS = {
    "question": "must not contain control characters (NUL, ESC …); tabs and line breaks are fine",
    "session_id": "must not contain control characters or slashes",
    "comment": "must not contain control characters (NUL, ESC …); tabs and line breaks are fine",
}


#: a body sent without a JSON content type reaches the model unparsed
_NOT_JSON = "not read as JSON: send it with Content-Type: application/json"


def _message(error: Mapping[str, Any]) -> str:
    """pydantic's message for one invalid field, a pattern's in words."""
    field = str(error.get("loc", ("",))[-1])
    if error["type"] == "string_pattern_mismatch" and field in _PATTERN_MEANS:
        return _PATTERN_MEANS[field]
    return str(error.get("msg", ""))


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        json_body = "json" in request.headers.get("content-type", "")
        errors = [
            FieldError(
                loc=[str(p) for p in e.get("loc", ())],
                msg=_message(e) if json_body or tuple(e.get("loc", ())) != ("body",) else _NOT_JSON,
                type=e["type"],
            )
            for e in exc.errors()
        ]
        summary = "; ".join(
            f"body: {e.msg}"
            if e.type == "json_invalid"
            else f"{'.'.join(e.loc[1:] or e.loc) or 'body'}: {e.msg}"
            for e in errors
        )
        return error_response(422, "invalid_request", summary or "invalid request", errors=errors)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = KINDS.get(exc.status_code) or HTTPStatus(exc.status_code).phrase.lower().replace(
            " ", "_"
        )
        return error_response(exc.status_code, kind, str(exc.detail), headers=exc.headers)

    @app.exception_handler(NotFoundError)
    async def not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return error_response(404, "not_found", str(exc.args[0] if exc.args else exc))

    @app.exception_handler(ConflictError)
    async def conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return error_response(409, "conflict", str(exc))

    @app.exception_handler(SuperbizError)
    async def superbiz_error(_: Request, exc: SuperbizError) -> JSONResponse:
        status, kind = reported_status(exc)
        return error_response(status, kind, str(exc))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return error_response(
            500, "internal_error", "internal server error; the server log has details"
        )
