"""How failures reach a client: the status and kind of each error, the JSON body, and
the error responses ``/docs`` lists for each route."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

from superbiz.api.responses.errors import ErrorBody, FieldError
from superbiz.exceptions import (
    ConfigError,
    DocumentError,
    EmbeddingError,
    ForbiddenError,
    IdentityProviderError,
    IndexMismatchError,
    LLMError,
    LLMTimeoutError,
    LLMUnavailableError,
    SessionBusyError,
    SignInError,
    StoreError,
    SuperbizError,
    TurnCancelledError,
    UnknownDomainError,
)

log = logging.getLogger(__name__)

#: SuperbizError subclasses → (status, error kind); the first match wins
ERROR_STATUS: tuple[tuple[type[SuperbizError], int, str], ...] = (
    (UnknownDomainError, 404, "unknown_domain"),
    (SignInError, 401, "unauthorized"),
    (ForbiddenError, 403, "forbidden"),
    (IdentityProviderError, 502, "identity_provider_error"),
    (DocumentError, 422, "invalid_document"),
    (ConfigError, 500, "configuration_error"),
    (LLMTimeoutError, 504, "llm_timeout"),
    (LLMUnavailableError, 503, "llm_unavailable"),
    (LLMError, 502, "llm_error"),
    (IndexMismatchError, 409, "index_mismatch"),
    (SessionBusyError, 409, "session_busy"),
    (TurnCancelledError, 409, "turn_cancelled"),
    (StoreError, 503, "store_unavailable"),
    (EmbeddingError, 503, "embedding_unavailable"),
)


def error_status(exc: SuperbizError) -> tuple[int, str]:
    for kind, status, name in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, name
    return 400, "bad_request"


def reported_status(exc: SuperbizError) -> tuple[int, str]:
    """``error_status``, logged when the failure is the server's (5xx): the route's
    handler and the request guard, which runs before any route, report alike."""
    status, kind = error_status(exc)
    if status >= 500:
        log.error("%s: %s", kind, exc)
    return status, kind


def error_response(
    status: int,
    kind: str,
    message: str,
    *,
    errors: list[FieldError] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=kind, message=message, errors=errors)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


# -- what /docs lists -------------------------------------------------------------------

Responses = dict[int | str, dict[str, Any]]
ERROR_SCHEMA = {"schema": {"$ref": f"#/components/schemas/{ErrorBody.__name__}"}}


def documented_error(status: int, description: str) -> Responses:
    """An error response as ``/docs`` shows it: JSON even on a route that answers text
    or events (FastAPI would list a ``model`` under the route's own media type), so the
    schema is referenced by hand; ``create_app`` adds ``ErrorBody`` to the components."""
    return {status: {"description": description, "content": {"application/json": ERROR_SCHEMA}}}


#: every route can fail unexpectedly
INTERNAL: Responses = documented_error(500, "`internal_error`: the server log has details.")
INVALID: Responses = documented_error(422, "`invalid_request`: the request is malformed.")
UNAUTHORIZED: Responses = documented_error(401, "An API key is configured and was not sent.")
NOT_FOUND: Responses = documented_error(404, "`not_found`: no such session or document.")


def superbiz_errors(*statuses: int) -> Responses:
    """The error responses of ``ERROR_STATUS`` with these statuses, their kinds listed."""
    documented: Responses = {}
    for status in statuses:
        kinds = ", ".join(f"`{kind}`" for _, code, kind in ERROR_STATUS if code == status)
        documented.update(documented_error(status, kinds))
    return documented


#: a chat turn reaches the stores, the embedder and the LLM
TURN_ERRORS: Responses = {
    **UNAUTHORIZED,
    **INVALID,
    **superbiz_errors(404, 409, 502, 503, 504),
    **documented_error(500, "`configuration_error`, or `internal_error` (the log has details)."),
}
